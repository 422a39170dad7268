"""Last node of the refine graph: hand back the best summary and write the run record next to the run."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

import prompts
from nodes.assess import fallback_of
from state import RefineState
from storyjudge.core.context import Context, context_of
from storyjudge.core.resultjson import build_result, write_result


def finish(state: RefineState, runtime: Runtime[Context]) -> dict[str, Any]:
    """The best summary becomes the output's ``summary``; the one writer of result.json, with the wall time."""
    ctx = context_of(runtime)
    iterations = state.get("iterations") or []
    best = fallback_of(iterations)
    summary = best["summary"] if best else state.get("summary", "")
    final = {**state, "summary": summary, "best_iteration": best["iteration"] if best else 0}
    if state.get("run_dir"):
        result = build_result(final, ctx, prompt_versions=prompts.versions(ctx.prompt_dir))
        if "started_at" in state:  # a resumed run counts from its first start, the pause included
            result["wall_seconds"] = round(time.time() - state["started_at"], 2)
        write_result(state["run_dir"], result)
    return {"summary": summary, "best_iteration": final["best_iteration"]}
