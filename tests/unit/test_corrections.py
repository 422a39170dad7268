"""A person's corrections of verdicts: the score recomputed and counted, the judge's own card kept within."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from storyjudge.core.corrections import apply_corrections, correct, uncorrected
from storyjudge.core.records import merge_rounds

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_run" / "result.json"


def corrections_of(card: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The corrections a card's verdicts carry, each with its fact."""
    return [{"fact": v["fact"], **v["correction"]} for v in card.get("verdicts") or [] if v.get("correction")]


def _round() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))["iterations"][0]  # 5 supported, 3 not, 1 unjudged


def test_a_correction_recomputes_the_score_and_is_recorded() -> None:
    card = _round()["factscore"]
    wrong = next(v for v in card["verdicts"] if v["status"] == "unsupported")
    fixed = correct(card, wrong["fact"]["id"], "supported", "Scene 2 says so.", when="2026-01-01T00:00:00Z")
    assert fixed["score"] == pytest.approx(6 / 8) and fixed["supported"] == 6 and fixed["corrections"] == 1
    record = corrections_of(fixed)[0]
    assert record["who"] == "a person" and record["old"] == "unsupported" and record["new"] == "supported"
    assert record["reason"] == "Scene 2 says so." and record["fact"]["id"] == wrong["fact"]["id"]
    assert card["score"] == 0.625  # the judge's card is left as it was
    again = correct(fixed, wrong["fact"]["id"], "unsupported", "No, it does not.")
    assert again["corrections"] == 1 and corrections_of(again)[0]["old"] == "unsupported"  # still the judge's
    flagged = next(v for v in again["verdicts"] if v["fact"]["id"] == wrong["fact"]["id"])
    assert flagged["feedback"] == "No, it does not."  # what the refiner reads
    judge = uncorrected(fixed)
    assert judge["score"] == pytest.approx(0.625) and not corrections_of(judge)
    assert (
        next(v for v in judge["verdicts"] if v["fact"]["id"] == wrong["fact"]["id"])["feedback"]
        == wrong["feedback"]
    )


def test_a_correction_needs_a_known_fact_a_verdict_and_a_reason() -> None:
    card = _round()["factscore"]
    fact = card["verdicts"][0]["fact"]["id"]
    with pytest.raises(ValueError, match="Say why"):
        correct(card, fact, "unsupported", "  ")
    with pytest.raises(ValueError, match="'supported' or 'unsupported'"):
        correct(card, fact, "maybe", "because")
    with pytest.raises(ValueError, match="No fact"):
        correct(card, "i9-s9-f9", "supported", "because")


def test_recorded_corrections_apply_to_their_round_only() -> None:
    first = _round()
    second = {**first, "iteration": 1}
    fact = first["factscore"]["verdicts"][0]["fact"]["id"]
    entry = {"iteration": 0, "fact_id": fact, "verdict": "unsupported", "reason": "r", "when": "t"}
    done = apply_corrections([first, second], [entry])
    assert done[0]["factscore"]["corrections"] == 1 and done[1] is second


def test_a_round_written_again_replaces_its_record() -> None:
    a: Any = {"iteration": 0, "note": "a"}
    b: Any = {"iteration": 1, "note": "b"}
    merged = merge_rounds([a, b], [cast(Any, {"iteration": 0, "note": "corrected"})])
    assert [it["note"] for it in merged] == ["corrected", "b"]
    assert merge_rounds(None, [a]) == [a]
