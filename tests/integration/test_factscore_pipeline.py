"""The factscore graph judges a sentence's facts without waiting for the other sentences' decompositions.

Ordering only, read from the scripted server's request log: no assertion depends on how long anything took.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from graphs.factscore import build_graph
from prompts import Prompt
from storyjudge.core import llm
from storyjudge.core.context import Context
from storyjudge.core.scripted_server import OpenAIServer, last_user_text
from tests.scripted_story import FIRST_SUMMARY, STORY, StoryResponder, schema_name

GATE_SECONDS = 30.0  # a deadlock guard only: with the pipeline the gate opens as soon as a verdict is asked


def sentence_of(body: dict[str, Any]) -> str:
    """The sentence a decomposition request asks about (the prompt shows the whole summary before it)."""
    return last_user_text(body).split("<sentence>")[-1].split("</sentence>")[0]


class SlowSentence(StoryResponder):
    """Holds the decomposition of one sentence until some judge request has arrived (or the guard expires)."""

    def __init__(self, slow: str) -> None:
        super().__init__()
        self.slow = slow
        self.judge_asked = threading.Event()
        self.opened_by_judge: bool | None = None

    def __call__(self, body: dict[str, Any]) -> str:
        name = schema_name(body)
        if name == "Verdict":
            self.judge_asked.set()
        elif name == "AtomicFacts" and self.slow in sentence_of(body):
            self.opened_by_judge = self.judge_asked.wait(GATE_SECONDS)
        return super().__call__(body)


def test_facts_are_judged_while_another_sentence_is_still_being_decomposed(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    responder = SlowSentence(slow="Alice finds the treasure")
    server = scripted_server(responder)
    out = build_graph().invoke(
        {"summary": FIRST_SUMMARY, "document": STORY, "title": "t"},
        context=ctx_for(server, ckg_samples=1, concurrency=4),
    )
    assert responder.opened_by_judge is True, "a verdict was asked before the slow decomposition answered"
    log = [(body, entry) for body, entry in zip(server.requests, server.log, strict=True)]
    slow = next(
        entry
        for body, entry in log
        if entry.schema == "AtomicFacts" and "Alice finds the treasure" in sentence_of(body)
    )
    first_verdict = next(entry for _, entry in log if entry.schema == "Verdict")
    assert slow.answered is not None and first_verdict.arrived < slow.answered
    card = out["factscore"]
    assert card["score"] == pytest.approx(2 / 3)
    assert (card["facts"], card["judged"], card["unjudged"], card["sentences"]) == (3, 3, 0, 3)
    assert [row["facts"] for row in card["per_sentence"]] == [1, 1, 1]
    assert all(v["evidence"]["scenes"] for v in card["verdicts"]), "each verdict keeps its evidence"


_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "Easter", "Midsummer"]


@pytest.mark.parametrize("slots", [1, 3])
def test_in_a_refinement_round_the_sentence_the_refiner_wrote_is_decomposed_before_unchanged_ones(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], slots: int
) -> None:
    """Its facts are the new ones, whose verdicts are calls: decomposed last, they would be judged a wave late.

    Ten sentences, the rewritten one last. With one slot, the first branch to ask takes it and the rewritten
    sentence goes first of those that wait (by arrival alone, it would be among the first two in one run of
    five); with three, the free slots go to the branches sent first, and it is sent first.
    """
    server = scripted_server(StoryResponder(), latency=0.2)  # the other branches queue for the slots
    kept = [f"Alice meets Bob at the harbour of Port Wren on {day}." for day in _DAYS]
    rewritten = "Alice finds the treasure on Gull Island."
    previous = " ".join([*kept, "Alice looks for the treasure on Gull Island."])
    out = build_graph().invoke(
        {
            "summary": " ".join([*kept, rewritten]),
            "previous_summary": previous,
            "document": STORY,
            "title": "t",
            "iteration": 1,
        },
        context=ctx_for(server, ckg_samples=1, concurrency=slots),
    )
    decomposed = [
        sentence_of(body).strip() for body in server.completions if schema_name(body) == "AtomicFacts"
    ]
    assert len(decomposed) == 10
    assert rewritten in decomposed[: 2 if slots == 1 else slots], decomposed
    assert out["factscore"]["judged"] == 10
    assert [row["sentence"] for row in out["factscore"]["per_sentence"]][-1] == rewritten  # in summary order


def test_a_fact_two_sentences_state_counts_once_and_is_judged_once(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    responder = StoryResponder()
    server = scripted_server(responder)
    repeated = "Alice meets Bob at the harbour of Port Wren."
    summary = f"{repeated} Bob steals the map from Alice. {repeated}"
    out = build_graph().invoke(
        {"summary": summary, "document": STORY, "title": "t"}, context=ctx_for(server, ckg_samples=1)
    )
    card = out["factscore"]
    assert (card["facts"], card["supported"], card["unsupported"], card["sentences"]) == (2, 1, 1, 3)
    assert [row["facts"] for row in card["per_sentence"]] == [
        1,
        1,
        0,
    ]  # as when duplicates were dropped early
    assert [v["fact"]["sentence_index"] for v in card["verdicts"]] == [0, 1]
    verdict_requests = [b for b in server.completions if schema_name(b) == "Verdict"]
    asked = [last_user_text(b).split("<fact>")[-1] for b in verdict_requests]
    assert sum(repeated in fact for fact in asked) == 1, "one HTTP call for the fact both sentences state"


def test_identical_concurrent_requests_make_one_call(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], monkeypatch: Any
) -> None:
    arrived, release = threading.Event(), threading.Event()

    def responder(body: dict[str, Any]) -> str:
        arrived.set()
        release.wait(GATE_SECONDS)
        return "The answer."

    server = scripted_server(responder)
    ctx = ctx_for(server)
    waiting = threading.Event()
    board = llm._board

    def spy(cache_dir: Any, key: str) -> tuple[Any, bool]:
        flight, leader = board(cache_dir, key)
        if not leader:
            waiting.set()
        return flight, leader

    monkeypatch.setattr(llm, "_board", spy)
    prompt = Prompt(name="same", version="1", text="")
    answers: list[llm.TextAnswer] = []

    def ask() -> None:
        answers.append(llm.ask_text(ctx, "judge", prompt, [("user", "Say it.")]))

    first = threading.Thread(target=ask)
    first.start()
    assert arrived.wait(GATE_SECONDS)
    second = threading.Thread(target=ask)
    second.start()
    assert waiting.wait(GATE_SECONDS), "the second caller waits for the first one's call"
    release.set()
    first.join(GATE_SECONDS)
    second.join(GATE_SECONDS)
    assert [a.text for a in answers] == ["The answer.", "The answer."]
    assert sorted(a.cached for a in answers) == [False, True]
    assert len(server.completions) == 1
