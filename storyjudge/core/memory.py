"""Give the memory a finished run freed back to the system (glibc arenas capped on import, heap trimmed)."""

from __future__ import annotations

import ctypes
import gc
import os
from functools import cache
from typing import Any

ARENAS = 2  # glibc malloc arenas a process may use (``MALLOC_ARENA_MAX`` in the environment wins)
_M_ARENA_MAX = -8  # mallopt's parameter number in glibc's malloc.h


@cache
def _libc() -> Any:
    try:
        return ctypes.CDLL(None)
    except OSError:  # no C library to load symbols from
        return None


def limit_arenas() -> None:
    """Cap glibc's malloc arenas at ``ARENAS`` (before the runs), unless the environment sets a limit."""
    if "MALLOC_ARENA_MAX" in os.environ or "arena_max" in os.environ.get("GLIBC_TUNABLES", ""):
        return
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_ARENA_MAX, ARENAS)


def release_freed() -> None:
    """Collect the finished run's reference cycles, then hand the heap's free pages back to the system."""
    gc.collect()
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


limit_arenas()
