"""The one place that knows a run directory's layout, its ``meta.json`` and its lock.

``meta.json`` names the document and, per job kind, the settings that change results, so ``--resume`` refuses
another document or other settings (but ``RESUMABLE_CHANGES``); ``run.lock`` keeps a second process out.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPERATIONAL = frozenset(
    {"run_dir", "cache_dir", "concurrency", "request_timeout", "retry_budget_s", "preset"}
    | {"chroma_url", "scene_store"}
)
"""Context fields that change how a run works, never what it computes: not compared on resume."""

RESUMABLE_CHANGES = frozenset({"max_iterations", "patience", "target_score", "min_delta"})
"""Settings a resume may change when the user says so (``--allow-change``): when the refine loop stops."""


def run_settings(
    context: Mapping[str, Any], models: Mapping[str, str], prompt_versions: Mapping[str, str]
) -> dict[str, Any]:
    """The settings that change a run's results: the Context's non-operational fields, resolved models, prompts."""
    settings = {
        k: v for k, v in context.items() if k not in OPERATIONAL and k != "model" and not k.endswith("_model")
    }
    settings.update({f"{role}_model": spec for role, spec in models.items()})
    settings["prompts"] = dict(prompt_versions)
    return json.loads(json.dumps(settings, default=str))  # as meta.json will hold them


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The names of the settings that differ, sorted."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def document_hash(text: str) -> str:
    """Content hash of a document (SHA-256 of its UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def slug(name: str) -> str:
    """A file-system friendly short name."""
    cleaned = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()
    return cleaned[:40] or "document"


def default_run_dir(title: str, doc_hash: str, root: str | Path = "runs") -> Path:
    """``runs/<title>-<hash8>``: the same document lands in the same directory, so reruns reuse its cache."""
    return Path(root) / f"{slug(title)}-{doc_hash[:8]}"


def kind_settings(meta: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The settings of each job kind that ran in a directory (a ``meta.json`` of one kind: its ``settings``)."""
    found = meta.get("settings_by_kind")
    if isinstance(found, dict):
        return {str(k): v for k, v in found.items() if isinstance(v, dict)}
    kind, settings = meta.get("kind"), meta.get("settings")
    return {kind: settings} if isinstance(kind, str) and kind and isinstance(settings, dict) else {}


class RunDirMismatch(ValueError):
    """A run directory already belongs to another document, another kind of job or other settings."""


class RunDirBusy(RunDirMismatch):
    """Another process is running in this run directory."""


_held_locks: dict[str, int] = {}  # run directory -> open file descriptor of its lock, held until exit
_held_locks_lock = threading.Lock()


class _Entry:
    """A path inside a run directory: ``RunDir(root).result`` is ``root / "result.json"``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, run: RunDir, owner: type | None = None) -> Path:
        return run.root / self.name


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory."""

    root: Path

    result = _Entry("result.json")  # the full run record
    ckg = _Entry("ckg.json")  # the character knowledge graph as node-link JSON
    chroma = _Entry("chroma")  # embedded Chroma data
    cache = _Entry("cache")  # the LLM call cache
    checkpoints = _Entry("checkpoints.sqlite")  # LangGraph checkpoints
    checkpoint_blobs = _Entry("checkpoint_blobs")  # long texts the checkpoints refer to, one file per SHA-256
    story = _Entry("story")  # the scenes and CKG the run judges against, a file per content (core.storyref)
    report = _Entry("report.html")  # the self-contained HTML report
    summary = _Entry("summary.txt")  # the best summary of a refine run, the scored one of a score run
    summary_tree = _Entry("summary_tree.json")  # intermediate summaries of the book summarizer
    meta = _Entry("meta.json")  # which document, job kinds and settings the directory belongs to
    lock_file = _Entry("run.lock")  # held (flock) by the process running in this directory; holds its pid

    def lock(self) -> None:
        """Hold this directory's lock until the process exits; refuse when another process holds it."""
        key = str(self.root.resolve())
        with _held_locks_lock:
            if key in _held_locks:
                return
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
                os.close(fd)
                raise RunDirBusy(
                    f"Run directory {self.root} is in use by another run (process {holder}); wait for it to "
                    "finish, stop it, or choose a different --run-dir."
                ) from None
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            _held_locks[key] = fd

    def read_meta(self) -> dict[str, Any]:
        """``meta.json`` as a dict, or RunDirMismatch saying why it cannot be used."""
        try:
            existing = json.loads(self.meta.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            problem = "unreadable"
        except OSError as exc:
            problem = f"unreadable ({exc.strerror or exc})"
        else:
            if isinstance(existing, dict):
                return existing
            problem = f"malformed (a JSON {type(existing).__name__}, not an object)"
        raise RunDirMismatch(
            f"Run directory {self.root} has a {problem} {self.meta.name}; choose a different --run-dir or remove it."
        )

    def check(
        self,
        doc_hash: str,
        *,
        resume: bool = False,
        kind: str = "",
        settings: Mapping[str, Any] | None = None,
        allow_change: Iterable[str] = (),
    ) -> dict[str, Any] | None:
        """Refuse what ``claim`` would refuse, reading only; the directory's ``meta.json`` (None: no run yet)."""
        if self.root.exists() and not self.root.is_dir():
            raise RunDirMismatch(
                f"Run directory {self.root} is a file, not a directory; choose another --run-dir."
            )
        if not (self.meta.exists() or self.meta.is_symlink()):
            if resume:
                raise RunDirMismatch(
                    f"Nothing to resume in {self.root}: no earlier run of this document there."
                )
            if not self.root.exists():  # can it be made? (OSError when not: under a file, no permission)
                parent = next((p for p in self.root.absolute().parents if p.exists()), Path("/"))
                os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".storyjudge-probe-"))
            return None
        existing = self.read_meta()
        if existing.get("document_hash") != doc_hash:
            raise RunDirMismatch(
                f"Run directory {self.root} belongs to another document ({existing.get('source', '?')}); "
                "choose a different --run-dir or remove it."
            )
        by_kind = kind_settings(existing)
        # a process killed while starting may have kept its thread id before its settings: that is a run to resume
        if resume and kind and kind not in by_kind and f"{kind}_thread" not in existing:
            raise RunDirMismatch(
                f"Nothing to resume in {self.root}: no earlier {kind} run of this document there "
                "(run it without --resume)."
            )
        recorded = by_kind.get(kind) if kind else existing.get("settings")
        if resume and settings is not None and isinstance(recorded, dict):
            changed = [name for name in differences(recorded, settings) if name not in set(allow_change)]
            if changed:
                allowed = ", ".join(sorted(RESUMABLE_CHANGES))
                shown = "; ".join(
                    f"{name}: {recorded.get(name)!r} -> {settings.get(name)!r}" for name in changed
                )
                raise RunDirMismatch(
                    f"Cannot resume the run in {self.root} with other settings ({shown}). Resume with "
                    f"the run's own settings, or start a new run; --allow-change accepts {allowed}."
                )
        return existing

    def claim(
        self,
        doc_hash: str,
        source: str,
        *,
        resume: bool = False,
        kind: str = "",
        settings: Mapping[str, Any] | None = None,
        allow_change: Iterable[str] = (),
    ) -> None:
        """Mark this directory as the document's, locked for this process, with a job kind's settings.

        Refused (``check``): another document, a busy directory, a resume of a kind that never ran here, or one
        whose ``settings`` differ from that kind's last run (but for ``allow_change``).
        """
        changes = tuple(allow_change)
        if self.check(doc_hash, resume=resume, kind=kind, settings=settings, allow_change=changes) is None:
            self.root.mkdir(parents=True, exist_ok=True)
        self.lock()  # then the meta as the previous holder left it, checked again
        existing = self.check(doc_hash, resume=resume, kind=kind, settings=settings, allow_change=changes)
        existing = existing or {"document_hash": doc_hash, "source": source}
        if settings is not None:
            by_kind = kind_settings(existing)  # before this run's settings replace the last run's
            existing["settings"] = dict(settings)
            if kind:
                existing["settings_by_kind"] = {**by_kind, kind: dict(settings)}
        if kind:
            existing["kind"] = kind
        self.write_json(self.meta, existing)

    def write_json(self, path: Path, value: Any) -> None:
        """Write JSON atomically (``write_atomic``)."""
        write_atomic(path, json.dumps(value, indent=2, ensure_ascii=False, default=str).encode("utf-8"))


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file (and its folders) through a temporary file: never half a file, even with two writers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_once(path: Path, data: bytes) -> None:
    """Write a file named by its content, unless it exists (then it holds ``data`` already)."""
    if not path.exists():
        write_atomic(path, data)
