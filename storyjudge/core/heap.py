"""The cyclic garbage collector kept out of a program's big loads, for programs that own their process.

Why: a full collection walks every object the collector tracks, and holds the interpreter lock while it does.
Importing LangGraph, LangChain and the OpenAI SDK, and loading torch with the embedder, grow the heap from a
few thousand objects to about 700,000, and CPython runs a full collection each time the old generation has
grown by a quarter: a ``refine`` run of Macbeth made nine of them in its first 12 s, 20 ms rising to 450 ms
each, while its LLM calls were waiting to be sent or read. Nothing those loads create is garbage: they are
modules, classes and weights that live as long as the process. Measured side by side (three runs each):
importing LangGraph and LangChain's OpenAI client took 2.51-2.54 s with the collector and 2.07-2.09 s
without it.

So a program that owns its process (the ``storyjudge`` command) calls ``manage()`` first; then each big load
runs inside ``loading()``: the collector is paused while any load is running (in any thread), and once the
last ends, everything alive is moved out of its reach (``gc.freeze``) and the collector is resumed. Later
collections walk only what the run itself creates. A library caller that did not ask for this gets nothing:
freezing the objects of someone else's process is the process owner's choice (frozen objects are still freed
when their last reference goes; only a reference cycle among them is never collected).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_managed = False
_loads = 0  # loads running now
_resume = False  # whether the collector was on when the first of them began


def manage() -> None:
    """Let ``loading()`` pause the collector and freeze what the loads leave (a program that owns its process)."""
    global _managed
    _managed = True


@contextmanager
def loading() -> Iterator[None]:
    """Around an import or model load: no collection while it runs, what it loaded frozen after (if managed)."""
    global _loads, _resume
    if not _managed:
        yield
        return
    with _lock:
        if _loads == 0:
            _resume = gc.isenabled()
            gc.disable()
        _loads += 1
    try:
        yield
    finally:
        with _lock:
            _loads -= 1
            if _loads == 0:
                gc.freeze()
                if _resume:
                    gc.enable()
