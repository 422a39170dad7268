"""CKG node: the name graph and the selected edges from every extraction sample, written as node-link JSON."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

from langgraph.runtime import Runtime

import prompts
from nodes.extract import PROMPT, index_beside_extraction
from state import IndexState
from storyjudge.core.charactergraph import build_ckg, stats, to_json
from storyjudge.core.context import Context, context_of
from storyjudge.core.models import resolve_spec
from storyjudge.core.rundir import RunDir


def build_ckg_node(state: IndexState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Merge names, keep the predicates seen often enough across samples and scenes, save the graph.

    Only the current scenes' extractions count, so a rerun on a thread never mixes in another document's.
    """
    ctx = context_of(runtime)
    started = time.perf_counter()
    scenes = state.get("scenes") or []
    current = {scene["id"] for scene in scenes}
    extractions = [e for e in state.get("extractions") or [] if e["scene_id"] in current]
    graph = build_ckg(
        extractions,
        scenes,
        samples=ctx.ckg_samples,
        threshold=ctx.predicate_threshold,
        min_support=ctx.predicate_min_count,
    )
    graph.graph.update(
        model=resolve_spec(ctx, "extractor"),
        prompt=prompts.load(PROMPT, ctx.prompt_dir).version_id,
        temperature=ctx.extraction_temperature,
        doc_hash=state.get("doc_hash", ""),
    )
    data = to_json(graph)
    run_dir = RunDir(Path(state["run_dir"]))
    run_dir.root.mkdir(parents=True, exist_ok=True)
    run_dir.write_json(run_dir.ckg, data)
    return {"ckg": data, "ckg_stats": stats(data), "timings": {"ckg": time.perf_counter() - started}}


def route_after_ckg(state: IndexState, runtime: Runtime[Context]) -> Literal["store_index", "__end__"]:
    """On to the index, unless it was built beside the extraction (``index_beside_extraction``)."""
    return "__end__" if index_beside_extraction(context_of(runtime)) else "store_index"
