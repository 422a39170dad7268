"""The heavy modules a run uses, imported once, on one thread, before the run's branches start.

Two threads importing numpy at once can get a partially initialized module (its imports go in a circle), so a
graph's first node, which runs alone before any fan-out, calls ``load_before_branches``; the lock makes concurrent
runs of one process take turns. Loads pause the garbage collector: the hundreds of thousands of objects they leave
live as long as the process, and CPython would walk them all each time the heap grows by a quarter.
"""

from __future__ import annotations

import gc
import importlib
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from storyjudge.core import progress

_lock = threading.Lock()
_loaded: set[str] = set()
_owned = False


def own_process() -> None:
    """Let ``collector_paused`` pause the collector: a library caller's process is left as it is."""
    global _owned
    _owned = True


@contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection during a big load; then what it loaded is kept out of later ones (``gc.freeze``)."""
    paused = _owned and gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.freeze()
            gc.enable()


def load_before_branches(
    *, index: bool = False, embedder: str | None = None, modules: Iterable[str] = ()
) -> None:
    """Import what the coming branches use: numpy always; with ``index`` Chroma and networkx; the embedder named."""
    wanted = {"numpy", "chromadb", "networkx"} if index else {"numpy"}
    wanted |= set(modules) | ({f"embedder:{embedder}"} if embedder else set())
    if wanted <= _loaded:
        return
    slow = bool(embedder) and f"embedder:{embedder}" not in _loaded  # seconds: said, not silent
    if slow:
        progress.emit("load", total=1, message=f"the {str(embedder).partition(':')[0]} embedding model")
    with _lock, collector_paused():
        for name in sorted(wanted - _loaded):
            if name.startswith("embedder:"):
                from storyjudge.core.embeddings import get_embedder

                get_embedder(name.partition(":")[2])  # torch, transformers and the weights
            elif name == "chromadb":
                importlib.import_module("storyjudge.core.chromastore")  # Chroma, with telemetry off first
            else:
                importlib.import_module(name)
            _loaded.add(name)
    if slow:
        progress.emit("load", advance=1)
