"""Stop rule and best-summary selection of the refine loop."""

from __future__ import annotations

from typing import Any

from nodes.assess import (
    best_of,
    fallback_of,
    stale_rounds,
    stop_reason,
)
from storyjudge.core.context import Context
from storyjudge.core.coverage import reliability_text


def it(
    n: int, score: float | None, *, unsupported: int = 1, accepted: bool = True, reliable: bool | None = None
) -> Any:
    card: dict[str, Any] = {
        "score": score,
        "reliable": score is not None if reliable is None else reliable,
        "unsupported": unsupported,
        "supported": 1,
        "unjudged": 0,
        "facts": 2,
        "verdicts": [],
    }
    return {"iteration": n, "summary": f"summary {n}", "factscore": card, "accepted": accepted, "note": ""}


def test_target_reached_stops() -> None:
    assert stop_reason([it(0, 1.0, unsupported=0)], Context()).startswith("target reached")
    assert stop_reason([it(0, 0.8)], Context(target_score=0.8)).startswith("target reached")


def test_continues_below_target_on_first_round() -> None:
    assert stop_reason([it(0, 0.5)], Context()) == ""


def test_saturation_with_patience() -> None:
    rounds = [it(0, 0.5), it(1, 0.505)]
    reason = stop_reason(rounds, Context(min_delta=0.01, patience=1))
    assert reason == (
        "the last refinement (round 1, NFS 0.505) did not beat the best (round 0, NFS 0.500) by min_delta 0.01; "
        "patience 1 stops the loop after one round without a gain, before max_iterations 3 is reached"
    )
    assert stop_reason(rounds, Context(min_delta=0.01, patience=2)) == ""
    rounds.append(it(2, 0.50))
    reason = stop_reason(rounds, Context(min_delta=0.01, patience=2, max_iterations=5))
    assert "after 2 rounds without a gain, before max_iterations 5" in reason


def test_improvement_resets_staleness() -> None:
    rounds = [it(0, 0.5), it(1, 0.505), it(2, 0.7)]
    assert stale_rounds(rounds, 0.01) == 0
    assert stop_reason(rounds, Context(patience=2, max_iterations=5)) == ""


def test_max_iterations() -> None:
    rounds = [it(0, 0.2), it(1, 0.4), it(2, 0.6)]
    assert (
        stop_reason(rounds, Context(max_iterations=2)) == "max iterations reached (2 refinement round(s) run)"
    )
    assert stop_reason(rounds, Context(max_iterations=3)) == ""
    assert stop_reason([it(0, 0.2)], Context(max_iterations=0)).startswith("max iterations")


def test_nothing_to_refine_when_all_unjudged() -> None:
    assert stop_reason([it(0, None, unsupported=0)], Context()) == "nothing could be judged"


def test_best_is_highest_and_ties_go_to_later() -> None:
    rounds = [it(0, 0.5), it(1, 0.8), it(2, 0.8), it(3, 0.6)]
    best = best_of(rounds)
    assert best is not None and best["iteration"] == 2


def test_rejected_iteration_is_never_best() -> None:
    rounds = [it(0, 0.5), it(1, 0.9, accepted=False)]
    best = best_of(rounds)
    assert best is not None and best["iteration"] == 0


def test_unscored_iteration_loses_to_scored() -> None:
    best = best_of([it(0, 0.0), it(1, None)])
    assert best is not None and best["iteration"] == 0


def test_unreliable_round_is_never_best() -> None:
    # round 1 scores higher only because most of its facts went unjudged
    rounds = [it(0, 0.6), it(1, 1.0, reliable=False)]
    best = best_of(rounds)
    assert best is not None and best["iteration"] == 0


def test_no_reliable_round_falls_back_to_the_unrefined_summary() -> None:
    rounds = [it(0, 0.6, reliable=False), it(1, 0.9, reliable=False)]
    assert best_of(rounds) is None
    fallback = fallback_of(rounds)
    assert fallback is not None and fallback["iteration"] == 0


def test_unreliable_target_does_not_stop_and_is_no_gain() -> None:
    assert stop_reason([it(0, 1.0, unsupported=1, reliable=False)], Context()) == ""
    rounds = [it(0, 0.5), it(1, 0.9, reliable=False)]
    assert stale_rounds(rounds, 0.01) == 1
    assert stop_reason(rounds, Context(patience=1)).startswith(
        "the last refinement's score (round 1) is "
        + reliability_text(rounds[1]["factscore"])  # the card's words (core.coverage), once
        + "; patience 1"
    )


def test_a_rejected_last_round_is_named_with_the_guard_and_its_reason() -> None:
    """Not "saturated": the words say the guard rejected the round, why, and that patience ended the loop."""
    rejected = it(1, 0.9, accepted=False)
    rejected["note"] = (
        "refinement guard: too long (130 words; the refiner was asked for at most 120); not accepted as best"
    )
    reason = stop_reason([it(0, 0.5), rejected], Context(patience=1, max_iterations=2))
    assert reason == (
        "the last refinement (round 1) was rejected by the refinement guard: too long (130 words; the refiner "
        "was asked for at most 120); patience 1 stops the loop after one round without a gain, before "
        "max_iterations 2 is reached"
    )
    both = it(1, 0.9, accepted=False)
    both["note"] = (
        "coherence guard: BooookScore 0.700 fell more than 0.05 below the best's 0.900; not accepted as best; "
        "refinement guard: copies the narrative; not accepted as best"
    )
    reason = stop_reason([it(0, 0.5), both], Context(patience=1, max_iterations=1))
    assert reason.startswith(
        "the last refinement (round 1) was rejected by the coherence guard: BooookScore 0.700 fell more than "
        "0.05 below the best's 0.900 and by the refinement guard: copies the narrative; patience 1"
    )
    assert "before max_iterations" not in reason  # the last allowed round: patience did not cut it short


def test_target_reached_names_its_round() -> None:
    rounds = [it(0, 0.5), it(1, 1.0, unsupported=0)]
    assert stop_reason(rounds, Context()) == "target reached (NFS 1.000 >= 1.0 in round 1)"


def test_a_round_the_judge_check_failed_says_so_not_coverage() -> None:
    from nodes.assess import what_round_did

    latest = it(1, 0.9, reliable=False)
    latest["factscore"]["coverage"] = 1.0
    latest["factscore"]["judge_check"] = {
        "passed": False,
        "note": "the judge accepted 4 of 4 planted false facts",
    }
    said = what_round_did([it(0, 0.5), latest], Context())
    assert (
        said
        == "the last refinement's score (round 1) is not reliable: the judge accepted 4 of 4 planted false facts"
    )
