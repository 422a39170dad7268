"""Give the memory a finished run freed back to the system, so a process that runs one run after another stays flat.

glibc's allocator keeps freed memory for reuse in arenas, by default up to eight per core, each thread bound to
one; a run allocates and frees a lot (embedding, HTTP and JSON buffers, graph states) on threads that come and
go, and each arena's free space ends up scattered among its live blocks, where a trim cannot give it back.
Measured with ``python -m eval.bench.steady`` on 2 cores, a collection and ``malloc_trim`` after each step or
item: what glibc's blocks held grew about 0.5 MB a UI run, its arenas about 20. Resident memory from UI run 2 to
8 grew 11 to 114 MB with glibc's default arenas (seven measurements, median 66), 8 and 32 MB with ``ARENAS``;
an experiment's, from item 3 to 33, 79 MB and 21 MB. Importing this module sets the limit (the UI's job runner and
the experiment runner import it before their first run); elsewhere (another C library) neither the limit nor
the trim does anything.
"""

from __future__ import annotations

import ctypes
import gc
import os
from functools import cache
from typing import Any

ARENAS = 2
"""glibc malloc arenas a process may use (a setting of ``MALLOC_ARENA_MAX`` in the environment wins)."""
_M_ARENA_MAX = -8  # mallopt's parameter number in glibc's malloc.h


@cache
def _libc() -> Any:
    """The C library's symbols, or None where none can be loaded."""
    try:
        return ctypes.CDLL(None)
    except OSError:  # no C library to load symbols from
        return None


def limit_arenas() -> None:
    """Cap glibc's malloc arenas at ``ARENAS``; effective while the process has made few (before its runs).

    Not where the environment sets a limit: ``MALLOC_ARENA_MAX``, or ``arena_max`` in ``GLIBC_TUNABLES``.
    """
    if "MALLOC_ARENA_MAX" in os.environ or "arena_max" in os.environ.get("GLIBC_TUNABLES", ""):
        return
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_ARENA_MAX, ARENAS)


def release_freed() -> None:
    """Collect the finished run's reference cycles, then hand the heap's free pages back to the system.

    The collection is most of the cost (about 350 ms with the embedder loaded; the trim about 1 ms) and most
    of the gain: without it, what a run's cycles hold goes back a run late (measured before the arena limit:
    the UI grew 88 MB from run 2 to 8 instead of 11).
    """
    gc.collect()
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


limit_arenas()
