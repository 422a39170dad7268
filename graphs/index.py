"""The ``index`` graph (NarrativeFactScore stage 1): a narrative into scenes, a CKG and a searchable index.

    segment -> extract_scene (Send per scene x sample) -> build_ckg
            -> store_index (beside the extraction; after build_ckg when an in-process model extracts)

The refine and factscore graphs add it as a subgraph; its output (``IndexOutput``) leaves the extractions out.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from nodes.build_ckg import build_ckg_node, route_after_ckg
from nodes.extract import extract_scene, route_extraction
from nodes.split_scenes import segment
from nodes.store_index import store_index
from state import IndexInput, IndexOutput, IndexState
from storyjudge.core.concurrency import BRANCH_THREADS
from storyjudge.core.context import Context


def build_graph(checkpointer: Any = None) -> Any:
    """Compile the index graph (pass a checkpointer for resumable runs)."""
    builder = StateGraph(
        IndexState, input_schema=IndexInput, output_schema=IndexOutput, context_schema=Context
    )
    builder.add_node("segment", segment)
    # Send targets take an ExtractTask, which langgraph's add_node overloads cannot type
    builder.add_node("extract_scene", extract_scene)  # type: ignore[call-overload, arg-type, unused-ignore]
    builder.add_node("build_ckg", build_ckg_node)
    builder.add_node("store_index", store_index)
    builder.add_edge(START, "segment")
    builder.add_conditional_edges("segment", route_extraction, ["extract_scene", "store_index", "build_ckg"])
    builder.add_edge("extract_scene", "build_ckg")
    builder.add_conditional_edges("build_ckg", route_after_ckg, ["store_index", END])
    builder.add_edge("store_index", END)
    compiled = builder.compile(checkpointer=checkpointer, name="index")
    return compiled.with_config(max_concurrency=BRANCH_THREADS)


graph = build_graph()
