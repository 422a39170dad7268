"""Give the memory a finished run freed back to the system, so a process that runs one run after another stays flat.

glibc's allocator keeps freed memory in its arenas for reuse, and a run allocates and frees a lot (embedding,
HTTP and JSON buffers, graph states) on threads that come and go. Measured in one web UI process over eight
runs of new documents (``python -m eval.bench.steady``), with every Chroma client of a finished run closed:
resident memory still grew about 20 MB a run from run 2 to 8 (166 MB), though what Python still referenced
grew under 1 MB a run; with a collection and ``malloc_trim`` after each step, 11, 66 and 114 MB in three
measurements: the climb run after run is gone, but a single reading still swings by tens of MB.
Elsewhere (another C library) the trim does nothing.
"""

from __future__ import annotations

import ctypes
import gc
from functools import cache
from typing import Any


@cache
def _trim() -> Any:
    """The C library's ``malloc_trim`` (glibc's), or None where it has none."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:  # no C library to load symbols from
        return None


def release_freed() -> None:
    """Collect the finished run's reference cycles, then hand the heap's free pages back to the system.

    The collection is most of the cost (about 350 ms with the embedder loaded; the trim about 1 ms) and most
    of the gain: without it, what a run's cycles hold goes back a run late, and the UI measured above grew
    88 MB from run 2 to 8 instead of 11.
    """
    gc.collect()
    trim = _trim()
    if trim is not None:
        trim(0)
