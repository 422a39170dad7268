"""Checkpoints that store each long text once: a serializer for LangGraph's savers.

LangGraph's SQLite saver writes every channel's whole value into every checkpoint, and every Send payload into
its pending writes. Payloads and verdicts name the scenes they need (``core.storyref``, ``core.passages``), but
every superstep's checkpoint still repeats the document, the scenes, the summaries and the judge's rationales,
in each graph's namespace (on the witches' refine run, 3.3 MB of checkpoints without this, 1.9 MB with it).
``BlobSerializer`` replaces each string of at least ``MIN_CHARS`` characters by a reference to a file named by
the text's SHA-256, written once, and puts the text back when a checkpoint is read. What a graph reads from a
checkpoint is exactly what it wrote, so resuming is unchanged; checkpoints written without references (older
runs) read as before.
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Send

MIN_CHARS = 256
"""Strings this long or longer are stored once, by hash (shorter ones cost less inline than a reference)."""

MARK = "__storyjudge_blob__"
"""The key of a reference: ``{MARK: sha256}`` stands for the text with that hash."""

_REMEMBERED = 100_000
"""Texts whose hash (and file) this process remembers, so a text seen before is neither hashed nor written."""


class BlobSerializer(JsonPlusSerializer):
    """LangGraph's serializer, with long strings stored once each in ``folder`` (one file per text)."""

    def __init__(self, folder: str | Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.folder = Path(folder)
        self._hashes: dict[str, str] = {}  # text -> hash of texts known to be on disk
        self._texts: dict[str, str] = {}  # hash -> text read back
        self._lock = threading.Lock()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialize with long strings replaced by references (the files are written first)."""
        return super().dumps_typed(self._out(obj))

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Deserialize, putting the referenced texts back."""
        return self._in(super().loads_typed(data))

    def _out(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return {MARK: self._store(value)} if len(value) >= MIN_CHARS else value
        if kind is dict:
            return {key: self._out(item) for key, item in value.items()}
        if kind is list:
            return [self._out(item) for item in value]
        if kind is tuple:
            return tuple(self._out(item) for item in value)
        if kind is Send:
            return Send(value.node, self._out(value.arg))
        return value

    def _in(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            if len(value) == 1 and MARK in value:
                return self._load(value[MARK])
            return {key: self._in(item) for key, item in value.items()}
        if kind is list:
            return [self._in(item) for item in value]
        if kind is tuple:
            return tuple(self._in(item) for item in value)
        if kind is Send:
            return Send(value.node, self._in(value.arg))
        return value

    def _path(self, digest: str) -> Path:
        return self.folder / digest[:2] / digest

    def _store(self, text: str) -> str:
        digest = self._hashes.get(text)
        if digest is not None:
            return digest
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        path = self._path(digest)
        if not path.exists():  # written before the checkpoint that refers to it, atomically
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{digest}.{uuid.uuid4().hex}.tmp")
            tmp.write_bytes(text.encode("utf-8", "surrogatepass"))
            os.replace(tmp, path)
        with self._lock:
            if len(self._hashes) >= _REMEMBERED:
                self._hashes.clear()
            self._hashes[text] = digest
        return digest

    def _load(self, digest: str) -> str:
        text = self._texts.get(digest)
        if text is None:
            path = self._path(digest)
            try:
                text = path.read_bytes().decode("utf-8", "surrogatepass")
            except FileNotFoundError:
                raise ValueError(
                    f"A checkpoint refers to {path}, which is missing; the run directory is incomplete. "
                    "Start the run again without --resume."
                ) from None
            with self._lock:
                if len(self._texts) >= _REMEMBERED:
                    self._texts.clear()
                self._texts[digest] = text
        return text
