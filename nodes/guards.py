"""Refinement guards: a refined summary must not win NarrativeFactScore by deleting or by copying.

NarrativeFactScore is a precision, so dropping doubtful sentences or pasting the narrative would raise it. A
refinement is accepted only if, against the summary it revises, it loses at most ``max_supported_loss`` of the
supported facts, keeps between ``min_length_ratio`` of the words and what the refiner was asked for
(``word_budget``), and raises its copy rate (trigrams found verbatim in the narrative) by at most
``max_copy_increase``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from storyjudge.core.context import Context
from storyjudge.core.records import GuardRecord, Iteration, ScoreCard
from storyjudge.core.segmentation import join_scenes
from storyjudge.core.summary_stats import copy_rate, source_trigrams, words
from storyjudge.core.tokens import count_tokens

WORD_SLACK = 10  # words the refiner may add beyond max_length_ratio times the revised summary
# shorter refinements are not judged for copying: one name ("of Gull Island") would move the share by a fifth
MIN_COPY_WORDS = 20


def word_budget(words_before: int, max_length_ratio: float, most_words: int | None = None) -> int:
    """Most words a refinement may have (the refiner is asked for this).

    ``most_words`` (``budget_words``) caps growth, so rounds of refinement cannot lengthen a summary unboundedly.
    """
    grown = int(words_before * max_length_ratio) + WORD_SLACK
    return grown if most_words is None else min(grown, max(words_before, most_words))


def budget_words(summary: str, max_summary_tokens: int) -> int:
    """The words of a summary of ``max_summary_tokens`` tokens, at this summary's words per token."""
    n_words, n_tokens = len(words(summary)), count_tokens(summary)
    return int(n_words * max_summary_tokens / n_tokens) if n_tokens else max_summary_tokens


def min_words(words_before: int, min_length_ratio: float) -> int:
    """Fewest words a refinement of a ``words_before``-word summary may have."""
    return math.ceil(words_before * min_length_ratio - 1e-9)


def allowed_loss(supported_before: int, max_supported_loss: float) -> int:
    """Supported facts a refinement may lose: the share of the revised summary's, rounded down."""
    return math.floor(supported_before * max_supported_loss + 1e-9)


def narrative_text(state: Mapping[str, Any]) -> str:
    """The narrative a run summarizes: its document, or its scenes joined when only scenes were given."""
    document = state.get("document") or ""
    return document if document.strip() else join_scenes(state.get("scenes") or [])


def measure_round(
    summary: str,
    card: ScoreCard,
    narrative: str | set[tuple[str, str, str]],
    *,
    revised: Iteration | None = None,
    ctx: Context,
) -> GuardRecord:
    """What the guard measures for one round; without the round it revised (round 0) only its length and copy rate."""
    known = source_trigrams(narrative) if isinstance(narrative, str) else narrative
    n_words = len(words(summary))
    rate = copy_rate(summary, known)
    record = GuardRecord(
        words=n_words,
        copy_rate=_round(rate),
        revises=None,
        supported_before=None,
        supported_after=card["supported"],
        supported_loss_allowed=None,
        words_before=None,
        length_ratio=None,
        min_words=None,
        max_words=None,
        copy_rate_before=None,
        copy_increase=None,
        reasons=[],
    )
    if revised is None:
        return record
    before, supported = revised["summary"], revised["factscore"]["supported"]
    before_words, before_rate = len(words(before)), copy_rate(before, known)
    most_words = budget_words(before, ctx.max_summary_tokens)
    record.update(
        {
            "revises": revised["iteration"],
            "supported_before": supported,
            "supported_loss_allowed": allowed_loss(supported, ctx.max_supported_loss),
            "words_before": before_words,
            "length_ratio": round(n_words / before_words, 4) if before_words else None,
            "min_words": min_words(before_words, ctx.min_length_ratio),
            "max_words": word_budget(before_words, ctx.max_length_ratio, most_words),
            "copy_rate_before": _round(before_rate),
            "copy_increase": _round(rate - before_rate)
            if rate is not None and before_rate is not None
            else None,
        }
    )
    record["reasons"] = rejection_reasons(record, ctx)
    return record


def rejection_reasons(record: GuardRecord, ctx: Context) -> list[str]:
    """Why a measured refinement is not accepted ([] when it is, or when ``refine_guard`` is off)."""
    if not ctx.refine_guard or record["supported_before"] is None:
        return []
    reasons = []
    before, after = record["supported_before"], record["supported_after"] or 0
    allowed = record["supported_loss_allowed"] or 0
    if before - after > allowed:
        reasons.append(
            f"dropped supported facts ({before} -> {after}; at most {allowed} may be lost, "
            f"max_supported_loss {ctx.max_supported_loss})"
        )
    n_words, low, high = record["words"], record["min_words"], record["max_words"]
    if low is not None and n_words < low:
        reasons.append(
            f"too short ({n_words} words, {record['length_ratio'] or 0:.0%} of the revised summary's "
            f"{record['words_before']}; at least {low}, min_length_ratio {ctx.min_length_ratio})"
        )
    if high is not None and n_words > high:
        reasons.append(f"too long ({n_words} words; the refiner was asked for at most {high})")
    rise = record["copy_increase"]
    if rise is not None and rise > ctx.max_copy_increase + 1e-9 and n_words >= MIN_COPY_WORDS:
        reasons.append(
            f"copies the narrative ({record['copy_rate']:.0%} of its trigrams are the narrative's, up from "
            f"{record['copy_rate_before']:.0%}; at most {100 * ctx.max_copy_increase:.0f} points more, "
            "max_copy_increase)"
        )
    return reasons


def guard_round(
    summary: str, card: ScoreCard, narrative: str, *, revised: Iteration | None, ctx: Context
) -> tuple[GuardRecord, str]:
    """Measure one round against the Iteration it revised (None for round 0): the record and the rejection note."""
    record = measure_round(summary, card, narrative, revised=revised, ctx=ctx)
    reasons = record["reasons"]
    return record, f"refinement guard: {'; '.join(reasons)}; not accepted as best" if reasons else ""


def revised_iteration(previous: list[Iteration], refined_from: int | None) -> Iteration | None:
    """The earlier round this round revised: ``refined_from``, else the latest (None in round 0)."""
    named = [it for it in previous if it["iteration"] == refined_from]
    return named[0] if named else max(previous, key=lambda it: it["iteration"], default=None)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
