"""Where the refine graph's summarizer runs: beside the index, or after it.

The summarizer reads the scenes only, so it need not wait for the CKG or the index; these routers start it
beside the index when that is worth it, and the refine graph joins the two before ``factscore``.
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from state import RefineState
from storyjudge.core.context import Context, context_of
from storyjudge.core.models import is_local, resolve_spec


def summarize_beside_index(state: RefineState, ctx: Context, beside: bool = True) -> bool:
    """Whether the summarizer runs while the index is built: it needs the scenes only, not the CKG or the index.

    A remote summarizer waits on the network while the extraction calls do too and the embedder keeps the
    cores busy, so on a novel its whole run hides behind the index. It waits for the index instead when the
    caller brought a summary (nothing to summarize), when the graph pauses before ``summarize`` (``beside``
    false: the web UI shows the CKG before the summary step), and when the summarizer is an in-process model,
    whose llama.cpp threads would compete with torch's for the cores and with the extraction for the model.
    """
    if not beside or (state.get("summary") or "").strip():
        return False
    return not is_local(resolve_spec(ctx, "summarizer"))


def route_after_segment(
    state: RefineState, runtime: Runtime[Context], beside: bool = True
) -> list[Literal["index", "summarize"]]:
    """Build the index; summarize beside it when ``summarize_beside_index`` says so."""
    if summarize_beside_index(state, context_of(runtime), beside):
        return ["index", "summarize"]
    return ["index"]


def route_summary(
    state: RefineState, runtime: Runtime[Context], beside: bool = True
) -> list[Literal["summarize", "factscore"]]:
    """After the index: score the caller's summary, or summarize, unless the summarizer already runs beside it.

    The index and the summary then meet before ``factscore`` (the refine graph joins the two), so nothing is
    routed from here. The router reads the state as it was when both started, plus the index's own update.
    """
    if (state.get("summary") or "").strip():
        return ["factscore"]
    if summarize_beside_index(state, context_of(runtime), beside):
        return []
    return ["summarize"]
