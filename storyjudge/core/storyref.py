"""A run's scenes and CKG, kept once by content hash and read by reference (``StoryRef``) in ``Send`` payloads.

Named by content, a kept file never changes, so a process's cached copy is never stale.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from storyjudge.core.records import NodeLinkGraph, Scene, StoryRef
from storyjudge.core.rundir import write_once

_HELD = 16
"""Kept values a process holds at once (a few stories' scenes and CKGs; a web UI serves several)."""

_held: OrderedDict[tuple[str, str], Any] = OrderedDict()
_lock = threading.Lock()


def keep(scenes: Sequence[Scene], ckg: NodeLinkGraph | None, folder: str | Path = "") -> StoryRef:
    """Keep a run's scenes and CKG in ``folder`` ("": this process only) and this process; their reference."""
    return StoryRef(
        folder=str(folder),
        scenes=_put(str(folder), "scenes", list(scenes)),
        ckg=_put(str(folder), "ckg", ckg or {}),
    )


def scenes_of(ref: StoryRef) -> list[Scene]:
    """The scenes a reference names, in document order (shared by the branches: read only)."""
    return _get(ref["folder"], "scenes", ref["scenes"])


def ckg_of(ref: StoryRef) -> NodeLinkGraph:
    """The CKG a reference names, as node-link JSON (shared by the branches: read only)."""
    return _get(ref["folder"], "ckg", ref["ckg"])


def _path(folder: str, kind: str, digest: str) -> Path:
    return Path(folder) / f"{kind}-{digest}.json"


def _hold(kind: str, digest: str, value: Any) -> None:
    with _lock:
        _held[(kind, digest)] = value
        _held.move_to_end((kind, digest))
        while len(_held) > _HELD:
            _held.popitem(last=False)


def _put(folder: str, kind: str, value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    if folder:
        write_once(_path(folder, kind, digest), text.encode("utf-8", "surrogatepass"))
    _hold(kind, digest, json.loads(text))  # as a fresh process reads it back: the same value either way
    return digest


def _get(folder: str, kind: str, digest: str) -> Any:
    with _lock:
        value = _held.get((kind, digest))
        if value is not None:
            _held.move_to_end((kind, digest))
            return value
    if not folder:
        raise ValueError(
            f"The run's {kind} were kept in the process that started it; run again without --resume, "
            "or give the run a run directory."
        )
    path = _path(folder, kind, digest)
    try:
        value = json.loads(path.read_text(encoding="utf-8", errors="surrogatepass"))
    except FileNotFoundError:
        raise ValueError(
            f"The run's {kind} ({path}) are missing; the run directory is incomplete. "
            "Start the run again without --resume."
        ) from None
    _hold(kind, digest, value)
    return value
