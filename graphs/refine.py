r"""The ``refine`` graph, storyjudge's main job: summarize a narrative, then judge and refine until saturation.

    segment -> index ---------> factscore -> [coherence] -> assess --(refine)--> refine -> factscore ...
            \-> [summarize] -/                                   \-(finish)--> finish

It composes the other graphs as subgraphs; facts are tagged with their iteration, so verdicts never leak from
one round into another. A remote summarizer works beside the index (``nodes.summarize_beside_index``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langgraph.graph import END, START, StateGraph

from graphs.coherence import build_graph as build_coherence_graph
from graphs.factscore import build_graph as build_factscore_graph
from graphs.index import build_graph as build_index_graph
from graphs.summarize import build_graph as build_summarize_graph
from nodes.assess import assess, route_guard, route_loop
from nodes.finish import finish
from nodes.refiner import refine
from nodes.split_scenes import segment
from nodes.summarize_beside_index import route_after_segment, route_summary
from state import RefineInput, RefineOutput, RefineState
from storyjudge.core.concurrency import BRANCH_THREADS
from storyjudge.core.context import Context


def build_graph(checkpointer: Any = None, interrupt_before: Sequence[str] | None = None) -> Any:
    """Compile the refine graph (pass a checkpointer, e.g. SqliteSaver, for resumable runs).

    ``interrupt_before`` names nodes to pause before (the web UI's steps); pausing before ``summarize``
    summarizes after the index, so that the pause falls between the two.
    """
    beside = "summarize" not in (interrupt_before or ())
    builder = StateGraph(
        RefineState, input_schema=RefineInput, output_schema=RefineOutput, context_schema=Context
    )
    builder.add_node("segment", segment)
    builder.add_node("index", build_index_graph())
    builder.add_node("summarize", build_summarize_graph())
    builder.add_node("factscore", build_factscore_graph())
    builder.add_node("coherence", build_coherence_graph())
    builder.add_node("assess", assess)
    builder.add_node("refine", refine)
    builder.add_node("finish", finish)
    builder.add_edge(START, "segment")
    builder.add_conditional_edges(
        "segment", partial(route_after_segment, beside=beside), ["index", "summarize"]
    )
    builder.add_conditional_edges("index", partial(route_summary, beside=beside), ["summarize", "factscore"])
    # factscore waits for both, whether they ran beside each other or one after the other
    builder.add_edge(["index", "summarize"], "factscore")
    builder.add_conditional_edges("factscore", route_guard, ["coherence", "assess"])
    builder.add_edge("coherence", "assess")
    builder.add_conditional_edges("assess", route_loop, ["refine", "finish"])
    builder.add_edge("refine", "factscore")
    builder.add_edge("finish", END)
    return builder.compile(
        checkpointer=checkpointer, interrupt_before=list(interrupt_before or ()), name="refine"
    ).with_config(max_concurrency=BRANCH_THREADS)


graph = build_graph()
