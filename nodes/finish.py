"""Last node of the refine graph: hand back the best summary and write the run record next to the run."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

import prompts
from nodes.loop import fallback_of
from state import RefineState
from storyjudge.core.context import Context, context_of
from storyjudge.core.runrecord import build_result, write_result


def finish(state: RefineState, runtime: Runtime[Context]) -> dict[str, Any]:
    """The best summary becomes the output's ``summary``; result.json is written when there is a run directory."""
    ctx = context_of(runtime)
    iterations = state.get("iterations") or []
    best = fallback_of(iterations)
    summary = best["summary"] if best else state.get("summary", "")
    final = {**state, "summary": summary, "best_iteration": best["iteration"] if best else 0}
    if state.get("run_dir"):
        write_result(
            state["run_dir"], build_result(final, ctx, prompt_versions=prompts.versions(ctx.prompt_dir))
        )
    return {"summary": summary, "best_iteration": final["best_iteration"]}
