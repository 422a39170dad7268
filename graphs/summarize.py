"""The ``summarize`` graph: a book-length summary by hierarchical merging or incremental updating (seed 000).

    plan_summary ─(hierarchical)─> summarize_tree ──────┐
                 └(incremental)──> incremental_step ⟲ ─┴─> remove_artifacts

Output: ``summary``, ``tree`` (per level or step), ``events``, ``usage`` and ``timings``; the working channels
stay private, so the graph can be a node of the refine graph, whose state shares those keys.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from nodes.artifacts import remove_artifacts
from nodes.chunk import plan_summary, route_strategy
from nodes.hierarchical import summarize_tree
from nodes.incremental import incremental_step, route_step
from state import SummarizeInput, SummarizeOutput, SummarizeWork
from storyjudge.core.concurrency import BRANCH_THREADS
from storyjudge.core.context import Context


def build_graph(checkpointer: Any = None) -> Any:
    """Compile the summarize graph (pass a checkpointer for resumable runs)."""
    builder = StateGraph(
        SummarizeWork, input_schema=SummarizeInput, output_schema=SummarizeOutput, context_schema=Context
    )
    builder.add_node("plan_summary", plan_summary)
    builder.add_node("summarize_tree", summarize_tree)
    builder.add_node("incremental_step", incremental_step)
    builder.add_node("remove_artifacts", remove_artifacts)
    builder.add_edge(START, "plan_summary")
    builder.add_conditional_edges("plan_summary", route_strategy)
    builder.add_edge("summarize_tree", "remove_artifacts")
    builder.add_conditional_edges("incremental_step", route_step)
    builder.add_edge("remove_artifacts", END)
    compiled = builder.compile(checkpointer=checkpointer, name="summarize")
    return compiled.with_config(max_concurrency=BRANCH_THREADS)


graph = build_graph()
