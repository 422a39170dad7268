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

from storyjudge.core.checkpointblobs import MIN_CHARS, BlobSerializer

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
    assert len(files) == 2  # the scene, the document; not once per verdict
    assert len(written[1]) * 4 < len(plain.dumps_typed(state)[1])  # fifty verdicts refer to the scene


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
