"""Chroma: an embedded store that persists, reloads with storyjudge's embedder, and finds the right scene."""

from __future__ import annotations

from pathlib import Path

import pytest
from chromadb.api.client import SharedSystemClient

from storyjudge.core.chromastore import (
    StoryjudgeEmbeddingFunction,
    chroma_client,
    collection,
    open_collection,
)

SCENES = {
    "s1": "Three witches meet on a heath in thunder and lightning and plan to meet Macbeth.",
    "s2": "Lady Macbeth reads her husband's letter and resolves to push him to murder the king.",
    "s3": "Macbeth kills King Duncan in his sleep and returns with bloody daggers.",
    "s4": "Banquo's ghost appears at the feast and sits in Macbeth's place.",
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def fill(store: Path) -> None:
    client = chroma_client(store)
    scenes = collection(client, "scenes", "minilm", metadata={"document": "macbeth"})
    scenes.add(ids=list(SCENES), documents=list(SCENES.values()), metadatas=[{"index": i} for i in range(4)])


def reopen_process_state() -> None:
    """Forget the in-process client cache, as a new process would."""
    SharedSystemClient.clear_system_cache()


def test_collection_persists_and_reloads_with_our_embedder(tmp_path: Path) -> None:
    store = tmp_path / "chroma"
    fill(store)
    reopen_process_state()
    scenes = open_collection(chroma_client(store), "scenes", "minilm")
    assert scenes.count() == 4
    assert scenes.metadata == {"document": "macbeth"}
    assert scenes.configuration_json["embedding_function"]["name"] == "storyjudge"
    hits = scenes.query(query_texts=["Who stabs Duncan in his sleep?"], n_results=2)
    assert hits["ids"][0][0] == "s3"
    assert hits["metadatas"] and hits["metadatas"][0][0] == {"index": 2}
    distances = hits["distances"][0] if hits["distances"] else []
    assert 0.0 <= distances[0] < distances[1] <= 2.0  # cosine distances, best first


def test_opening_without_an_embedding_function_rebuilds_ours(tmp_path: Path) -> None:
    store = tmp_path / "chroma"
    fill(store)
    reopen_process_state()
    scenes = chroma_client(store).get_collection("scenes")  # no embedding_function given
    assert scenes.query(query_texts=["a ghost at the banquet"], n_results=1)["ids"][0] == ["s4"]


def test_get_or_create_is_idempotent(tmp_path: Path) -> None:
    store = tmp_path / "chroma"
    fill(store)
    again = collection(chroma_client(store), "scenes", "minilm")
    assert again.count() == 4


def test_missing_collection_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="nothing"):
        open_collection(chroma_client(tmp_path / "empty"), "nothing", "minilm")


def test_embedding_function_round_trips_its_config() -> None:
    function = StoryjudgeEmbeddingFunction("minilm")
    rebuilt = StoryjudgeEmbeddingFunction.build_from_config(function.get_config())
    assert rebuilt.embedder == "minilm"
    assert function.default_space() == "cosine"
    with pytest.raises(ValueError, match="cannot change"):
        function.validate_config_update({"embedder": "minilm"}, {"embedder": "bge-m3:/x"})
    vectors = function(["Macbeth"])
    assert len(vectors) == 1 and len(vectors[0]) == 384


def test_a_process_keeps_few_stores_open_and_none_in_use_is_closed(tmp_path: Path) -> None:
    """Stores indexed one after another: only ``OPEN_STORES`` idle clients (and their threads) stay open; a
    store held by a run is never closed under it; a closed store opens again with everything it kept."""
    import os

    from storyjudge.core import chromastore
    from storyjudge.core.chromastore import OPEN_STORES, ChromaIndex, store_at

    passages = [{"id": k, "text": t, "metadata": {"scene_id": k}} for k, t in SCENES.items()]
    held = ChromaIndex(str(tmp_path / "held"), "scenes", "minilm")
    held.add(passages, len(passages))
    threads = []
    with store_at(held.location):  # a run holds this store throughout
        for n in range(OPEN_STORES + 3):
            index = ChromaIndex(str(tmp_path / f"store-{n}"), "scenes", "minilm")
            index.add(passages, len(passages))
            assert index.search(["Banquo's ghost at the feast"], 1)[0][0][0] == "s4"
            assert len(chromastore._open) <= OPEN_STORES + 1  # the idle ones kept, and the held one
            threads.append(len(os.listdir("/proc/self/task")))
        assert held.size() == len(passages)  # still open: the others were closed around it
    assert threads[-1] <= threads[OPEN_STORES - 1] + 2, threads  # the closed stores' threads ended
    first = ChromaIndex(str(tmp_path / "store-0"), "scenes", "minilm")  # closed long ago: opened again
    assert first.size() == len(passages) and first.search(["witches"], 1)[0][0][0] == "s1"
