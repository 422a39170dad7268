"""The heavy modules a run uses, imported once, on one thread, before the run's branches start.

Why: when two threads import the same package at once and the package's own imports go in a circle (numpy's
do: ``numpy.linalg`` imports ``numpy._typing``, whose imports need ``numpy``), Python's import system breaks the
apparent deadlock by handing one thread the unfinished module, which then fails with "cannot import name ...
from partially initialized module". A refine run of a novel did exactly this, in about one run of three: its
index branch imported Chroma (and numpy with it) while a preload thread imported the embedder's transformers
(and numpy) and a third thread imported networkx.

So nothing heavy is imported in a branch or in a background thread: a graph's first node, which runs alone
before any fan-out, calls ``load_before_branches``, and every branch after it finds the modules imported. The
lock makes concurrent runs of one process (the web UI's jobs, ``eval``'s items in threads) take turns, so
two first nodes never import at once either.

In a process that owns itself (the ``storyjudge`` command calls ``own_process``), the loads run without the
garbage collector (``collector_paused``): they leave hundreds of thousands of objects that live as long as the
process, none of them garbage, and CPython walks them all each time the heap has grown by a quarter. Measured,
``refine examples/macbeth-witches.md`` with the embedded model, three runs each way alternating: its second
progress line (the embedder and Chroma loaded) at 7.70-8.45 s with the pause, 8.78-8.94 s without; against
the scripted server, six runs each, its first progress line at 1.99-2.05 s with, 2.11-2.21 s without.
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


def _wanted(index: bool, embedder: str | None, modules: Iterable[str]) -> set[str]:
    wanted = {"numpy", "chromadb", "networkx"} if index else {"numpy"}
    return wanted | set(modules) | ({f"embedder:{embedder}"} if embedder else set())


def load_before_branches(
    *, index: bool = False, embedder: str | None = None, modules: Iterable[str] = ()
) -> None:
    """Import what the coming branches use: numpy always; with ``index`` Chroma and networkx; the embedder named.

    A run that searches scenes needs all of them (the index and retrieval), a coherence run only numpy; a caller
    names any other heavy module it is about to use from threads (``eval``'s ROUGE). Later calls with what is
    already loaded return at once.
    """
    wanted = _wanted(index, embedder, modules)
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
