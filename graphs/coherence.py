"""The ``coherence`` graph: BooookScore of one summary or of a set of summaries.

    split_summaries --(Send per group of sentences | per batch)--> annotate_sentences | annotate_batch
                    --> score_coherence

Input ``{"summary": text}`` or ``{"summaries": [{"id", "summary", "sentences"?}, ...]}``. Output ``coherence``
(per-summary and system scores), ``annotations``, ``usage`` and ``timings``; the refine graph's coherence guard.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from nodes.annotate import (
    annotate_batch,
    annotate_sentences,
    route_annotations,
    score_coherence,
    split_summaries,
)
from state import CoherenceInput, CoherenceOutput, CoherenceState
from storyjudge.core.concurrency import BRANCH_THREADS
from storyjudge.core.context import Context


def build_graph(checkpointer: Any = None) -> Any:
    """Compile the coherence graph (a checkpointer makes a long scoring run resumable)."""
    builder = StateGraph(
        CoherenceState, input_schema=CoherenceInput, output_schema=CoherenceOutput, context_schema=Context
    )
    builder.add_node("split_summaries", split_summaries)
    # Send targets take a CoherenceTask, which langgraph's add_node overloads cannot type
    builder.add_node("annotate_sentences", annotate_sentences)  # type: ignore[call-overload, arg-type, unused-ignore]
    builder.add_node("annotate_batch", annotate_batch)  # type: ignore[call-overload, arg-type, unused-ignore]
    builder.add_node("score_coherence", score_coherence)
    builder.add_edge(START, "split_summaries")
    builder.add_conditional_edges(
        "split_summaries", route_annotations, ["annotate_sentences", "annotate_batch", "score_coherence"]
    )
    builder.add_edge("annotate_sentences", "score_coherence")
    builder.add_edge("annotate_batch", "score_coherence")
    builder.add_edge("score_coherence", END)
    compiled = builder.compile(checkpointer=checkpointer, name="coherence")
    return compiled.with_config(max_concurrency=BRANCH_THREADS)


graph = build_graph()
