"""The retrieval seam: Chroma and the in-memory store keep, find and rank passages alike.

Each store is driven through the ``SceneIndex`` protocol alone, then the factscore graph runs over HTTP on both
and must ask the judge the very same prompts (the same evidence, in the same order) and give the same verdicts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphs.factscore import build_graph
from storyjudge.core import embeddings, heavy_imports
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.sceneindex import build_index, search_scenes_many
from storyjudge.core.scenestore import MemoryIndex, SceneIndex, scene_index, still_there
from storyjudge.core.scripted_server import OpenAIServer
from storyjudge.core.segmentation import scenes_from_list
from tests.scripted_story import FIRST_SUMMARY, STORY, StoryResponder
from tests.unit.test_index_graph import BagOfWords

SCENES = [
    "Alice waits at the harbour of Port Wren for the morning ferry.",
    "A storm rises over the grey water and Captain Reed shouts orders.",
    "Bob finds the treasure under the lighthouse stairs.",
    "Alice and Bob sail home; the gulls are loud over the quay.",
]
STORES = ["chroma", "memory"]


@pytest.fixture(autouse=True)
def bow(monkeypatch: pytest.MonkeyPatch) -> BagOfWords:
    embedder = BagOfWords()
    monkeypatch.setitem(embeddings._embedders, "test-bow", embedder)
    heavy_imports.load_before_branches(index=True)
    return embedder


def passage(number: int) -> dict[str, Any]:
    text = SCENES[number]
    meta = {"scene_id": f"S{number:03d}", "scene_index": number, "title": "", "start": 0, "end": len(text)}
    return {"id": f"S{number:03d}#p1", "text": text, "metadata": meta}


def opened(store: str, tmp_path: Path, name: str = "sj-test") -> SceneIndex:
    return scene_index(
        store, str(tmp_path / "chroma") if store == "chroma" else "", name, "test-bow", create=True
    )


@pytest.mark.parametrize("store", STORES)
def test_a_store_keeps_finds_and_gets_passages_through_the_protocol(store: str, tmp_path: Path) -> None:
    index = opened(store, tmp_path, f"sj-protocol-{tmp_path.name}")
    assert index.size() is None and index.get() == []
    index.add([passage(0), passage(1)], 4)
    assert index.size() is None  # half built: not to be trusted yet
    index.add([passage(2), passage(3)], 4)
    assert index.size() == 4
    assert index.get(["S002#p1"]) == [passage(2)]
    assert sorted(p["id"] for p in index.get()) == [f"S{n:03d}#p1" for n in range(4)]
    storm, treasure = index.search(["the storm over the grey water", "treasure under the lighthouse"], 2)
    assert storm[0][0] == "S001#p1" and treasure[0][0] == "S002#p1"
    assert 1.0 >= storm[0][1] > storm[1][1]  # cosine similarity, nearest first


def test_both_stores_rank_alike_and_a_reference_of_an_earlier_version_still_searches(tmp_path: Path) -> None:
    scenes = scenes_from_list(SCENES)
    chroma, built = build_index(scenes, location=tmp_path / "chroma", embedder="test-bow")
    memory, built_too = build_index(scenes, location="", store="memory", embedder="test-bow")
    assert built and built_too and chroma["passages"] == memory["passages"] == 4
    assert (memory["store"], chroma["store"]) == ("memory", "chroma")
    queries = ["Captain Reed in the storm", "gulls over the quay", "the ferry at Port Wren", "treasure"]
    for query in queries:
        assert search_scenes_many(chroma, [query], 3)[0] == search_scenes_many(memory, [query], 3)[0], query
    old: Any = {
        "store_dir": str(tmp_path / "chroma"),
        "chroma_url": "",
        "embedder": "test-bow",
        "scenes_collection": chroma["scenes_collection"],
        "passages": 4,
    }  # as result.json files written before the seam hold it
    assert search_scenes_many(old, ["treasure"], 1)[0] == search_scenes_many(chroma, ["treasure"], 1)[0]
    assert still_there(old) and still_there(memory)
    assert not still_there({**old, "store_dir": str(tmp_path / "gone")})
    _, again = build_index(scenes, location="", store="memory", embedder="test-bow")
    assert not again  # complete: nothing embedded twice


def test_an_index_that_is_gone_is_an_error_not_an_empty_search(tmp_path: Path) -> None:
    gone: Any = {"store": "memory", "location": "", "embedder": "test-bow", "scenes_collection": "sj-gone"}
    gone["passages"] = 4
    with pytest.raises(ValueError, match="went with the process that built it"):
        search_scenes_many(gone, ["treasure"], 1)[0]
    assert not still_there(gone)
    build_index(scenes_from_list(SCENES), location=tmp_path / "chroma", embedder="test-bow")
    moved: Any = {**gone, "store": "chroma", "location": str(tmp_path / "chroma")}
    with pytest.raises(ValueError, match="sj-gone .* is gone from its store"):  # the store is, the index not
        search_scenes_many(moved, ["treasure"], 1)[0]
    with pytest.raises(ConfigError, match="scene_store must be"):
        Context(scene_store="qdrant")  # type: ignore[arg-type]
    assert isinstance(MemoryIndex("test-bow").search(["x"], 3), list)


def test_factscore_gives_the_same_verdicts_on_both_stores(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], tmp_path: Path
) -> None:
    """The second run's judge prompts are all cache hits: the evidence it retrieved is the first one's, exactly."""
    server = scripted_server(StoryResponder())
    document = STORY + "\n\nChapter 3\n\n" + SCENES[1] + "\n\nChapter 4\n\n" + SCENES[3] + "\n"
    cards = {}
    for store in ("chroma", "memory"):
        ctx = ctx_for(
            server,
            embedder="test-bow",
            ckg_samples=1,
            retrieval_k=2,
            scene_store=store,
            run_dir=str(tmp_path / store),
        )
        out = build_graph().invoke(
            {"summary": FIRST_SUMMARY, "document": document, "title": "t"}, context=ctx
        )
        assert out["index"]["store"] == store
        cards[store] = out["factscore"]
        if store == "chroma":
            calls = len(server.completions)
    chroma, memory = cards["chroma"], cards["memory"]
    assert len(server.completions) == calls, "the same prompts, so every answer came from the cache"
    assert (chroma["score"], chroma["judged"], chroma["facts"]) == (memory["score"], memory["judged"], 3)
    assert chroma["score"] == pytest.approx(2 / 3)
    verdicts = [[(v["fact"]["text"], v["status"]) for v in card["verdicts"]] for card in (chroma, memory)]
    assert verdicts[0] == verdicts[1] and [s for _, s in verdicts[0]].count("unsupported") == 1
    evidence = [
        [[s["id"] for s in v["evidence"]["scenes"]] for v in card["verdicts"]] for card in (chroma, memory)
    ]
    assert evidence[0] == evidence[1] and all(len(ids) == 2 for ids in evidence[0])
    assert (tmp_path / "chroma" / "chroma").is_dir() and not (tmp_path / "memory" / "chroma").exists()
