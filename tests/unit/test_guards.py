"""Refinement guards: a refined summary that deletes supported facts, shrinks, grows or copies is not accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langgraph.runtime import Runtime

import prompts
from nodes.assess import assess
from nodes.guards import (
    allowed_loss,
    guard_round,
    measure_round,
    narrative_text,
    revised_iteration,
    word_budget,
)
from nodes.refiner import earlier_attempts, refine, refine_base, render_outline
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.scripted_server import OpenAIServer
from storyjudge.core.tokens import count_tokens

NARRATIVE = (
    "The old lighthouse keeper climbed the stairs every night to light the lamp above the bay. "
    "One winter a storm broke the great lens and the ships lost their way in the dark."
)


def text(n: int, stem: str = "w") -> str:
    """A summary of ``n`` distinct words that never occur in the narrative."""
    return " ".join(f"{stem}{i}" for i in range(n)) + "."


def card(supported: int, unsupported: int = 1, iteration: int = 0) -> Any:
    return {
        "iteration": iteration,
        "score": supported / (supported + unsupported) if supported + unsupported else None,
        "supported": supported,
        "unsupported": unsupported,
        "unjudged": 0,
        "facts": supported + unsupported,
        "per_sentence": [],
        "verdicts": [],
        "decompose_failures": 0,
    }


def it(
    n: int, summary: str, c: Any, *, accepted: bool = True, note: str = "", revises: int | None = None
) -> Any:
    record: dict[str, Any] = {
        "iteration": n,
        "summary": summary,
        "factscore": c,
        "accepted": accepted,
        "note": note,
    }
    if revises is not None:
        record["guard"] = {"revises": revises}
    return record


BASE = it(0, text(100), card(10, 2))


def check(summary: str, c: Any, ctx: Context | None = None) -> tuple[Any, str]:
    return guard_round(summary, c, NARRATIVE, revised=BASE, ctx=ctx or Context())


def test_losing_supported_facts_beyond_the_tolerance_is_rejected() -> None:
    record, note = check(text(100), card(8, 0))
    assert note.startswith("refinement guard: dropped supported facts (10 -> 8; at most 1 may be lost")
    assert record["supported_before"] == 10 and record["supported_after"] == 8
    assert record["supported_loss_allowed"] == 1


def test_losing_supported_facts_within_the_tolerance_is_accepted() -> None:
    record, note = check(text(100), card(9, 0))
    assert note == "" and record["reasons"] == []
    assert check(text(100), card(12, 0))[1] == ""  # a gain is always fine
    assert allowed_loss(9, 0.1) == 0 and allowed_loss(10, 0.1) == 1 and allowed_loss(60, 0.1) == 6


def test_too_short_is_rejected_even_with_every_fact_kept() -> None:
    record, note = check(text(79), card(10, 0))
    assert "too short (79 words, 79% of the revised summary's 100; at least 80" in note
    assert record["length_ratio"] == 0.79 and record["min_words"] == 80
    assert check(text(80), card(10, 0))[1] == ""


def test_too_long_is_rejected() -> None:
    assert word_budget(100, 1.1) == 120
    record, note = check(text(121), card(10, 0))
    assert "too long (121 words; the refiner was asked for at most 120)" in note
    assert record["max_words"] == 120
    assert check(text(120), card(10, 0))[1] == ""


def test_a_jump_in_copied_trigrams_is_rejected() -> None:
    copied = text(60) + " " + NARRATIVE  # 60 own words, then the narrative word for word
    record, note = check(copied, card(12, 0))
    assert record["copy_rate_before"] == 0.0 and record["copy_rate"] is not None and record["copy_rate"] > 0.3
    assert "copies the narrative" in note and "max_copy_increase" in note
    # the same text is fine when the threshold allows it
    assert check(copied, card(12, 0), Context(max_copy_increase=0.5))[1] == ""


def test_a_very_short_refinement_is_judged_by_length_not_copying() -> None:
    short = "The old lighthouse keeper climbed the stairs."  # 7 words, all the narrative's
    record, note = check(short, card(10, 0))
    assert record["copy_rate"] == 1.0 and record["copy_increase"] == 1.0
    assert "too short" in note and "copies" not in note


def test_every_broken_limit_is_named_and_the_switch_turns_rejection_off() -> None:
    _, note = check(NARRATIVE, card(3, 0))
    assert "dropped supported facts" in note and "too short" in note and "copies the narrative" in note
    record, note = check(NARRATIVE, card(3, 0), Context(refine_guard=False))
    assert note == "" and record["supported_before"] == 10  # still measured and recorded


def test_round_zero_records_its_length_and_copy_rate_only() -> None:
    record = measure_round(NARRATIVE, card(3), NARRATIVE, ctx=Context())
    assert record["copy_rate"] == 1.0 and record["words"] == len(NARRATIVE.split())
    assert record["revises"] is None and record["supported_before"] is None and record["reasons"] == []


def test_settings_are_validated() -> None:
    bad_settings: list[dict[str, Any]] = [
        {"max_supported_loss": 1.5},
        {"min_length_ratio": -0.1},
        {"max_length_ratio": 0.9},
    ]
    for bad in bad_settings:
        with pytest.raises(ConfigError, match=next(iter(bad))):
            Context(**bad)


def test_env_sets_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORYJUDGE_MIN_LENGTH_RATIO", "0.5")
    monkeypatch.setenv("STORYJUDGE_REFINE_GUARD", "false")
    ctx = Context()
    assert ctx.min_length_ratio == 0.5 and ctx.refine_guard is False


def test_the_revised_round_is_the_one_the_refiner_named() -> None:
    rounds = [it(0, "a", card(2)), it(1, "b", card(2), accepted=False), it(2, "c", card(2))]
    assert revised_iteration(rounds, 0)["iteration"] == 0  # type: ignore[index]
    assert revised_iteration(rounds, None)["iteration"] == 2  # type: ignore[index]
    assert revised_iteration([], None) is None
    assert narrative_text({"document": "", "scenes": [{"text": "x"}, {"text": "y"}]}).split() == ["x", "y"]


# --- in the loop --------------------------------------------------------------------------------------------


def test_assess_rejects_a_deleting_round_and_keeps_the_best() -> None:
    state: Any = {
        "document": NARRATIVE,
        "iteration": 1,
        "summary": text(30),
        "factscore": card(4, 1, iteration=1),
        "refined_from": 0,
        "iterations": [BASE],
    }
    out = assess(state, Runtime(context=Context(max_iterations=3, patience=2)))
    [record] = out["iterations"]
    assert record["accepted"] is False and record["note"].startswith("refinement guard: dropped supported")
    assert record["guard"]["revises"] == 0 and record["guard"]["supported_before"] == 10
    assert out["best_iteration"] == 0
    assert out["stop_reason"] == ""  # the existing rules decide: patience 2 allows another round


def test_assess_accepts_a_fix_and_records_round_zero() -> None:
    state: Any = {"document": NARRATIVE, "iteration": 0, "summary": text(100), "factscore": card(10, 2)}
    [first] = assess(state, Runtime(context=Context()))["iterations"]
    assert first["accepted"] and first["guard"]["copy_rate"] == 0.0 and first["guard"]["revises"] is None
    fixed: Any = {
        **state,
        "iteration": 1,
        "factscore": card(12, 0, 1),
        "refined_from": 0,
        "iterations": [BASE],
    }
    out = assess(fixed, Runtime(context=Context()))
    assert out["iterations"][0]["accepted"] and out["best_iteration"] == 1


def test_after_a_rejected_round_the_refiner_revises_the_best_again() -> None:
    rejected = it(1, text(10), card(1, 0, 1), accepted=False, note="refinement guard: too short", revises=0)
    state: Any = {"summary": rejected["summary"], "factscore": rejected["factscore"], "iteration": 1}
    state["iterations"] = [BASE, rejected]
    summary, base_card, base = refine_base(state)
    assert (summary, base) == (BASE["summary"], 0) and base_card is BASE["factscore"]
    assert earlier_attempts(state["iterations"], 0) == [rejected]


def test_refiner_prompt_names_the_rejection_and_stays_within_the_window(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: BASE["summary"])
    verdict = {
        "fact": {"id": "f", "iteration": 0, "sentence_index": 0, "text": "w1 is w2"},
        "status": "unsupported",
        "rationale": "",
        "feedback": "wrong",
        "evidence": {
            "query": "",
            "scenes": [
                {"id": f"S{n:03d}", "title": "", "text": "long " * 900, "score": 1.0 / n, "excerpt": False}
                for n in range(1, 30)
            ],
            "ckg_lines": ["a -> b"],
        },
        "raw": "",
    }
    base = it(0, text(100), {**card(10, 1), "verdicts": [verdict]})
    rejected = it(1, text(10), card(1, 0, 1), accepted=False, note="refinement guard: too short", revises=0)
    scenes = [
        {
            "id": f"S{n:03d}",
            "index": n,
            "title": f"Chapter {n}",
            "text": f"Chapter {n}\n\nIt rained on day {n}. More.",
            "start": 0,
            "end": 0,
        }
        for n in range(1, 400)
    ]
    state: Any = {
        "summary": rejected["summary"],
        "factscore": rejected["factscore"],
        "iteration": 1,
        "iterations": [base, rejected],
        "scenes": scenes,
    }
    ctx = ctx_for(server, context_window=8192)
    out = refine(state, Runtime(context=ctx))
    assert out["refined_from"] == 0 and out["iteration"] == 2
    [request] = server.completions
    prompt, max_tokens = request["messages"][0]["content"], request["max_completion_tokens"]
    assert count_tokens(prompt) + max_tokens <= ctx.context_window
    assert "refinement guard: too short" in prompt and "between 80 and 120 words" in prompt
    # a new sample (seed) per earlier rejected attempt, so neither cache nor server repeats the rejected answer
    assert (
        "<outline " in prompt
        and "S001 [Chapter 1]" in prompt
        and request["seed"] == ctx.seed + ctx.parse_retries + 1
    )
    assert BASE["summary"] in prompt and rejected["summary"] not in prompt


def test_outline_fits_its_budget() -> None:
    scenes: Any = [
        {
            "id": f"S{n:03d}",
            "title": f"Scene {n}",
            "text": f"The hero walks to town number {n}. Then more.",
            "index": n,
            "start": 0,
            "end": 0,
        }
        for n in range(1, 200)
    ]
    full = render_outline(scenes, 100_000)
    assert "S001 [Scene 1] The hero walks to town number 1." in full
    for budget in (1500, 600, 200, 40):
        block = render_outline(scenes, budget)
        assert count_tokens(block) <= budget and prompts.unwrap_data(block) != ""
    assert 'shown="' in render_outline(scenes, 200)
    assert render_outline(scenes, 0) == "" and render_outline([], 500) == ""


def test_a_refinement_may_grow_to_the_summary_budget_never_past_it() -> None:
    from nodes.guards import budget_words

    assert word_budget(100, 1.1, most_words=105) == 105  # a tenth more would pass the budget
    assert word_budget(100, 1.1, most_words=500) == 120  # far below the budget: a tenth more
    assert word_budget(300, 1.1, most_words=200) == 300  # already past it: no longer than it is
    summary = text(100)
    assert budget_words(summary, 10_000) > 1000 and budget_words(summary, 20) < 100
    record, note = check(text(110), card(10, 0), Context(max_summary_tokens=20))  # BASE is over its budget
    assert record["max_words"] == 100 and "too long" in note
