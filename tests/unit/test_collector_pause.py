"""Big loads pause the collector only in a process that owns itself, and what they leave is frozen after."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from storyjudge.core import heavy_imports


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(heavy_imports, "_owned", False)
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        gc.unfreeze()
        (gc.enable if was_enabled else gc.disable)()


def test_a_library_callers_process_keeps_its_collector_and_nothing_is_frozen(collector: None) -> None:
    frozen = gc.get_freeze_count()
    with heavy_imports.collector_paused():
        assert gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_an_owned_process_loads_without_the_collector_then_freezes_what_is_left(collector: None) -> None:
    heavy_imports.own_process()
    with heavy_imports.collector_paused():
        assert not gc.isenabled()
        loaded = [[index] for index in range(1000)]  # what a load leaves: alive after it
    assert gc.isenabled() and gc.get_freeze_count() >= len(loaded)
    gc.disable()  # a program that turned the collector off keeps it off
    with heavy_imports.collector_paused():
        pass
    assert not gc.isenabled()
