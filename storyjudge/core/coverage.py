"""How much of a score was actually judged, and whether that is enough to stand behind the number.

A score over the units that happened to be judged moves when judging fails: NarrativeFactScore is supported /
judged, so facts whose verdict could not be read, and sentences whose decomposition failed, simply drop out, and
worse judging can raise the score. Every score therefore travels with its *coverage*, the share of its units that
were judged, and is *reliable* only when that share reaches the run's coverage floor. Unreliable rounds are
shown as such, never chosen as the best summary, and left out of agreement figures (with a count). A score
whose judge failed its planted control items (``storyjudge.core.planted``) is not reliable in the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_FLOOR = 0.9
UNRELIABLE = "not reliable"
"""The words for a score that does not count. Every surface words a card through this module (``describe``,
``describe_card``, ``reliability_text``, ``check_verdict``), so a reader meets one wording everywhere."""


def share(judged: int, total: int) -> float:
    """Judged units over all units (0 when there are none)."""
    return judged / total if total > 0 else 0.0


def is_reliable(score: float | None, coverage: float, floor: float) -> bool:
    """Whether a score exists and enough of its units were judged to stand behind it."""
    return score is not None and coverage + 1e-12 >= floor


def card_reliable(card: Mapping[str, Any]) -> bool:
    """Whether a score card's score counts; a card recorded before coverage existed counts when it has a score."""
    return bool(card.get("reliable", card.get("score") is not None))


def describe(score: float | None, coverage: float | None, reliable: bool | None, digits: int = 3) -> str:
    """A score as people should read it: "0.750 (coverage 95%)", or "not reliable (coverage 40%)".

    An unreliable score is never printed as a number: a table skimmed for numbers must not pick it up. The
    value stays in the run record for whoever wants to inspect it.
    """
    cover = "" if coverage is None else f" (coverage {coverage:.0%})"
    if score is None:
        return "n/a" + cover
    if reliable is False:
        return UNRELIABLE + cover
    return f"{score:.{digits}f}" + cover


def judge_failure(card: Mapping[str, Any]) -> str:
    """Why planted control items make a score not count ("" when they passed or nothing was planted).

    E.g. "the judge accepted 3 of 3 planted false facts ...", or the annotator's record for BooookScore.
    """
    check = card.get("judge_check") or card.get("annotator_check") or {}
    return "" if not check or check.get("passed", True) else str(check.get("note", ""))


def describe_card(card: Mapping[str, Any], digits: int = 3) -> str:
    """``describe`` for a score card, naming the planted-item check when that is what makes it not count."""
    failed = judge_failure(card)
    text = describe(card.get("score"), card.get("coverage"), card.get("reliable"), digits)
    if (
        failed
        and card.get("score") is not None
        and card.get("coverage", 0.0) + 1e-12 >= card.get("coverage_floor", 0.0)
    ):
        return f"{UNRELIABLE} ({failed.split(' (')[0]})"  # the counts by kind are in the full note
    return text


def reliability_text(card: Mapping[str, Any]) -> str:
    """Whether a card counts, in words: reliable, or not reliable and why (planted facts, too little judged)."""
    if card_reliable(card):
        return "reliable"
    failed = judge_failure(card)
    if failed:
        return f"{UNRELIABLE}: {failed}"
    if card.get("score") is None:
        return f"{UNRELIABLE}: nothing could be judged"
    floor = card.get("coverage_floor")
    below = f", below the floor of {float(floor):.0%}" if floor is not None else ""
    return f"{UNRELIABLE}: only {float(card.get('coverage') or 0.0):.0%} of its facts were judged{below}"


def check_verdict(check: Mapping[str, Any], what: str = "the score") -> str:
    """A planted-item check's outcome: "passed", or e.g. "failed: the score is not reliable" (undecided too)."""
    decision = check.get("decision") or ("passed" if check.get("passed", True) else "failed")
    return "passed" if decision == "passed" else f"{decision}: {what} is {UNRELIABLE}"
