r"""The ``refine`` graph, storyjudge's main job: summarize a narrative, then judge and refine until saturation.

    index -> [summarize] -> factscore -> [coherence] -> assess --(refine)--> refine -> factscore ...
                                                               \\-(finish)--> finish

It composes the index, summarize, factscore and coherence graphs as subgraphs; each factscore round starts from
fresh channels and tags its facts with the iteration, so verdicts never leak from one round into another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from graphs.coherence import build_graph as build_coherence_graph
from graphs.factscore import build_graph as build_factscore_graph
from graphs.index import build_graph as build_index_graph
from graphs.summarize import build_graph as build_summarize_graph
from nodes.finish import finish
from nodes.loop import assess, route_guard, route_loop, route_summary
from nodes.refiner import refine
from state import RefineInput, RefineOutput, RefineState
from storyjudge.core.concurrency import BRANCH_THREADS
from storyjudge.core.context import Context


def build_graph(checkpointer: Any = None, interrupt_before: Sequence[str] | None = None) -> Any:
    """Compile the refine graph (pass a checkpointer, e.g. SqliteSaver, for resumable runs).

    ``interrupt_before`` names nodes to pause before (it needs a checkpointer): the web UI pauses before
    ``summarize``, ``factscore`` and ``refine`` and resumes the thread one step at a time.
    """
    builder = StateGraph(
        RefineState, input_schema=RefineInput, output_schema=RefineOutput, context_schema=Context
    )
    builder.add_node("index", build_index_graph())
    builder.add_node("summarize", build_summarize_graph())
    builder.add_node("factscore", build_factscore_graph())
    builder.add_node("coherence", build_coherence_graph())
    builder.add_node("assess", assess)
    builder.add_node("refine", refine)
    builder.add_node("finish", finish)
    builder.add_edge(START, "index")
    builder.add_conditional_edges("index", route_summary, ["summarize", "factscore"])
    builder.add_edge("summarize", "factscore")
    builder.add_conditional_edges("factscore", route_guard, ["coherence", "assess"])
    builder.add_edge("coherence", "assess")
    builder.add_conditional_edges("assess", route_loop, ["refine", "finish"])
    builder.add_edge("refine", "factscore")
    builder.add_edge("finish", END)
    compiled = builder.compile(
        checkpointer=checkpointer,
        interrupt_before=list(interrupt_before) if interrupt_before else None,
        name="refine",
    )
    return compiled.with_config(max_concurrency=BRANCH_THREADS)


graph = build_graph()

__all__: list[Literal["build_graph", "graph"]] = ["build_graph", "graph"]
