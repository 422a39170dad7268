"""Checkpoints store each long text once, and read back exactly what was written."""

from __future__ import annotations

import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

from storyjudge.core.checkpointblobs import MIN_CHARS, MIN_VALUE_BYTES, VALUE_MARK, BlobSerializer

SCENE = "Thunder and lightning. Enter three Witches. " * 20  # longer than MIN_CHARS
assert len(SCENE) >= MIN_CHARS


def _state() -> dict[str, Any]:
    evidence = {"query": "Who meets the witches?", "scenes": [{"id": "s1", "text": SCENE, "score": 0.5}]}
    return {
        "document": SCENE + " Fair is foul — and foul is fair. ✓",
        "verdicts": [{"fact": {"id": f"i0-s0-f{n}"}, "evidence": evidence} for n in range(50)],
        "pair": ("short", SCENE),
        "count": 3,
        "none": None,
        "flag": True,
        "__pregel_tasks": [Send("judge", {"fact": {"id": "f"}, "evidence": evidence})],
    }


def test_a_value_reads_back_exactly_and_each_long_text_is_stored_once(tmp_path: Path) -> None:
    serde = BlobSerializer(tmp_path / "blobs")
    state = _state()
    written = serde.dumps_typed(state)
    back = BlobSerializer(tmp_path / "blobs").loads_typed(written)  # a new process: nothing remembered
    plain = JsonPlusSerializer()
    assert back == plain.loads_typed(plain.dumps_typed(state))
    assert back["__pregel_tasks"][0].arg["evidence"]["scenes"][0]["text"] == SCENE
    files = [path for path in (tmp_path / "blobs").rglob("*") if path.is_file()]
    # the scene and the document, not once per verdict; and the value itself (a large write), which refers to them
    assert len(files) == 3
    assert written[0] == VALUE_MARK
    value_file = next(path for path in files if path.name == written[1].decode())
    # fifty verdicts refer to the scene
    assert value_file.stat().st_size * 4 < len(plain.dumps_typed(state)[1])


def test_checkpoints_written_without_references_read_as_before(tmp_path: Path) -> None:
    state = _state()
    old = JsonPlusSerializer().dumps_typed(state)
    assert BlobSerializer(tmp_path).loads_typed(old) == JsonPlusSerializer().loads_typed(old)


class State(TypedDict, total=False):
    text: str
    seen: Annotated[list[str], operator.add]


def test_a_checkpointed_graph_resumes_with_the_texts(tmp_path: Path) -> None:
    def first(state: State) -> dict[str, Any]:
        return {"seen": [state["text"]]}

    def second(state: State) -> dict[str, Any]:
        return {"seen": [state["text"][::-1]]}

    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    conn = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    try:
        saver = SqliteSaver(conn, serde=BlobSerializer(tmp_path / "blobs"))
        graph = builder.compile(checkpointer=saver, interrupt_before=["second"])
        config: Any = {"configurable": {"thread_id": "t"}}
        graph.invoke({"text": SCENE}, config)
        resumed = builder.compile(checkpointer=SqliteSaver(conn, serde=BlobSerializer(tmp_path / "blobs")))
        out = resumed.invoke(None, config)
    finally:
        conn.close()
    assert out == {"text": SCENE, "seen": [SCENE, SCENE[::-1]]}


class Rounds(TypedDict, total=False):
    card: dict[str, Any]
    steps: Annotated[list[int], operator.add]


def test_an_unchanged_large_channel_is_stored_once_across_checkpoints(tmp_path: Path) -> None:
    """A large value written once and then carried through later supersteps is one file, not one per step."""
    card = {"verdicts": [{"fact": f"fact {n}", "rationale": f"why {n}"} for n in range(200)]}
    assert len(JsonPlusSerializer().dumps_typed(card)[1]) >= MIN_VALUE_BYTES

    def judge(state: Rounds) -> dict[str, Any]:
        return {"card": card, "steps": [0]}

    def step(state: Rounds) -> dict[str, Any]:
        return {"steps": [len(state["steps"])]}

    builder = StateGraph(Rounds)
    builder.add_node("judge", judge)
    for name in ("a", "b", "c", "d"):
        builder.add_node(name, step)
    builder.add_edge(START, "judge")
    builder.add_edge("judge", "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", "d")
    builder.add_edge("d", END)
    conn = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    try:
        serde = BlobSerializer(tmp_path / "blobs")
        graph = builder.compile(checkpointer=SqliteSaver(conn, serde=serde))
        config: Any = {"configurable": {"thread_id": "t"}}
        out = graph.invoke({}, config)
        assert out["card"] == card and out["steps"] == [0, 1, 2, 3, 4]
        stored = conn.execute("SELECT checkpoint FROM checkpoints").fetchall()
        assert len(stored) >= 6
        # the card's bytes are in no checkpoint row: each refers to the one file, which the node's write shares
        assert all(b"why 199" not in row[0] for row in stored)
        files = [path for path in (tmp_path / "blobs").rglob("*") if path.is_file()]
        assert len(files) == 1
        # a fresh reader (a resumed process) gets the card back
        reread = builder.compile(checkpointer=SqliteSaver(conn, serde=BlobSerializer(tmp_path / "blobs")))
        assert reread.get_state(config).values["card"] == card
    finally:
        conn.close()
