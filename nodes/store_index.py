"""Index node: scenes, as embedder-sized passages, into the scene store once per content (the CKG stays a graph)."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from langgraph.runtime import Runtime

from nodes.extract import run_context
from state import IndexState
from storyjudge.core import progress
from storyjudge.core.context import Context, context_of
from storyjudge.core.llm import stop_if_run_ended
from storyjudge.core.sceneindex import build_index
from storyjudge.core.scenestore import store_for


def store_index(state: IndexState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Embed what is not embedded yet: an unchanged document reuses its complete collection at no cost."""
    ctx = context_of(runtime)
    started = time.monotonic()  # a failure of this run's calls since then stops the index too
    run = run_context(ctx, state["run_dir"])
    store, location = store_for(ctx, state["run_dir"])
    # a call of this run beside the index has failed, or Ctrl-C: stop here
    go_on = partial(stop_if_run_ended, run, started)

    def planned(passages: int) -> None:
        go_on()
        progress.emit("index", total=passages)

    def embedded(passages: int) -> None:
        go_on()  # the batches stored so far stay in the collection, and a resume embeds only the rest
        progress.emit("index", advance=passages)

    ref, built = build_index(
        state.get("scenes") or [],
        location=location,
        store=store,
        embedder=ctx.embedder,
        progress=embedded,
        on_total=planned,
        go_on=go_on,
    )
    if not built:
        progress.emit("index", message="reused")
    return {"index": ref, "timings": {"index": time.monotonic() - started}}
