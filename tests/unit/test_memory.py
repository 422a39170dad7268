"""A process that imports ``storyjudge.core.memory`` keeps glibc's malloc arenas to ``ARENAS``.

Each thread that allocates while another does gets an arena of its own, up to eight per core, and freed memory
scattered over many arenas stays resident: a UI process grew about 20 MB a run that way. Counted in a fresh
process (a test process has made its arenas long before), from glibc's own report (``malloc_info``).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from storyjudge.core.memory import ARENAS

ROOT = Path(__file__).resolve().parents[2]

COUNT_ARENAS = """
import ctypes, sys, tempfile, threading
if sys.argv[1] == "limit":
    import storyjudge.core.memory
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
together = threading.Barrier(12)
def allocate():
    together.wait()
    for _ in range(20000):
        libc.free(libc.malloc(1000))
threads = [threading.Thread(target=allocate) for _ in range(12)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
with tempfile.NamedTemporaryFile() as report:
    handle = libc.fopen(report.name.encode(), b"w")
    libc.malloc_info(0, handle)
    libc.fclose(handle)
    print(open(report.name).read().count("<heap nr="))
"""


def arenas(mode: str) -> int:
    """glibc's arenas after twelve threads allocated at once, in a process that imported memory or not."""
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", COUNT_ARENAS, mode], env=env, capture_output=True, text=True, check=True
    )
    return int(done.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_threads_allocating_at_once_share_the_limited_arenas() -> None:
    assert arenas("none") > ARENAS  # the default, which the limit changes
    assert arenas("limit") <= ARENAS
