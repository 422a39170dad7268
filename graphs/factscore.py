r"""The ``factscore`` graph: NarrativeFactScore of a given summary.

    [index] -> split_summary -> check_sentence (Send per sentence: decompose, retrieve, judge) -> score_nfs
                             \-> check_planted (one Send: the round's planted control facts, judged) -----/

Indexing runs first unless the input carries an index, as inside the refine graph (once per iteration).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from graphs.index import build_graph as build_index_graph
from nodes.check import check_sentence
from nodes.decompose import route_sentences, split_summary
from nodes.nfs_score import score_nfs
from nodes.plant import check_planted
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
    builder.add_node("check_sentence", check_sentence)  # type: ignore[call-overload, arg-type, unused-ignore]
    builder.add_node("check_planted", check_planted)  # type: ignore[call-overload, arg-type, unused-ignore]
    builder.add_node("score_nfs", score_nfs)
    builder.add_conditional_edges(START, needs_index, ["index", "split_summary"])
    builder.add_edge("index", "split_summary")
    builder.add_conditional_edges(
        "split_summary", route_sentences, ["check_sentence", "check_planted", "score_nfs"]
    )
    builder.add_edge("check_sentence", "score_nfs")
    builder.add_edge("check_planted", "score_nfs")
    builder.add_edge("score_nfs", END)
    return builder.compile(
        checkpointer=checkpointer, interrupt_before=list(interrupt_before or ()), name="factscore"
    ).with_config(max_concurrency=BRANCH_THREADS)


graph = build_graph()
