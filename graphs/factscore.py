"""The ``factscore`` graph: NarrativeFactScore of a given summary.

    [index] -> split_summary -> decompose_sentence (Send per sentence) -> collect_facts -> retrieve
            -> judge (Send per fact) -> score

Indexing (segmentation, CKG, Chroma) runs first unless the input already carries an index, as it does inside the
refine graph, which reuses this graph once per iteration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from graphs.index import build_graph as build_index_graph
from nodes.decompose import collect_facts, decompose_sentence, route_sentences, split_summary
from nodes.judge import judge, route_facts
from nodes.nfs_score import score
from nodes.retrieve import retrieve
from state import FactScoreInput, FactScoreOutput, FactScoreState
from storyjudge.core.concurrency import BRANCH_THREADS
from storyjudge.core.context import Context


def needs_index(state: FactScoreState) -> Literal["index", "split_summary"]:
    """Index the narrative unless an index came with the input."""
    return "split_summary" if state.get("index") and state.get("scenes") else "index"


def build_graph(checkpointer: Any = None, interrupt_before: Sequence[str] | None = None) -> Any:
    """Compile the factscore graph (pass a checkpointer for resumable runs; ``interrupt_before`` as in refine)."""
    builder = StateGraph(
        FactScoreState, input_schema=FactScoreInput, output_schema=FactScoreOutput, context_schema=Context
    )
    builder.add_node("index", build_index_graph())
    builder.add_node("split_summary", split_summary)
    builder.add_node("decompose_sentence", decompose_sentence)  # type: ignore[call-overload, arg-type, unused-ignore]
    builder.add_node("collect_facts", collect_facts)
    builder.add_node("retrieve", retrieve)
    builder.add_node("judge", judge)  # type: ignore[call-overload, arg-type, unused-ignore]
    builder.add_node("score", score)
    builder.add_conditional_edges(START, needs_index, ["index", "split_summary"])
    builder.add_edge("index", "split_summary")
    builder.add_conditional_edges("split_summary", route_sentences, ["decompose_sentence", "collect_facts"])
    builder.add_edge("decompose_sentence", "collect_facts")
    builder.add_edge("collect_facts", "retrieve")
    builder.add_conditional_edges("retrieve", route_facts, ["judge", "score"])
    builder.add_edge("judge", "score")
    builder.add_edge("score", END)
    compiled = builder.compile(
        checkpointer=checkpointer,
        interrupt_before=list(interrupt_before) if interrupt_before else None,
        name="factscore",
    )
    return compiled.with_config(max_concurrency=BRANCH_THREADS)


graph = build_graph()
