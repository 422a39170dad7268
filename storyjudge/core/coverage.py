"""How much of a score was judged, whether that is enough to stand behind it, and the one wording of both.

A score over the judged units can rise when judging fails, so every score carries its coverage and is reliable
only at or above the run's floor (and when its judge passed its planted items).
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

    An unreliable score is never printed as a number, so a skimmed table cannot pick it up.
    """
    cover = "" if coverage is None else f" (coverage {coverage:.0%})"
    if score is None:
        return "n/a" + cover
    if reliable is False:
        return UNRELIABLE + cover
    return f"{score:.{digits}f}" + cover


def judge_failure(card: Mapping[str, Any]) -> str:
    """Why planted control items make a score not count ("" when they passed or nothing was planted)."""
    check = card.get("judge_check") or card.get("annotator_check") or {}
    return "" if not check or check.get("passed", True) else str(check.get("note", ""))


def describe_card(card: Mapping[str, Any], digits: int = 3) -> str:
    """``describe`` for a score card, naming the planted-item check when that is what makes it not count."""
    failed = judge_failure(card)
    if failed and is_reliable(card.get("score"), card.get("coverage", 0.0), card.get("coverage_floor", 0.0)):
        return f"{UNRELIABLE} ({failed.split(' (')[0]})"  # the counts by kind are in the full note
    return describe(card.get("score"), card.get("coverage"), card.get("reliable"), digits)


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
