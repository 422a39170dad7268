"""The factscore graph's last node: a round's score card (``core.narrativefactscore``) and the metrics' cards."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from state import FactScoreState
from storyjudge.core.context import Context, context_of
from storyjudge.core.metrics import RoundView, round_cards
from storyjudge.core.narrativefactscore import score_card, unique_facts


def score_nfs(state: FactScoreState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Aggregate this iteration's verdicts into its score card."""
    iteration = state.get("iteration", 0)
    failed = {f["sentence_index"] for f in state.get("failed_sentences") or [] if f["iteration"] == iteration}
    kept = {fact["id"] for fact in unique_facts(state.get("raw_facts") or [], iteration)}
    # a fact an earlier sentence already stated was judged in its own branch too (by the same call, which
    # the LLM cache or single-flight answered once); like the facts, it counts once, for the first sentence
    verdicts = [v for v in state.get("verdicts") or [] if v["fact"]["id"] in kept]
    ctx = context_of(runtime)
    judge = next(
        (c["check"] for c in reversed(state.get("planted_checks") or []) if c["iteration"] == iteration), None
    )
    card = score_card(
        iteration,
        state.get("sentences") or [],
        verdicts,
        len(failed),
        coverage_floor=ctx.coverage_floor,
        failed_sentences=failed,
        unjudged=ctx.nfs_unjudged,
        judge=judge,
    )
    if not ctx.metrics:
        return {"factscore": card, "metrics": {}}
    view = RoundView(
        iteration=iteration,
        summary=state.get("summary") or "",
        scenes=[dict(scene) for scene in state.get("scenes") or []],
        ckg=dict(state.get("ckg") or {}),
        factscore=dict(card),
    )
    return {"factscore": card, "metrics": round_cards(ctx.metrics, view)}
