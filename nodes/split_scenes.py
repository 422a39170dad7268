"""Segmentation node: the document (or given scenes) into scenes, plus its hash, title and run directory."""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from state import IndexState
from storyjudge.core import heavy_imports
from storyjudge.core.context import ConfigError, Context, context_of
from storyjudge.core.records import Scene
from storyjudge.core.rundir import RunDir, default_run_dir, document_hash
from storyjudge.core.segmentation import guess_title, join_scenes, normalize_scenes, segment_document


def segment(state: IndexState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Split the narrative into scenes and claim the run directory (refused when it is another document's)."""
    ctx = context_of(runtime)
    started = time.perf_counter()
    if ctx.ckg_samples > 1 and ctx.extraction_temperature <= 0:
        raise ConfigError(
            "Invalid setting: extraction_temperature must be > 0 when ckg_samples > 1 (identical samples add "
            "nothing); raise the temperature or use ckg_samples=1."
        )
    document = state.get("document") or ""
    if document.strip():
        found, rule = _segmented(document, ctx.chunk_size)
        scenes, source = [Scene(**scene) for scene in found], document
    elif state.get("scenes"):
        scenes, rule = normalize_scenes(list(state["scenes"]), ctx.chunk_size), "scenes"
        source = join_scenes(scenes)
    else:
        raise ValueError("Nothing to index: give a non-blank 'document' or a non-empty list of 'scenes'.")
    doc_hash = document_hash(source)
    title = state.get("title") or guess_title(source)
    run_dir = ctx.run_dir or str(default_run_dir(title, doc_hash))
    RunDir(Path(run_dir)).claim(doc_hash, title)
    # imported before the graph forks, so that no two threads import them at once
    heavy_imports.load_before_branches(index=True, embedder=ctx.embedder)
    return {
        "doc_hash": doc_hash,
        "title": title,
        "run_dir": run_dir,
        "scenes": scenes,
        "segmentation": rule,
        "timings": {"segment": time.perf_counter() - started},
    }


@lru_cache(maxsize=4)
def _segmented(document: str, chunk_size: int) -> tuple[tuple[Scene, ...], str]:
    """``segment_document``, remembered: the refine graph and its index subgraph segment the same text."""
    scenes, rule = segment_document(document, chunk_size)
    return tuple(scenes), rule
