"""UI runs on disk: one run directory per document, with everything the page shows saved after every step.

A UI run directory is an ordinary run directory plus ``document.txt`` (the narrative) and ``ui.json`` (settings,
the refine graph's thread, and a copy of its state after each step), so a reload or a restart loses nothing.
The same document always lands in the same directory, so its LLM cache makes repeated steps free.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storyjudge.core.context import ConfigError, Context
from storyjudge.core.keptruns import story_runs
from storyjudge.core.rundir import RunDir, default_run_dir, document_hash
from storyjudge.core.segmentation import segment_document

UI_FILE = "ui.json"
DOCUMENT_FILE = "document.txt"
STATE_VERSION = 1
RUN_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,80}$")
SETTING_FIELDS = ("model", "base_url", "ckg_samples")
MAX_TEXT_CHARS = 50 * 1024 * 1024


class RunNotFound(LookupError):
    """No UI run of that name exists."""


def clean_settings(raw: dict[str, Any] | None, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The model settings the page may change, validated as a Context does (an empty one means the default)."""
    merged: dict[str, Any] = {"ckg_samples": Context().ckg_samples, **(defaults or {})}
    merged.update({name: raw[name] for name in SETTING_FIELDS if raw and raw.get(name) is not None})
    settings: dict[str, Any] = {name: str(merged.get(name) or "").strip() for name in ("model", "base_url")}
    try:
        settings["ckg_samples"] = int(merged["ckg_samples"])
    except (TypeError, ValueError):
        raise ConfigError("Invalid setting: ckg_samples must be a whole number.") from None
    Context(**{k: v for k, v in settings.items() if v != ""})  # raises ConfigError on a bad value
    return settings


@dataclass
class RunSession:
    """One UI run: its directory and its saved state."""

    rd: RunDir
    state: dict[str, Any]
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def name(self) -> str:
        """The run's directory name, which is also its id in URLs."""
        return self.rd.root.name

    def save(self) -> None:
        """Write the state atomically."""
        with self.lock:
            self.state["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.rd.write_json(self.rd.root / UI_FILE, self.state)

    def update(self, **values: Any) -> None:
        """Change some keys and save."""
        with self.lock:
            self.state.update(values)
            self.save()

    def context(self) -> Context:
        """The Context of a step: the run's model settings, its directory, and environment defaults."""
        settings = self.state.get("settings") or {}
        values: dict[str, Any] = {k: v for k, v in settings.items() if v not in ("", None)}
        return Context(**values, run_dir=str(self.rd.root))

    def ckg(self) -> dict[str, Any] | None:
        """The run's knowledge graph (node-link JSON), once built."""
        return json.loads(self.rd.ckg.read_text(encoding="utf-8")) if self.rd.ckg.is_file() else None


def new_state(title: str, source: str, doc_hash: str, text: str, settings: dict[str, Any]) -> dict[str, Any]:
    """A fresh run's state: the narrative cut into scenes for reading, nothing computed yet."""
    scenes, rule = segment_document(text, Context().chunk_size)
    return {
        "version": STATE_VERSION,
        "title": title,
        "source": source,
        "doc_hash": doc_hash,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": settings,
        "segmentation": rule,
        "scenes": scenes,
        "index": None,
        "ckg_stats": {},
        "summary": None,
        "summary_given": False,  # the initial summary is the user's own, not the summarizer's
        "iterations": [],
        "thread": None,  # the refine graph's checkpoint thread (see steps.py)
        "next": [],  # the nodes the thread is paused before ([] when it has not started or has stopped)
        "stop_reason": "",
        "usage": {},
        "timings": {},
        "last_job": None,
    }


class RunStore:
    """The UI's run directories under one root (``runs/`` by default)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._sessions: dict[str, RunSession] = {}
        self._lock = threading.Lock()

    def create(self, title: str, text: str, source: str, settings: dict[str, Any]) -> RunSession:
        """Open the run of a document, creating it the first time; settings given now apply to later steps."""
        if len(text.split()) < 3:
            raise ValueError("The narrative has fewer than 3 words; paste or choose a story to summarize.")
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError("The narrative is over 50 MB; split it first.")
        doc_hash = document_hash(text)
        rd = RunDir(default_run_dir(title or "document", doc_hash, self.root))
        rd.claim(doc_hash, source)
        with self._lock:
            document = rd.root / DOCUMENT_FILE
            if not document.is_file():
                document.write_text(text, encoding="utf-8")
            if (rd.root / UI_FILE).is_file():
                session = self._load(rd)
                session.state["settings"] = settings
            else:
                session = RunSession(rd, new_state(title, source, doc_hash, text, settings))
            session.save()
            self._sessions[rd.root.name] = session
            return session

    def open(self, name: str) -> RunSession:
        """An existing run by name (the name is checked: no path tricks)."""
        if not RUN_NAME.match(name):
            raise RunNotFound(name)
        with self._lock:
            if name in self._sessions:
                return self._sessions[name]
            rd = RunDir(self.root / name)
            if not (rd.root / UI_FILE).is_file() or not (rd.root / DOCUMENT_FILE).is_file():
                raise RunNotFound(name)
            self._sessions[name] = self._load(rd)
            return self._sessions[name]

    def _load(self, rd: RunDir) -> RunSession:
        state = json.loads((rd.root / UI_FILE).read_text(encoding="utf-8"))
        job = state.get("last_job") or {}
        if job.get("status") == "running":  # the server stopped while it worked
            job.update(
                status="interrupted",
                error="The server stopped while this step ran; run it again (finished LLM calls are cached).",
            )
        return RunSession(rd, state)

    def list(self) -> list[dict[str, Any]]:
        """Every UI run here, most recently updated first."""
        runs = []
        for ui in self.root.glob(f"*/{UI_FILE}"):
            folder = ui.parent
            try:
                state = json.loads(ui.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            if RUN_NAME.match(folder.name):
                runs.append(
                    {
                        "name": folder.name,
                        "title": state.get("title", folder.name),
                        "updated": state.get("updated", ""),
                        "iterations": len(state.get("iterations") or []),
                        "runs": len(story_runs(folder)),
                    }
                )
        return sorted(runs, key=lambda r: r["updated"], reverse=True)
