"""The one place that knows a run directory's layout.

A run directory holds everything a run produced: ``result.json``, the CKG, the Chroma data, the LLM call cache,
the LangGraph checkpoints (with ``checkpoint_blobs/``, the long texts they refer to, each stored once) and
``report.html``. ``meta.json`` records which document it belongs to, so ``--resume`` refuses a directory made
for another document instead of mixing two runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


class RunDirMismatch(ValueError):
    """A run directory already belongs to another document."""


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory."""

    root: Path

    @property
    def result(self) -> Path:
        """The full run record."""
        return self.root / "result.json"

    @property
    def ckg(self) -> Path:
        """The character knowledge graph as node-link JSON."""
        return self.root / "ckg.json"

    @property
    def chroma(self) -> Path:
        """Embedded Chroma data."""
        return self.root / "chroma"

    @property
    def cache(self) -> Path:
        """LLM call cache."""
        return self.root / "cache"

    @property
    def checkpoints(self) -> Path:
        """LangGraph checkpoints (SQLite)."""
        return self.root / "checkpoints.sqlite"

    @property
    def checkpoint_blobs(self) -> Path:
        """Long texts the checkpoints refer to, one file per text, named by its SHA-256."""
        return self.root / "checkpoint_blobs"

    @property
    def report(self) -> Path:
        """The self-contained HTML report."""
        return self.root / "report.html"

    @property
    def summary_tree(self) -> Path:
        """Intermediate summaries of the book summarizer."""
        return self.root / "summary_tree.json"

    @property
    def meta(self) -> Path:
        """Which document this directory belongs to."""
        return self.root / "meta.json"

    def claim(self, doc_hash: str, source: str, *, resume: bool = False) -> None:
        """Mark this directory as the document's, refusing one that belongs to a different document."""
        if self.meta.exists():
            try:
                existing = json.loads(self.meta.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise RunDirMismatch(
                    f"Run directory {self.root} has an unreadable {self.meta.name}; "
                    "choose a different --run-dir or remove it."
                ) from None
            if existing.get("document_hash") != doc_hash:
                raise RunDirMismatch(
                    f"Run directory {self.root} belongs to another document ({existing.get('source', '?')}); "
                    "choose a different --run-dir or remove it."
                )
            return
        if resume:
            raise RunDirMismatch(f"Nothing to resume in {self.root}: no earlier run of this document there.")
        self.root.mkdir(parents=True, exist_ok=True)
        self.write_json(self.meta, {"document_hash": doc_hash, "source": source})

    def write_json(self, path: Path, value: Any) -> None:
        """Write JSON atomically (a crash never leaves half a file)."""
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(value, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        tmp.replace(path)
