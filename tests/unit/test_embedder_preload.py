"""Loading the embedder in the background: a second request to preload never waits for the load in progress."""

from __future__ import annotations

import threading
from typing import Any

from storyjudge.core import embeddings

WAIT = 30.0  # a deadlock guard only


def test_a_second_preload_returns_while_the_first_is_still_loading(monkeypatch: Any) -> None:
    """``get_embedder`` holds its lock for the whole load; the refine graph and its index subgraph both preload."""
    loading, finish = threading.Event(), threading.Event()

    class SlowToLoad:
        def __init__(self) -> None:
            loading.set()
            finish.wait(WAIT)

    monkeypatch.setattr(embeddings, "MiniLMEmbeddings", SlowToLoad)
    monkeypatch.setattr(embeddings, "_embedders", {})
    monkeypatch.setattr(embeddings, "_preloading", set())
    embeddings.preload("minilm")
    assert loading.wait(WAIT)
    second = threading.Thread(target=embeddings.preload, args=("minilm",))
    second.start()
    second.join(WAIT / 3)
    returned = not second.is_alive()
    finish.set()
    second.join(WAIT)
    assert isinstance(embeddings.get_embedder("minilm"), SlowToLoad)  # the first load's, done once
    assert returned, "the second preload waited for the first load"
