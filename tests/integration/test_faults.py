"""Faulty endpoints: with a fifth of the requests failing, runs finish with the fault-free result.

Each fault kind of ``tests/openai_server`` (429 with Retry-After, 500, a hang past the client timeout,
malformed JSON, a cut-off answer, an empty answer) is injected into 20 % of the requests, one kind at a time
and all kinds mixed, while the ``refine``, ``coherence`` and ``index`` graphs run against the same scripted
answers. Which requests fail is a pure function of the request (see ``FaultPlan``), so a run is reproducible
however threads interleave. A parse failure that outlasts its retries is counted as unjudged, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphs.coherence import build_graph as build_coherence
from graphs.index import build_graph as build_index
from graphs.refine import build_graph as build_refine
from storyjudge.core.context import Context
from storyjudge.core.llm import ask_text
from storyjudge.core.retry import EMPTY_RETRIES
from storyjudge.core.scripted_server import (
    FAULT_KINDS,
    FaultPlan,
    OpenAIServer,
    Responder,
    mixed,
    schema_name,
)
from tests.scripted_story import STORY, StoryResponder

pytestmark = pytest.mark.slow

RATE = 0.2
TIMEOUT = 1.0  # the client's request timeout in these tests
HANG = 2.5  # a hung request answers (too late) after this long
KINDS = [*FAULT_KINDS, "mixed"]


def original_prompt(responder: Responder) -> Responder:
    """Answer a retry as its first attempt: a parse retry appends the failed answer and a reminder."""

    def answer(body: dict[str, Any]) -> Any:
        messages = body.get("messages", [])
        first = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages) - 1)
        return responder({**body, "messages": messages[: first + 1]})

    return answer


def plan(kind: str | None, seed: int = 3) -> FaultPlan | None:
    if kind is None:
        return None
    rates = mixed(RATE) if kind == "mixed" else {kind: RATE}
    return FaultPlan(rates, seed=seed, hang_seconds=HANG, retry_after=0.2)


def context(server: OpenAIServer, root: Path, **fields: Any) -> Context:
    values: dict[str, Any] = {
        "model": "openai:scripted",
        "base_url": server.base_url,
        "run_dir": str(root / "run"),
        "cache_dir": str(root / "cache"),
        "request_timeout": TIMEOUT,
        "retry_budget_s": 60,
        "parse_retries": 4,
        "ckg_samples": 1,
        "concurrency": 4,
    }
    values.update(fields)
    return Context(**values)


# --- what each graph's result is, for comparison ----------------------------------------------------------


def refine_result(out: dict[str, Any]) -> dict[str, Any]:
    rounds = sorted(out["iterations"], key=lambda i: i["iteration"])
    return {
        "summaries": [it["summary"] for it in rounds],
        "scores": [it["factscore"]["score"] for it in rounds],
        "verdicts": [
            [
                (v["fact"]["id"], v["fact"]["text"], v["status"], v["feedback"])
                for v in it["factscore"]["verdicts"]
            ]
            for it in rounds
        ],
        "stop": out["stop_reason"],
        "best": out["best_iteration"],
    }


def coherence_result(out: dict[str, Any]) -> dict[str, Any]:
    annotations = sorted(out["annotations"], key=lambda a: (a["summary_id"], a["index"]))
    return {
        "score": out["coherence"]["system_score"],
        "per_summary": [(s["id"], s["score"], s["unparsed"]) for s in out["coherence"]["summaries"]],
        "annotations": [(a["summary_id"], a["index"], a["confused"], a["types"]) for a in annotations],
    }


def index_result(out: dict[str, Any]) -> dict[str, Any]:
    ckg = out["ckg"]
    return {
        "scenes": [(s["id"], s["text"]) for s in out["scenes"]],
        "nodes": sorted(json.dumps(n, sort_keys=True) for n in ckg["nodes"]),
        "edges": sorted(json.dumps(e, sort_keys=True) for e in ckg.get("edges", ckg.get("links", []))),
        "stats": out["ckg_stats"],
        "passages": out["index"]["passages"],
    }


# --- workloads ----------------------------------------------------------------------------------------------

CHAPTER_NAMES = ("harbour", "ferry", "map", "island", "lighthouse", "storm", "return", "feast")


def long_story() -> str:
    """Eight short chapters, so indexing makes enough calls for faults to land on several of them."""
    return "\n\n".join(
        f"Chapter {n + 1}\n\nAlice and Bob reach the {place}. Bob greets Alice warmly at the {place}. "
        f"Alice tells Bob a story about the {place}, and they stay there until night."
        for n, place in enumerate(CHAPTER_NAMES)
    )


COHERENCE_SUMMARIES = [
    {
        "id": f"s{k}",
        "summary": " ".join(
            f"In part {i + 1} of story {k}, Mara repairs lamp number {i + 1}." for i in range(6)
        ),
    }
    for k in range(4)
]


def coherence_responder(body: dict[str, Any]) -> str:
    """Every third sentence confuses the reader."""
    text = body["messages"][0]["content"]
    number = int(re.findall(r'<sentence number="(\d+)">', text)[-1])
    if number % 3 == 0:
        return f"Questions: Why does Mara repair lamp {number}?\nTypes: causal omission"
    return "Questions: no confusion\nTypes: no confusion"


def run_refine(kind: str | None, root: Path) -> tuple[dict[str, Any], OpenAIServer]:
    with OpenAIServer(original_prompt(StoryResponder()), faults=plan(kind)) as server:
        out = build_refine().invoke({"document": STORY}, context=context(server, root))
    return refine_result(out), server


def run_coherence(kind: str | None, root: Path) -> tuple[dict[str, Any], OpenAIServer]:
    with OpenAIServer(original_prompt(coherence_responder), faults=plan(kind)) as server:
        out = build_coherence().invoke({"summaries": COHERENCE_SUMMARIES}, context=context(server, root))
    return coherence_result(out), server


def run_index(kind: str | None, root: Path) -> tuple[dict[str, Any], OpenAIServer]:
    with OpenAIServer(original_prompt(StoryResponder()), faults=plan(kind)) as server:
        ctx = context(server, root, ckg_samples=2, extraction_temperature=0.7)
        out = build_index().invoke({"document": long_story()}, context=ctx)
    return index_result(out), server


RUNNERS: dict[str, Callable[[str | None, Path], tuple[dict[str, Any], OpenAIServer]]] = {
    "refine": run_refine,
    "coherence": run_coherence,
    "index": run_index,
}


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each graph's result without faults (computed once for the module)."""
    results = {}
    for name, run in RUNNERS.items():
        result, server = run(None, tmp_path_factory.mktemp(f"clean-{name}"))
        assert not server.faulted
        results[name] = result
    return results


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("graph", list(RUNNERS))
def test_faulted_run_gives_the_fault_free_result(
    graph: str, kind: str, fault_free: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    result, server = RUNNERS[graph](kind, tmp_path)
    assert server.faulted, "the plan injected no fault: the test would prove nothing"
    if kind != "mixed":
        assert set(server.faulted) == {kind}
    assert result == fault_free[graph]


def test_retry_after_is_honoured(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    """A 429 with Retry-After 1.5 s: the retry comes no sooner (the client's own back-off starts at 0.5 s)."""
    faults = FaultPlan(script=["rate_limit"], retry_after=1.5)
    server = scripted_server(lambda body: "fine", faults=faults)
    answer = ask_text(ctx_for(server, retry_budget_s=10), "judge", _prompt(), [("user", "hello")])
    assert answer.text == "fine"
    first, second = server.log
    assert first.status == 429 and second.status == 200
    assert second.arrived - first.answered >= 1.5  # type: ignore[operator]


def test_a_hang_times_out_and_is_retried(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    faults = FaultPlan(script=["hang"], hang_seconds=30.0)
    server = scripted_server(lambda body: "fine", faults=faults)
    ctx = ctx_for(server, retry_budget_s=5, request_timeout=0.5)
    answer = ask_text(ctx, "judge", _prompt(), [("user", "hi")])
    assert answer.text == "fine" and len(server.log) == 2
    assert server.log[0].answered is None, "the client gave up on the hung request instead of waiting it out"


def test_transport_retries_are_not_multiplied(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    """Each attempt is one request (the client does not retry inside it), until the retry budget runs out."""
    from storyjudge.core.llm import CallFailed

    server = scripted_server(lambda body: {"status": 500, "error": "down"})
    with pytest.raises(
        CallFailed, match=r"after (\d+) attempt\(s\) in \d+s; retry_budget_s is 1.5"
    ) as raised:
        ask_text(ctx_for(server, retry_budget_s=1.5), "judge", _prompt(), [("user", "hi")])
    attempts = int(re.search(r"after (\d+) attempt", str(raised.value)).group(1))  # type: ignore[union-attr]
    assert attempts >= 2 and len(server.completions) == attempts


def test_judge_answers_that_never_parse_are_unjudged_not_guessed(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    """Every judge answer cut off: the facts are unjudged, the score is n/a, nothing counts as supported."""
    faults = FaultPlan({"truncated": 1.0}, applies=lambda body: schema_name(body) == "Verdict")
    server = scripted_server(original_prompt(StoryResponder()), faults=faults)
    ctx = context(server, tmp_path, parse_retries=1, max_iterations=1)
    out = build_refine().invoke({"document": STORY}, context=ctx)
    card = out["iterations"][0]["factscore"]
    assert card["facts"] == 3 and card["unjudged"] == 3
    assert card["supported"] == card["unsupported"] == 0 and card["score"] is None
    assert all(v["error"] for v in card["verdicts"])
    judge_requests = [entry for entry in server.log if entry.schema == "Verdict"]
    # each fact: the first answer and one parse retry, each cut-off answer asked again EMPTY_RETRIES times (a
    # server's glitch, retried within the budget) before it is taken as the answer
    assert len(judge_requests) == 3 * 2 * (1 + EMPTY_RETRIES)
    assert out["stop_reason"] == "nothing could be judged"


def test_coherence_answers_cut_off_are_unparsed_not_guessed(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    """A cut-off "Questions: no c..." must not read as a confusion with the question "no c"."""
    server = scripted_server(original_prompt(coherence_responder), faults=FaultPlan({"truncated": 1.0}))
    ctx = context(server, tmp_path, parse_retries=1)
    out = build_coherence().invoke({"summary": COHERENCE_SUMMARIES[0]["summary"]}, context=ctx)
    assert all(a["confused"] is None for a in out["annotations"])
    assert out["coherence"]["summaries"][0]["unparsed"] == 6 and out["coherence"]["score"] is None


def _prompt() -> Any:
    from prompts import Prompt

    return Prompt(name="faults", version="1", text="test")


def test_a_call_that_never_returns_is_bounded_by_the_request_timeout(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], monkeypatch: Any
) -> None:
    """The timeout bounds an attempt in all, not per read: a call stuck anywhere is given up and retried."""
    import threading

    from langchain_core.messages import AIMessage

    from storyjudge.core import llm

    release = threading.Event()
    calls: list[int] = []

    class Stuck:
        def invoke(self, messages: Any, **params: Any) -> AIMessage:
            calls.append(1)
            if len(calls) == 1:
                release.wait(120)  # e.g. a server trickling bytes: no read ever times out
            return AIMessage("fine", response_metadata={"finish_reason": "stop"})

    server = scripted_server(lambda body: "unused")
    monkeypatch.setattr(llm, "chat_model", lambda spec, ctx: Stuck())
    try:
        answer = ask_text(
            ctx_for(server, retry_budget_s=5, request_timeout=0.3), "judge", _prompt(), [("user", "hi")]
        )
    finally:
        release.set()
    assert answer.text == "fine" and len(calls) == 2


def test_long_hangs_do_not_stall_a_run(fault_free: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """A fifth of the answers hang for a minute: each attempt gives up after the timeout and retries at once."""
    import time

    faults = FaultPlan({"hang": RATE}, seed=3, hang_seconds=60.0)
    started = time.monotonic()
    with OpenAIServer(original_prompt(coherence_responder), faults=faults) as server:
        out = build_coherence().invoke({"summaries": COHERENCE_SUMMARIES}, context=context(server, tmp_path))
    assert "hang" in server.faulted
    assert coherence_result(out) == fault_free["coherence"]
    assert time.monotonic() - started < 45, "the run waited for a hung answer"  # a stall bound, not a timing
