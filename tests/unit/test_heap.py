"""The collector is paused during a managed program's loads and what they leave is frozen; a library is untouched."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from storyjudge.core import heap


@pytest.fixture
def fresh_heap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(heap, "_managed", False)
    monkeypatch.setattr(heap, "_loads", 0)
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        gc.unfreeze()
        if not was_enabled:
            gc.disable()


def test_an_unmanaged_process_keeps_its_collector_and_nothing_is_frozen(fresh_heap: None) -> None:
    frozen = gc.get_freeze_count()
    with heap.loading():
        assert gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_loads_in_two_threads_pause_the_collector_until_the_last_ends_then_freeze(fresh_heap: None) -> None:
    heap.manage()
    first_started, second_may_end = threading.Event(), threading.Event()
    seen: list[bool] = []

    def second_load() -> None:
        first_started.wait()
        with heap.loading():
            seen.append(gc.isenabled())
            second_may_end.wait()

    other = threading.Thread(target=second_load)
    other.start()
    with heap.loading():
        first_started.set()
        loaded = [[index] for index in range(1000)]  # what a load leaves: alive after it
        while not seen:
            threading.Event().wait(0.001)
    assert seen == [False]
    assert not gc.isenabled()  # the other load is still running
    second_may_end.set()
    other.join()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(loaded)


def test_a_collector_the_program_had_turned_off_stays_off(fresh_heap: None) -> None:
    heap.manage()
    gc.disable()
    with heap.loading():
        pass
    assert not gc.isenabled()
