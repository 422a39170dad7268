"""Each round of the refine loop assessed: record it with its guards' decisions, keep the best, decide to stop.

The loop stops at the target score, after ``patience`` rounds without a ``min_delta`` gain, when nothing is
left to fix, or after ``max_iterations``. The result is the best summary, not the last; ties go to the later.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from nodes.guards import guard_round, narrative_text, revised_iteration
from state import RefineState
from storyjudge.core.context import Context, context_of
from storyjudge.core.coverage import UNRELIABLE, card_reliable, describe, judge_failure, reliability_text
from storyjudge.core.records import Iteration


def _score(it: Iteration) -> float:
    value = it["factscore"]["score"]
    return -1.0 if value is None else value


def best_of(iterations: list[Iteration]) -> Iteration | None:
    """Highest score among accepted rounds whose score is reliable (worse judging must not win), ties to the later."""
    eligible = [it for it in iterations if it["accepted"] and card_reliable(it["factscore"])]
    return max(eligible, key=lambda it: (_score(it), it["iteration"]), default=None)


def fallback_of(iterations: list[Iteration]) -> Iteration | None:
    """The best round, or the first one (the unrefined summary) when none is reliable and accepted."""
    best = best_of(iterations)
    return best if best is not None or not iterations else min(iterations, key=lambda i: i["iteration"])


def stale_rounds(iterations: list[Iteration], min_delta: float) -> int:
    """Consecutive latest rounds that did not beat the best before them by ``min_delta`` (or were not accepted)."""
    ordered = sorted(iterations, key=lambda i: i["iteration"])
    stale = 0
    for n in range(1, len(ordered)):
        previous_best = best_of(ordered[:n])
        gain = _score(ordered[n]) - (_score(previous_best) if previous_best else -1.0)
        counts = ordered[n]["accepted"] and card_reliable(ordered[n]["factscore"])
        stale = 0 if (counts and gain >= min_delta) else stale + 1
    return stale


def stop_reason(iterations: list[Iteration], ctx: Context) -> str:
    """Why the loop stops now, in words that say what happened, or "" to refine again."""
    latest = max(iterations, key=lambda i: i["iteration"])
    card = latest["factscore"]
    n = latest["iteration"]
    reached = card["score"] is not None and card["score"] >= ctx.target_score
    if reached and card_reliable(latest["factscore"]) and latest["accepted"]:
        return f"target reached (NFS {card['score']:.3f} >= {ctx.target_score} in round {n})"
    stale = stale_rounds(iterations, ctx.min_delta) if n >= 1 else 0
    if stale >= ctx.patience:
        early = f", before max_iterations {ctx.max_iterations} is reached" if n < ctx.max_iterations else ""
        without = "one round" if ctx.patience == 1 else f"{ctx.patience} rounds"
        return (
            f"{what_round_did(iterations, ctx)}; patience {ctx.patience} stops the loop after {without} "
            f"without a gain{early}"
        )
    if n >= ctx.max_iterations:
        return f"max iterations reached ({ctx.max_iterations} refinement round(s) run)"
    if card["unsupported"] == 0:
        return (
            "nothing to refine (no unsupported facts)"
            if card["score"] is not None
            else "nothing could be judged"
        )
    return ""


def what_round_did(iterations: list[Iteration], ctx: Context) -> str:
    """The latest round's outcome in words: rejected by a guard (and why), a score that does not count, or no gain."""
    latest = max(iterations, key=lambda i: i["iteration"])
    n = latest["iteration"]
    if not latest["accepted"]:
        # the note names each guard that rejected the round: "coherence guard: ...", "refinement guard: ..."
        notes = (latest.get("note") or "").split("; not accepted as best")
        rejections = [part.strip("; ") for part in notes if "guard:" in part]
        by = " and by the ".join(rejections) or "guard"
        return f"the last refinement (round {n}) was rejected by the {by}"
    if not card_reliable(latest["factscore"]):
        return f"the last refinement's score (round {n}) is {reliability_text(latest['factscore'])}"
    best = best_of([it for it in iterations if it["iteration"] < n])
    if best is None:
        return f"the last refinement (round {n}) brought no gain"
    return (
        f"the last refinement (round {n}, NFS {_score(latest):.3f}) did not beat the best (round "
        f"{best['iteration']}, NFS {_score(best):.3f}) by min_delta {ctx.min_delta}"
    )


def assess(state: RefineState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Record this round (with the coherence and refinement guards' decisions) and decide whether to go on."""
    ctx = context_of(runtime)
    iteration = state.get("iteration", 0)
    card = state["factscore"]
    record = Iteration(iteration=iteration, summary=state["summary"], factscore=card, accepted=True, note="")
    if state.get("metrics"):
        record["metrics"] = state["metrics"]
    previous = [it for it in state.get("iterations") or [] if it["iteration"] != iteration]
    notes: list[str] = []  # a guard's rejection first, then why the score does not count
    coherence = state.get("coherence") if ctx.coherence_guard else None
    if coherence is not None:
        record["coherence"] = coherence
        best = best_of(previous)
        best_coherence = (best.get("coherence") or {}) if best else {}
        best_coh = best_coherence.get("score") if best_coherence.get("reliable", True) else None
        this_coh = coherence.get("score")
        if best_coh is not None and (this_coh is None or not coherence.get("reliable", True)):
            # the guard could not measure this round: not measured is not coherent
            shown = describe(this_coh, coherence.get("coverage", 0.0), False)
            notes.append(f"coherence guard: this round's BooookScore is {shown}; not accepted as best")
        elif best_coh is not None and this_coh is not None and this_coh < best_coh - ctx.coherence_margin:
            notes.append(
                f"coherence guard: BooookScore {this_coh:.3f} fell more than {ctx.coherence_margin} below the "
                f"best's {best_coh:.3f}; not accepted as best"
            )
    # refinement guard (nodes/guards.py): no win by deleting supported facts, shrinking, padding or copying
    revised = revised_iteration(previous, state.get("refined_from")) if iteration else None
    guard, rejection = guard_round(state["summary"], card, narrative_text(state), revised=revised, ctx=ctx)
    record["guard"] = guard
    notes += [rejection] if rejection else []
    record["accepted"] = not notes
    if not card_reliable(card):
        reasons = [judge_failure(card)] if judge_failure(card) else []
        if card.get("coverage", 0.0) + 1e-12 < ctx.coverage_floor or not reasons:
            reasons.insert(
                0,
                f"{card.get('judged', 0)} of {card['facts']} facts judged, "
                f"{card.get('decompose_failures', 0)} sentence(s) not decomposed (coverage "
                f"{card.get('coverage', 0.0):.0%} < floor {ctx.coverage_floor:.0%})",
            )
        notes.append(f"score {UNRELIABLE}: {'; '.join(reasons)}; not eligible as best")
    record["note"] = "; ".join(notes)
    everything = [*previous, record]
    reason = stop_reason(everything, ctx)
    best = fallback_of(everything)
    return {
        "iterations": [record],
        "stop_reason": reason,
        "best_iteration": best["iteration"] if best else iteration,
    }


def route_loop(state: RefineState) -> Literal["refine", "finish"]:
    """Refine again unless a stop reason was recorded."""
    return "finish" if state.get("stop_reason") else "refine"


def route_guard(state: RefineState, runtime: Runtime[Context]) -> Literal["coherence", "assess"]:
    """Score coherence first when the guard is on."""
    return "coherence" if context_of(runtime).coherence_guard else "assess"
