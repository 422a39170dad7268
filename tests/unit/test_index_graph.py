"""The index graph end to end over the scripted HTTP model, with a fast bag-of-words embedder in Chroma."""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Send
from typer.testing import CliRunner

from graphs.index import build_graph
from nodes.build_ckg import route_after_ckg
from nodes.extract import route_extraction
from state import IndexOutput
from storyjudge.core import embeddings, llm
from storyjudge.core.charactergraph import edge_line
from storyjudge.core.chromastore import chroma_client
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.embeddings import WindowedEmbeddings
from storyjudge.core.llm import ModelError
from storyjudge.core.rundir import RunDirMismatch, document_hash
from storyjudge.core.sceneindex import search_scenes_many
from storyjudge.core.scripted_server import last_user_text
from storyjudge.core.segmentation import join_scenes

PLAY = """# The Harbour

## ACT I

### SCENE I. The quay.

**ALICE**
Bob, you came back on the morning ferry! The gulls are loud today.

**BOB**
I did, Alice. I bring an old map of Gull Island.

### SCENE II. A boat.

**CAPTAIN REED**
Hold fast. The storm is rising over the grey water.

**ALICE**
Captain, steer us to the lighthouse.

## ACT II

### SCENE I. The lighthouse.

**BOB**
Alice, look: the treasure lies under the lamp room stairs.

_Captain Reed falls asleep by the door._
"""
NAMES = ["Alice", "Bob", "Captain Reed"]


