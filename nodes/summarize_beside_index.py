"""Where the refine graph's summarizer runs: beside the index (it reads the scenes only), or after it."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from state import RefineState
from storyjudge.core.context import Context, context_of
from storyjudge.core.models import is_local, resolve_spec


def summarize_beside_index(state: RefineState, ctx: Context, beside: bool = True) -> bool:
    """Whether the summarizer runs while the index is built: a remote one does, hidden behind the index.

    It waits when a summary was given, when the graph pauses before ``summarize`` (``beside`` false), and when
    the summarizer is in-process, competing with the embedder and the extraction for the cores.
    """
    given = (state.get("summary") or "").strip()
    return beside and not given and not is_local(resolve_spec(ctx, "summarizer"))


def route_after_segment(
    state: RefineState, runtime: Runtime[Context], beside: bool = True
) -> list[Literal["index", "summarize"]]:
    """Build the index; summarize beside it when ``summarize_beside_index`` says so."""
    return ["index", "summarize"] if summarize_beside_index(state, context_of(runtime), beside) else ["index"]


def route_summary(
    state: RefineState, runtime: Runtime[Context], beside: bool = True
) -> list[Literal["summarize", "factscore"]]:
    """After the index: score the caller's summary, or summarize, unless the summarizer already runs beside it."""
    if (state.get("summary") or "").strip():
        return ["factscore"]
    return [] if summarize_beside_index(state, context_of(runtime), beside) else ["summarize"]
