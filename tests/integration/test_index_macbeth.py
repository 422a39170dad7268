"""Indexing Macbeth for real: Chroma on disk, the shipped embedder, the scripted HTTP model, the embedded one.

The whole play goes through the scripted model (fast, deterministic triples) so the test can check every file,
collection and retrieval; Act I goes through the embedded model (``graph.invoke`` with defaults but the sample
count) to show the offline path works end to end. Its triples are demo grade, so only their bookkeeping is
checked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from graphs.index import build_graph
from storyjudge.core.chromastore import chroma_client, open_collection
from storyjudge.core.context import Context
from storyjudge.core.sceneindex import search_scenes_many
from storyjudge.core.scripted_server import last_user_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CHARACTERS = [
    "Macbeth",
    "Lady Macbeth",
    "Banquo",
    "Duncan",
    "Macduff",
    "Malcolm",
    "Fleance",
    "Lennox",
    "Ross",
]
LINES = [
    "When shall we three meet again",
    "Is this a dagger which I see before me",
    "Double, double toil and trouble",
    "Out, damned spot! out, I say!",
    "Macduff was from his mother's womb",
]

pytestmark = pytest.mark.slow


def macbeth_responder(body: dict[str, Any]) -> str:
    """Characters the scene names (speaker names are upper case in the play) and who appears with whom."""
    blocks = re.findall(r"<scene id=[^>]*>\n(.*?)\n</scene>", last_user_text(body), re.DOTALL)
    scene = blocks[-1] if blocks else ""
    found = [name for name in CHARACTERS if re.search(rf"(?<![\w ]){name}\b", scene, re.IGNORECASE)]
    triples = [
        {"subject": a, "predicate": "speaks with", "object": b}
        for a, b in zip(found, found[1:], strict=False)
    ]
    if "Duncan" in found and "Macbeth" in found:
        triples.append({"subject": "Macbeth", "predicate": "serves", "object": "Duncan"})
    return json.dumps({"characters": [{"name": n, "aliases": []} for n in found], "triples": triples})


def scene_with(scenes: list[dict[str, Any]], line: str) -> str:
    """The scene that holds a line, whatever its line breaks and case (verse lines wrap in the text)."""

    def flat(text: str) -> str:
        return " ".join(text.split()).casefold()

    return next(scene["id"] for scene in scenes if flat(line) in flat(scene["text"]))


def sampled_lines(scenes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The first and the middle verse line (six words or more) of every scene, with the scene's id."""
    picked = []
    for scene in scenes:
        verse = [
            line.strip()
            for line in scene["text"].splitlines()
            if len(line.split()) >= 6 and not line.startswith(("**", "_", "#"))
        ]
        picked += [(line, scene["id"]) for line in dict.fromkeys(verse[:1] + verse[len(verse) // 2 :][:1])]
    return picked


def test_full_play_files_collections_and_retrieval(scripted_server: Any, tmp_path: Path) -> None:
    server = scripted_server(macbeth_responder)
    ctx = Context(
        model="openai:scripted", base_url=server.base_url, run_dir=str(tmp_path / "run"), retry_budget_s=0
    )
    text = (EXAMPLES / "macbeth.md").read_text(encoding="utf-8")
    out = build_graph().invoke({"document": text, "title": "Macbeth"}, context=ctx)

    assert out["segmentation"] == "play"
    assert len({scene["id"].split(".")[0] for scene in out["scenes"]}) == 28
    assert len(server.completions) == len(out["scenes"]) * 3
    ckg = json.loads((tmp_path / "run" / "ckg.json").read_text())
    assert ckg == out["ckg"] and {"Macbeth", "Lady Macbeth", "Banquo", "Duncan"} <= {
        n["id"] for n in ckg["nodes"]
    }
    assert out["ckg_stats"]["edges"] > 10

    index = out["index"]
    assert index["location"] == str(tmp_path / "run" / "chroma") and (tmp_path / "run" / "chroma").is_dir()
    client = chroma_client(index["location"])
    scenes_collection = open_collection(client, index["scenes_collection"], index["embedder"])
    assert scenes_collection.count() == index["passages"] > 2 * len(out["scenes"])  # 128-token passages
    assert [c.name for c in client.list_collections()] == [index["scenes_collection"]]  # no CKG collection
    assert (scenes_collection.metadata or {}).get("complete") is True

    for line in LINES:
        hits = search_scenes_many(index, [line], 3)[0]
        assert hits[0]["id"] == scene_with(out["scenes"], line), line
        assert len({hit["id"] for hit in hits}) == 3
    sample = sampled_lines(out["scenes"])
    first = sum(search_scenes_many(index, [line], 1)[0][0]["id"] == scene_id for line, scene_id in sample)
    assert first >= 0.75 * len(sample), f"{first} of {len(sample)} lines found their scene first"

    calls = len(server.completions)
    again = build_graph().invoke({"document": text, "title": "Macbeth"}, context=ctx)
    assert len(server.completions) == calls and again["index"] == index


def test_act_one_with_the_embedded_model(tmp_path: Path) -> None:
    # one sample, no parse retries and short answers: the embedded model is slow and its triples demo grade
    ctx = Context(
        model="local:smollm2",
        ckg_samples=1,
        parse_retries=0,
        max_output_tokens=256,
        run_dir=str(tmp_path / "run"),
    )
    text = (EXAMPLES / "macbeth-act1.md").read_text(encoding="utf-8")
    out = build_graph().invoke({"document": text}, context=ctx)

    assert out["title"] == "Macbeth" and out["segmentation"] == "play"
    usage = out["usage"]["local:smollm2"]
    assert usage["calls"] == len(out["scenes"]) == 8  # 7 scenes, the longest in two parts
    meta = out["ckg"]["graph"]
    assert meta["extractions"] == len(out["scenes"]) and meta["model"] == "local:smollm2"
    assert usage["failures"] == meta["failed_extractions"]
    assert json.loads((tmp_path / "run" / "ckg.json").read_text()) == out["ckg"]
    # a line whose words occur in one scene only ("So foul and fair a day" also matches Scene I's "Fair is foul")
    line = "The thane of Cawdor lives: why do you dress me in borrow'd robes?"
    assert search_scenes_many(out["index"], [line], 2)[0][0]["id"] == scene_with(out["scenes"], line)
