"""Query embedding shared between threads: branches that ask together share forward passes, and all get theirs."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from storyjudge.core import queryvectors

WAIT = 30.0  # a deadlock guard only


class Blocking:
    """A fake embedder whose first pass waits until the test lets it go; it records every batch."""

    def __init__(self, fail_first: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.entered, self.go = threading.Event(), threading.Event()
        self.fail_first = fail_first

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        if len(self.batches) == 1:
            self.entered.set()
            self.go.wait(WAIT)
            if self.fail_first:
                raise RuntimeError("the first pass fails")
        return [[float(len(text))] for text in texts]


def _run(fake: Blocking, monkeypatch: Any, groups: list[list[str]]) -> list[BaseException]:
    monkeypatch.setattr(queryvectors, "get_embedder", lambda name: fake)
    errors: list[BaseException] = []

    def ask(queries: list[str]) -> None:
        try:
            queryvectors.prepare_queries("fake", queries)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    first = threading.Thread(target=ask, args=(groups[0],))
    first.start()
    assert fake.entered.wait(WAIT)
    others = [threading.Thread(target=ask, args=(group,)) for group in groups[1:]]
    for thread in others:
        thread.start()
    while True:  # every other caller has put its queries on the waiting list
        with queryvectors._prepared_lock:
            if sum(len(g) for g in groups[1:]) == len(queryvectors._waiting.get("fake", {})):
                break
    fake.go.set()
    for thread in [first, *others]:
        thread.join(WAIT)
    return errors


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    with queryvectors._prepared_lock:
        queryvectors._prepared.clear()
        queryvectors._waiting.clear()
    yield
    with queryvectors._prepared_lock:
        queryvectors._prepared.clear()
        queryvectors._waiting.clear()


def test_callers_waiting_for_a_pass_share_the_next_one(monkeypatch: Any) -> None:
    monkeypatch.setattr(queryvectors, "QUERY_BATCH", 8)
    fake = Blocking()
    groups = [["a"], ["b1", "b2"], ["c1", "c2"], ["d"]]
    assert _run(fake, monkeypatch, groups) == []
    assert fake.batches[0] == ["a"]
    assert sorted(fake.batches[1]) == ["b1", "b2", "c1", "c2", "d"], "the waiting queries in one pass"
    assert len(fake.batches) == 2
    assert {text for (name, text) in queryvectors._prepared if name == "fake"} == {
        "a",
        "b1",
        "b2",
        "c1",
        "c2",
        "d",
    }


def test_a_failed_pass_fails_its_caller_only(monkeypatch: Any) -> None:
    fake = Blocking(fail_first=True)
    groups = [["a"], ["b"], ["c"]]
    errors = _run(fake, monkeypatch, groups)
    assert [str(e) for e in errors] == ["the first pass fails"]
    assert {text for (_, text) in queryvectors._prepared} == {"b", "c"}


def test_a_pass_takes_the_oldest_waiting_queries_up_to_the_batch_size(monkeypatch: Any) -> None:
    monkeypatch.setattr(queryvectors, "QUERY_BATCH", 2)
    fake = Blocking()
    assert _run(fake, monkeypatch, [["a"], ["b1", "b2", "b3"]]) == []
    assert fake.batches == [["a"], ["b1", "b2"], ["b3"]]
