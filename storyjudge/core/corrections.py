"""A person's corrections of the judge's verdicts, and the score card recomputed with them.

A corrected verdict keeps the judge's and carries the correction beside it; its reason becomes the fact's
feedback for the refiner, and the card counts its corrections.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any

from storyjudge.core.coverage import DEFAULT_FLOOR
from storyjudge.core.narrativefactscore import score_card
from storyjudge.core.records import ScoreCard

WHO = "a person"
MAX_REASON_CHARS = 2000
"""The longest reason kept: a few paragraphs; the refiner's prompt and every view of the run carry it."""


def _recount(card: Mapping[str, Any], verdicts: list[Any]) -> ScoreCard:
    rows = card.get("per_sentence") or []
    recomputed = score_card(
        int(card.get("iteration", 0)),
        [str(row.get("sentence", "")) for row in rows],
        verdicts,
        int(card.get("decompose_failures", 0)),
        coverage_floor=float(card.get("coverage_floor", DEFAULT_FLOOR)),
        failed_sentences={int(row["index"]) for row in rows if row.get("decomposed") is False},
        unjudged=str(card.get("unjudged_rule", "exclude")),  # the rule the run was scored by
        judge=card.get("judge_check"),  # a person corrects the summary's verdicts, not the planted ones
    )
    if not rows:  # a card without its sentences: keep the judge's coverage, the facts alone cannot give it
        recomputed["coverage"] = card.get("coverage", recomputed["coverage"])
    return recomputed


def correct(
    card: Mapping[str, Any], fact_id: str, verdict: str, reason: str, *, who: str = WHO, when: str = ""
) -> ScoreCard:
    """The card with one fact's verdict set by a person; ValueError (what to do) for a bad request."""
    if verdict not in ("supported", "unsupported"):
        raise ValueError("A corrected verdict is 'supported' or 'unsupported'.")
    reason = reason.strip()
    if not reason:
        raise ValueError("Say why the verdict is wrong: the reason is recorded and the refiner reads it.")
    if len(reason) > MAX_REASON_CHARS:
        raise ValueError(
            f"The reason is {len(reason):,} characters; keep it under {MAX_REASON_CHARS:,} (the refiner reads it)."
        )
    verdicts = copy.deepcopy(list(card.get("verdicts") or []))
    target = next((v for v in verdicts if v["fact"]["id"] == fact_id), None)
    if target is None:
        raise ValueError(f"No fact {fact_id!r} in round {card.get('iteration', 0)}; reload the page.")
    judge = target.get("correction") or {"old": target["status"], "old_feedback": target.get("feedback", "")}
    target["correction"] = {
        "who": who,
        "when": when or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "old": judge["old"],
        "new": verdict,
        "reason": reason,
        "old_feedback": judge["old_feedback"],
    }
    target["status"] = verdict
    target["feedback"] = reason if verdict == "unsupported" else ""
    out = _recount(card, verdicts)
    out["corrections"] = sum(1 for v in out["verdicts"] if v.get("correction"))
    return out


def uncorrected(card: Mapping[str, Any]) -> dict[str, Any]:
    """The judge's own card: every corrected verdict back as the judge gave it (the card itself when none)."""
    if not any(v.get("correction") for v in card.get("verdicts") or []):
        return dict(card)
    verdicts = copy.deepcopy(list(card.get("verdicts") or []))
    for v in verdicts:
        correction = v.pop("correction", None)
        if correction:
            v["status"], v["feedback"] = correction["old"], correction.get("old_feedback", "")
    return dict(_recount(card, verdicts))


def apply_corrections(iterations: list[Any], corrections: list[dict[str, Any]]) -> list[Any]:
    """Rounds with the recorded corrections (``{iteration, fact_id, verdict, reason, who, when}``) applied."""
    out = []
    for it in iterations:
        mine = [c for c in corrections if c.get("iteration") == it["iteration"]]
        card = it["factscore"]
        for c in mine:
            card = correct(
                card, c["fact_id"], c["verdict"], c["reason"], who=c.get("who", WHO), when=c["when"]
            )
        out.append({**it, "factscore": card} if mine else it)
    return out
