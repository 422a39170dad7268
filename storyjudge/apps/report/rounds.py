"""One round (iteration) as a panel: its score, interval and judge check, highlighted summary and fact table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from storyjudge.apps.report.verdicts import FactRow, Passage, Piece, _fact_rows, summary_pieces
from storyjudge.core.coverage import card_reliable, reliability_text
from storyjudge.core.summary_stats import words

FACT_COUNTS = ("facts", "supported", "unsupported", "unjudged")
OPEN_WORDS = 600
"""Words of summaries a page shows open, in all; the other rounds' summaries start folded (a click opens them)."""


@dataclass
class IterationView:
    """Everything the iteration template draws."""

    iteration: int
    key: str
    score: float | None
    delta: float | None
    best: bool
    accepted: bool
    note: str
    coverage: float | None  # share of the summary's facts that were judged
    reliable: bool  # False: below the run's coverage floor, the number is not shown as a score
    coherence: float | None
    coherence_coverage: float | None
    coherence_reliable: bool
    counts: dict[str, int]
    pieces: list[Piece]
    facts: list[FactRow]
    passages: list[Passage]
    words: int  # of the summary
    open_summary: bool  # False: folded to one line, opened by a click
    corrections: int = 0  # verdicts a person corrected; the score counts them
    judge_check: dict[str, Any] | None = None  # the judge's record on the round's planted facts
    annotator_checks: list[dict[str, Any]] = field(default_factory=list)  # on planted confusing sentences
    unreliable_why: str = ""  # what makes the score not count, in words
    interval: str = ""  # "95% CI [0.200, 0.800] over 6 sentences"
    corrected: str = ""  # the judge-corrected estimate with its interval, or why there is none
    corrected_note: str = ""  # what the estimate assumes
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # added metrics' cards, with headlines

    @property
    def flagged(self) -> int:
        """Summary sentences marked for an unsupported fact."""
        return sum(1 for p in self.pieces if p.sentence is not None and p.sentence.status == "unsupported")


def _interval_text(ci: Any, over: Any) -> str:
    return f"95% CI [{ci[0]:.3f}, {ci[1]:.3f}] over {over}" if ci and over else ""


def round_views(
    iterations: list[dict[str, Any]],
    *,
    passages: Mapping[str, str],
    best: int | None,
    order: list[int],
    prefix: str = "it",
) -> list[IterationView]:
    """Every round's view, each with its change from the last scored round before it.

    Summaries start open, taken in ``order``, while the words shown stay within ``OPEN_WORDS``: one long
    summary starts folded, so the page stays a few screens long until a section is opened.
    """
    sizes = {int(it.get("iteration", 0)): len(words(str(it.get("summary", "")))) for it in iterations}
    shown: set[int] = set()
    total = 0  # words of the summaries shown open so far
    for number in order:
        if number in sizes and total + sizes[number] <= OPEN_WORDS:
            shown.add(number)
            total += sizes[number]
    views: list[IterationView] = []
    previous: float | None = None
    for iteration in iterations:
        card = iteration.get("factscore") or {}
        coherence = iteration.get("coherence") or {}
        number = int(iteration.get("iteration", 0))
        key = f"{prefix}{number}"
        rows, texts = _fact_rows(key, card, passages)
        score = card.get("score")
        views.append(
            IterationView(
                iteration=number,
                key=key,
                score=score,
                delta=(score - previous) if score is not None and previous is not None else None,
                best=number == best,
                accepted=bool(iteration.get("accepted", True)),
                note=str(iteration.get("note", "")),
                coverage=card.get("coverage"),
                reliable=card_reliable(card),
                coherence=coherence.get("score"),
                coherence_coverage=coherence.get("coverage"),
                coherence_reliable=bool(coherence.get("reliable", True)),
                counts={k: int(card.get(k) or 0) for k in (*FACT_COUNTS, "decompose_failures")},
                pieces=summary_pieces(str(iteration.get("summary", "")), card),
                facts=rows,
                passages=texts,
                words=sizes[number],
                open_summary=number in shown,
                corrections=int(card.get("corrections") or 0),
                judge_check=card.get("judge_check"),
                annotator_checks=[
                    c["annotator_check"] for c in coherence.get("summaries") or [] if c.get("annotator_check")
                ],
                unreliable_why=reliability_text(card),
                interval=_interval_text(card.get("score_ci95"), card.get("score_ci95_over")),
                corrected=(
                    ""
                    if "score_corrected_note" not in card
                    else "judge-corrected: none"
                    if card.get("score_corrected") is None
                    else f"judge-corrected estimate {card['score_corrected']:.3f} "
                    + _interval_text(card.get("score_corrected_ci95"), card.get("score_corrected_ci95_over"))
                ),
                corrected_note=str(card.get("score_corrected_note") or ""),
                metrics=dict(iteration.get("metrics") or {}),
            )
        )
        previous = score if score is not None else previous
    return views