class BagOfWords(WindowedEmbeddings):
    """A deterministic, instant embedder: hashed word counts, unit length, a 24-word window."""

    name = "test-bow"
    window_tokens = 24

    def __init__(self) -> None:
        self.embedded = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 128
        for word in re.findall(r"[a-z]+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % 128] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


@pytest.fixture
def bow(monkeypatch: pytest.MonkeyPatch) -> BagOfWords:
    embedder = BagOfWords()
    monkeypatch.setitem(embeddings._embedders, "test-bow", embedder)
    return embedder


def scene_of(body: dict[str, Any]) -> str:
    blocks = re.findall(r"<scene id=[^>]*>\n(.*?)\n</scene>", last_user_text(body), re.DOTALL)
    return blocks[-1] if blocks else ""


def triples_responder(body: dict[str, Any]) -> str:
    """Names found in the scene, 'meets' between consecutive ones, and one predicate only sample 0 states."""
    scene = scene_of(body)
    found = [name for name in NAMES if name.lower() in scene.lower()]
    triples: list[dict[str, str | None]] = [
        {"subject": a, "predicate": "meets", "object": b} for a, b in zip(found, found[1:], strict=False)
    ]
    if "falls asleep" in scene:
        triples.append({"subject": "Captain Reed", "predicate": "asleep", "object": None})
    if body.get("seed") is None and "gulls" in scene:  # sample 0 of one scene only
        triples.append({"subject": "Bob", "predicate": "lies to", "object": "Alice"})
    characters = [{"name": name, "aliases": ["Captain"] if name == "Captain Reed" else []} for name in found]
    return json.dumps({"characters": characters, "triples": triples})


def run(ctx: Any, graph_input: dict[str, Any] | None = None) -> dict[str, Any]:
    return dict(build_graph().invoke(graph_input or {"document": PLAY, "title": "The Harbour"}, context=ctx))


def test_index_graph_end_to_end(scripted_server: Any, ctx_for: Any, bow: BagOfWords, tmp_path: Path) -> None:
    server = scripted_server(triples_responder)
    ctx = ctx_for(server, embedder="test-bow", ckg_samples=3)
    out = run(ctx)
    assert set(out) == set(IndexOutput.__annotations__)
    assert out["segmentation"] == "play" and len(out["scenes"]) == 3
    assert out["doc_hash"] == document_hash(PLAY) and out["title"] == "The Harbour"
    assert out["run_dir"] == str(tmp_path / "run")
    assert len(server.completions) == 3 * 3
    lines = [edge_line(edge) for edge in out["ckg"]["edges"]]
    most = max(out["ckg"]["edges"], key=lambda edge: int(edge["count"]))
    assert edge_line(most) == "Alice -[meets]-> Bob"  # stated in two scenes x three samples
    assert "Captain Reed -[state: asleep]" in lines
    assert not any("lies to" in line for line in lines)  # one sample in three is under the threshold
    assert out["ckg"]["nodes"][2]["id"] == "Captain Reed" and out["ckg"]["nodes"][2]["aliases"] == ["Captain"]
    assert out["ckg_stats"] == {"scenes": 3, "characters": 3, "edges": 4, "self_loops": 1}
    assert json.loads((tmp_path / "run" / "ckg.json").read_text()) == out["ckg"]
    assert out["usage"]["openai:scripted"]["calls"] == 9
    assert {"segment", "extract", "ckg", "index"} <= set(out["timings"])

    index = out["index"]
    assert index["location"] == str(tmp_path / "run" / "chroma") and index["passages"] > len(out["scenes"])
    hits = search_scenes_many(index, ["the storm is rising over the grey water"], 3)[0]
    assert [hit["id"] for hit in hits][0] == "S002"
    assert len({hit["id"] for hit in hits}) == len(hits) == 3
    assert hits[0]["title"] == "ACT I, SCENE II. A boat" and "storm" in hits[0]["passage"]
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
    assert "ckg_collection" not in index  # the CKG is read from the graph, never embedded
    stored = chroma_client(index["location"]).list_collections()
    assert [c.name for c in stored] == [index["scenes_collection"]]


def test_a_sentences_searches_are_one_chroma_call_with_the_hits_of_one_search_each(
    scripted_server: Any, ctx_for: Any, bow: BagOfWords, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batched queries rank exactly as single ones; a blank query has no hits and costs no query."""
    from storyjudge.core import sceneindex

    out = run(ctx_for(scripted_server(triples_responder), embedder="test-bow", ckg_samples=3))
    index = out["index"]
    queries = ["the storm is rising over the grey water", "Alice meets Bob", "", "Captain Reed sleeps"]
    one_by_one = [search_scenes_many(index, [query], k)[0] for query in queries for k in (1, 3)]
    calls: list[int] = []
    real = sceneindex._query

    def counted(store: Any, asked: list[str], wanted: int) -> Any:
        calls.append(len(asked))
        return real(store, asked, wanted)

    monkeypatch.setattr(sceneindex, "_query", counted)
    batched = [hits for k in (1, 3) for hits in sceneindex.search_scenes_many(index, queries, k)]
    assert batched == [one_by_one[2 * i + j] for j in (0, 1) for i in range(len(queries))]
    assert calls == [3, 3]  # one call per k for the three queries that are not blank
    assert batched[2] == [] and len(batched[len(queries)]) == 3


def test_samples_are_distinct_requests_at_the_extraction_temperature(
    scripted_server: Any, ctx_for: Any, bow: BagOfWords
) -> None:
    server = scripted_server(triples_responder)
    run(ctx_for(server, embedder="test-bow", ckg_samples=3, extraction_temperature=0.9))
    for scene_text in ("Bob, you came back", "Hold fast", "look: the treasure"):
        requests = [b for b in server.completions if scene_text in scene_of(b)]
        assert sorted(str(b.get("seed")) for b in requests) == ["1", "2", "None"]
        assert {b["temperature"] for b in requests} == {0.9}


def test_reindexing_an_unchanged_document_is_free(
    scripted_server: Any, ctx_for: Any, bow: BagOfWords
) -> None:
    server = scripted_server(triples_responder)
    ctx = ctx_for(server, embedder="test-bow")
    first = run(ctx)
    calls, embedded = len(server.completions), bow.embedded
    second = run(ctx)
    assert len(server.completions) == calls  # every extraction came from the cache
    assert bow.embedded == embedded  # both collections were complete: nothing embedded again
    assert second["usage"]["openai:scripted"]["calls"] == 0
    assert second["usage"]["openai:scripted"]["cache_hits"] == calls
    assert second["index"] == first["index"] and second["ckg"] == first["ckg"]


def test_an_unchanged_documents_index_is_reused_without_splitting_it_again(
    scripted_server: Any, ctx_for: Any, bow: BagOfWords, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collection is found from the scenes alone; a changed scene names a new one, split and embedded."""
    from storyjudge.core import sceneindex

    ctx = ctx_for(scripted_server(triples_responder), embedder="test-bow")
    first = run(ctx)["index"]
    splits: list[int] = []
    real = sceneindex.passages_of

    def counted(scenes: Any, *args: Any, **kwargs: Any) -> Any:
        splits.append(len(scenes))
        return real(scenes, *args, **kwargs)

    monkeypatch.setattr(sceneindex, "passages_of", counted)
    embedded = bow.embedded
    assert run(ctx)["index"] == first
    assert splits == [] and bow.embedded == embedded

    out = run(ctx)
    scenes = [dict(scene) for scene in out["scenes"]]
    scenes[1]["text"] = scenes[1]["text"].replace("grey water", "green water")
    changed, built = sceneindex.build_index(scenes, location=first["location"], embedder="test-bow")  # type: ignore[arg-type]
    assert built and splits == [3] and bow.embedded > embedded
    assert changed["scenes_collection"] != first["scenes_collection"]
    assert changed["passages"] == first["passages"]
    stored = chroma_client(first["location"]).list_collections()
    assert {c.name for c in stored} == {first["scenes_collection"], changed["scenes_collection"]}


CUT = '{"characters": [{"name": "Captain Reed", "aliases": []}], "triples": [{"subject": "Captain Reed", "predic'


@pytest.mark.parametrize(
    "bad",
    [
        "I cannot do that.",
        CUT,  # cut off mid-triple, the server not saying so: no inner fragment or default stands in
        {"content": CUT, "finish_reason": "length"},
        {"content": '{"characters": [], "triples": []}', "finish_reason": "length"},  # parses, but cut off
        '{"characters": [{"name": "Captain Reed", "aliases": []}]}',  # no triples: not an answer
        '{"people": ["Captain Reed"], "relations": []}',  # wrong keys
    ],
    ids=["prose", "truncated", "truncated-length", "parses-but-length", "missing-triples", "wrong-keys"],
)
def test_an_unparseable_answer_is_counted_not_defaulted(
    scripted_server: Any, ctx_for: Any, bow: BagOfWords, bad: str | dict[str, Any]
) -> None:
    def responder(body: dict[str, Any]) -> str | dict[str, Any]:
        return bad if "Hold fast" in scene_of(body) else triples_responder(body)

    server = scripted_server(responder)
    out = run(ctx_for(server, embedder="test-bow", ckg_samples=2, parse_retries=0))
    assert out["ckg"]["graph"]["failed_extractions"] == 2
    assert out["usage"]["openai:scripted"]["failures"] == 2
    assert "Alice -[meets]-> Bob" in [edge_line(edge) for edge in out["ckg"]["edges"]]


def test_a_scene_longer_than_the_extractor_window_is_read_in_parts(
    scripted_server: Any, ctx_for: Any, bow: BagOfWords
) -> None:
    long_scene = "### SCENE I. Long.\n\n" + "Alice rows and Bob sings a long song about the sea. " * 400
    document = f"## ACT I\n\n{long_scene}\n### SCENE II. Short.\n\nBob rests.\n"
    server = scripted_server(triples_responder)
    ctx = ctx_for(
        server,
        embedder="test-bow",
        ckg_samples=1,
        chunk_size=8000,
        context_window=1024,
        max_output_tokens=128,
    )
    graph = build_graph()
    out = graph.invoke({"document": document}, context=ctx)
    assert len(out["scenes"]) == 2
    assert len(server.completions) > 3
    assert all(len(scene_of(b)) < len(long_scene) for b in server.completions)
    assert out["ckg"]["edges"][0]["scenes"] == ["S001"] and out["ckg"]["edges"][0]["count"] == 1


def test_scenes_input_and_no_context(
    scripted_server: Any, bow: BagOfWords, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = scripted_server(triples_responder)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STORYJUDGE_MODEL", "openai:scripted")
    monkeypatch.setenv("STORYJUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("STORYJUDGE_EMBEDDER", "test-bow")
    scenes = ["Alice meets Bob at the quay.", {"title": "Storm", "text": "Captain Reed shouts at Alice."}]
    out = build_graph().invoke({"scenes": scenes})
    assert out["segmentation"] == "scenes" and [s["title"] for s in out["scenes"]] == ["", "Storm"]
    assert out["doc_hash"] == document_hash(join_scenes(out["scenes"]))
    run_dir = Path(out["run_dir"])
    assert run_dir.parent == Path("runs") and run_dir.name.endswith(out["doc_hash"][:8])
    assert (tmp_path / run_dir / "ckg.json").is_file() and (tmp_path / run_dir / "cache").is_dir()


def test_progress_events(scripted_server: Any, ctx_for: Any, bow: BagOfWords) -> None:
    server = scripted_server(triples_responder)
    events = [
        chunk["progress"]
        for chunk in build_graph().stream(
            {"document": PLAY},
            context=ctx_for(server, embedder="test-bow", ckg_samples=2),
            stream_mode="custom",
        )
    ]
    extract = [e for e in events if e["stage"] == "extract"]
    assert extract[0]["total"] == 6 and sum(e["advance"] for e in extract) == 6
    index = [e for e in events if e["stage"] == "index"]
    totals = [e["total"] for e in index if "total" in e]  # a message ("loading the embedder") may come first
    assert totals and totals[0] == sum(e["advance"] for e in index) > 0


def test_the_passages_are_embedded_while_a_remote_model_extracts(
    scripted_server: Any, ctx_for: Any, bow: BagOfWords, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each extraction answer waits here until the embedding has begun: a graph that embeds after the CKG fails."""
    embedding = threading.Event()
    embed = bow.embed_documents

    def embed_and_tell(texts: list[str]) -> list[list[float]]:
        embedding.set()
        return embed(texts)

    monkeypatch.setattr(bow, "embed_documents", embed_and_tell)
    began: list[bool] = []

    def answer_once_embedding(body: dict[str, Any]) -> str:
        began.append(embedding.wait(timeout=30))
        return triples_responder(body)

    out = run(ctx_for(scripted_server(answer_once_embedding), embedder="test-bow", ckg_samples=1))
    assert began == [True, True, True]
    assert out["ckg_stats"]["edges"] >= 2 and out["index"]["passages"] > len(out["scenes"])
    assert {"extract", "ckg", "index"} <= set(out["timings"])


def test_the_index_stops_when_an_extraction_call_fails_and_a_resume_embeds_only_the_rest(
    scripted_server: Any, ctx_for: Any, bow: BagOfWords, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph raises a branch's error once its siblings end: the embedding stops at its next batch instead."""
    failed = threading.Event()
    note = llm.note_failure

    def note_and_tell(run: str, error: BaseException) -> None:
        note(run, error)
        failed.set()

    monkeypatch.setattr(llm, "note_failure", note_and_tell)
    embed = bow.embed_documents
    batches: list[int] = []

    def embed_after_the_failure(texts: list[str]) -> list[list[float]]:
        batches.append(len(texts))
        failed.wait(timeout=30)  # the first batch is embedded once the extraction has failed
        return embed(texts)

    monkeypatch.setattr(bow, "embed_documents", embed_after_the_failure)
    chapters = "\n\n".join(
        f"Chapter {n}\n\n" + "Alice rows past the quay while Bob sleeps. " * 40 for n in range(8)
    )
    refused = scripted_server(lambda body: {"status": 401, "error": "invalid api key"})
    ctx = ctx_for(refused, embedder="test-bow", ckg_samples=1)
    with pytest.raises(ModelError, match="refused the request"):
        run(ctx, {"document": chapters, "title": "Rows"})
    assert failed.is_set() and len(batches) == 1, batches  # not every batch of the passages
    first = batches[0]
    batches.clear()
    out = run(
        ctx_for(scripted_server(triples_responder), embedder="test-bow", ckg_samples=1),
        {"document": chapters, "title": "Rows"},
    )
    assert sum(batches) == out["index"]["passages"] - first > 0  # the stored batch is kept
    hits = search_scenes_many(out["index"], ["Alice rows past the quay"], 3)[0]
    assert hits and all(hit["id"] in {scene["id"] for scene in out["scenes"]} for hit in hits)


def test_an_in_process_extractor_is_followed_by_the_index_not_joined_by_it() -> None:
    """llama.cpp and the embedder would share the cores: the index waits for the CKG."""
    scene = {"id": "S001", "title": "", "text": "Alice meets Bob.", "start": 0, "end": 16}
    state: Any = {"scenes": [scene], "run_dir": ""}
    remote = Runtime(context=Context(model="openai:scripted", base_url="http://127.0.0.1:9/v1"))
    local = Runtime(context=Context(model="openai:scripted", extractor_model="local:smollm2"))
    samples = Context().ckg_samples
    beside = route_extraction(state, remote)
    assert isinstance(beside, list) and all(isinstance(item, Send) for item in beside)
    nodes = [item.node for item in beside if isinstance(item, Send)]
    assert nodes == ["store_index"] + ["extract_scene"] * samples  # the longest branch starts first
    assert beside[0] == Send("store_index", {"scenes": [scene], "run_dir": ""})
    assert route_after_ckg(state, remote) == END
    after = route_extraction(state, local)
    assert isinstance(after, list)
    assert [item.node for item in after if isinstance(item, Send)] == ["extract_scene"] * samples
    assert route_after_ckg(state, local) == "store_index"
    nothing: Any = {"scenes": [], "run_dir": ""}
    assert route_extraction(nothing, remote) == [Send("store_index", nothing), "build_ckg"]
    assert route_extraction(nothing, local) == "build_ckg"


def test_a_run_dir_of_another_document_is_refused(
    scripted_server: Any, ctx_for: Any, bow: BagOfWords
) -> None:
    server = scripted_server(triples_responder)
    ctx = ctx_for(server, embedder="test-bow", ckg_samples=1)
    run(ctx)
    with pytest.raises(RunDirMismatch):
        run(ctx, {"document": "Chapter 1\n\nSomething else entirely."})


def test_samples_without_temperature_are_refused(scripted_server: Any, ctx_for: Any, bow: BagOfWords) -> None:
    server = scripted_server(triples_responder)
    with pytest.raises(ConfigError, match="extraction_temperature"):
        run(ctx_for(server, embedder="test-bow", ckg_samples=3, extraction_temperature=0.0))
    assert server.completions == []


def test_cli_index(scripted_server: Any, bow: BagOfWords, tmp_path: Path) -> None:
    from storyjudge.apps.cli import app

    server = scripted_server(triples_responder)
    play = tmp_path / "harbour.md"
    play.write_text(PLAY)
    run_dir = tmp_path / "out"
    args = [
        "index",
        str(play),
        "--run-dir",
        str(run_dir),
        "--model",
        "openai:scripted",
        "--base-url",
        server.base_url,
    ]
    result = CliRunner().invoke(app, [*args, "--embedder", "test-bow", "--ckg-samples", "2"])
    assert result.exit_code == 0, result.output
    assert (
        "3 scenes (play), 3 characters, 5 edges (1 self-loops)" in result.output
    )  # "lies to" once is 1 in 2
    assert "6 LLM calls" in result.output
    assert json.loads((run_dir / "ckg.json").read_text())["graph"]["samples"] == 2

    missing = CliRunner().invoke(app, ["index", str(tmp_path / "nope.md")])
    assert missing.exit_code == 1 and "does not exist" in missing.output and "Traceback" not in missing.output
