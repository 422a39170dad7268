"""Checkpoints that store each long text once: a serializer for LangGraph's savers.

LangGraph's SQLite saver repeats every channel's whole value in every checkpoint. ``BlobSerializer`` stores long
strings and large values once, in files named by their SHA-256, and puts them back on read; checkpoints written
without references read as before.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Send

from storyjudge.core.rundir import write_once

MIN_CHARS = 256
"""Strings this long or longer are stored once, by hash (shorter ones cost less inline than a reference)."""

MARK = "__storyjudge_blob__"
"""The key of a reference: ``{MARK: sha256}`` stands for the text with that hash."""

MIN_VALUE_BYTES = 2048
"""Channel values and writes whose serialized form is this long or longer are stored once, by hash."""

VALUE_MARK = "__storyjudge_value__"
"""The key of a channel value's reference (``{VALUE_MARK: sha256}``), and a write's serialized type."""

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
        """Serialize with long strings and large values (a checkpoint's channels, a write) as references."""
        if type(obj) is dict and type(obj.get("channel_values")) is dict:
            values = {key: self._value_out(value) for key, value in obj["channel_values"].items()}
            return super().dumps_typed({**obj, "channel_values": values})
        kind, data = super().dumps_typed(self._out(obj))
        if len(data) < MIN_VALUE_BYTES:
            return kind, data
        return VALUE_MARK, self._store_value(kind, data).encode("ascii")

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Deserialize, putting the referenced values and texts back."""
        if data[0] == VALUE_MARK:
            return self._load_value(data[1].decode("ascii"))
        return self._in(super().loads_typed(data))

    def _value_out(self, value: Any) -> Any:
        value = self._out(value)
        kind, data = super().dumps_typed(value)
        return {VALUE_MARK: self._store_value(kind, data)} if len(data) >= MIN_VALUE_BYTES else value

    def _store_value(self, kind: str, data: bytes) -> str:
        blob = kind.encode("ascii") + b"\0" + data
        digest = hashlib.sha256(blob).hexdigest()
        write_once(self._path(digest), blob)  # before the checkpoint that refers to it
        return digest

    def _load_value(self, digest: str) -> Any:
        kind, _, data = self._read(digest).partition(b"\0")
        return self._in(super().loads_typed((kind.decode("ascii"), data)))

    def _out(self, value: Any) -> Any:
        if type(value) is str:
            return {MARK: self._store(value)} if len(value) >= MIN_CHARS else value
        return _each(value, self._out)

    def _in(self, value: Any) -> Any:
        if type(value) is dict and len(value) == 1 and MARK in value:
            return self._load(value[MARK])
        if type(value) is dict and len(value) == 1 and VALUE_MARK in value:
            return self._load_value(value[VALUE_MARK])
        return _each(value, self._in)

    def _path(self, digest: str) -> Path:
        return self.folder / digest[:2] / digest

    def _store(self, text: str) -> str:
        digest = self._hashes.get(text)
        if digest is not None:
            return digest
        data = text.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(data).hexdigest()
        write_once(self._path(digest), data)
        with self._lock:
            if len(self._hashes) >= _REMEMBERED:
                self._hashes.clear()
            self._hashes[text] = digest
        return digest

    def _read(self, digest: str) -> bytes:
        path = self._path(digest)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise ValueError(
                f"A checkpoint refers to {path}, which is missing; the run directory is incomplete. "
                "Start the run again without --resume."
            ) from None

    def _load(self, digest: str) -> str:
        text = self._texts.get(digest)
        if text is None:
            text = self._read(digest).decode("utf-8", "surrogatepass")
            with self._lock:
                if len(self._texts) >= _REMEMBERED:
                    self._texts.clear()
                self._texts[digest] = text
        return text


def _each(value: Any, change: Callable[[Any], Any]) -> Any:
    """``value`` with ``change`` applied to each item of its dicts, lists, tuples and Sends; anything else as is."""
    kind = type(value)
    if kind is dict:
        return {key: change(item) for key, item in value.items()}
    if kind is list:
        return [change(item) for item in value]
    if kind is tuple:
        return tuple(change(item) for item in value)
    if kind is Send:
        return Send(value.node, change(value.arg))
    return value
