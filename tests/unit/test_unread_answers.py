"""An answer that was not read whole is never a valid answer, for every LLM answer schema, over real HTTP.

Each schema is asked with its real prompt, rendered as its node renders it. A truncated answer (reported as cut
off or not), an answer under the wrong key, and an echo of the prompt are failures that callers count; a valid
answer still passes; an answer cut off at the token limit is a failure even when its text happens to parse.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

import storyjudge.core.llm as llm
from prompts import data_block, load
from prompts.schemas import AtomicFacts, BatchedConfusions, SceneTriples, Verdict
from storyjudge.apps.cli.doctor import DoctorAnswer
from storyjudge.core.context import Context
from storyjudge.core.llm import Message, ask_structured
from storyjudge.core.scripted_server import OpenAIServer, last_user_text
from storyjudge.core.usage import totals

SUMMARY = "Macbeth meets three witches on a heath. Macbeth murders King Duncan. Banquo suspects him."


@dataclass(frozen=True)
class Case:
    """One answer schema with its prompt, a rendered request and answers of each kind."""

    schema: type[BaseModel]
    prompt: str
    render: dict[str, str]
    valid: str
    truncated: str
    wrong_key: str

    @property
    def messages(self) -> list[Message]:
        return [("user", load(self.prompt).render(**self.render))]


CASES = [
    Case(
        SceneTriples,
        "extract_triples",
        {"scene": data_block("scene", "MACBETH: I have done the deed. Duncan is dead.", id="S001")},
        '{"characters": [{"name": "Macbeth", "aliases": []}, {"name": "Duncan", "aliases": []}], '
        '"triples": [{"subject": "Macbeth", "predicate": "murders", "object": "Duncan"}]}',
        '{"characters": [{"name": "Macbeth", "aliases": []}], "triples": [{"subject": "Macbeth", "predic',
        '{"people": [{"name": "Macbeth"}], "relations": []}',
    ),
    Case(
        AtomicFacts,
        "decompose",
        {
            "summary": data_block("summary", SUMMARY),
            "sentence": data_block("sentence", "Macbeth murders King Duncan."),
        },
        '{"facts": ["Macbeth murders King Duncan."]}',
        '{"facts": ["Macbeth murders King Duncan.", "King Duncan d',
        '{"atomic_facts": ["Macbeth murders King Duncan."]}',
    ),
    Case(
        Verdict,
        "judge",
        {
            "scenes": data_block("scene", "MACBETH: I have done the deed.", id="S001"),
            "ckg": data_block("graph", "Macbeth -[murders]-> Duncan"),
            "fact": data_block("fact", "Macbeth murders King Duncan."),
        },
        '{"rationale": "S001 and the graph say Macbeth murders Duncan.", "supported": true}',
        '{"rationale": "S001 and the graph say Macbeth murders Duncan.", "supported": true, "evidence": ["S0',
        '{"reasoning": "S001 says so.", "verdict": true}',
    ),
    Case(
        BatchedConfusions,
        "coherence_batched",
        {
            "summary": data_block("summary", SUMMARY),
            "sentences": data_block("sentences", "1. Macbeth meets three witches on a heath.\n3. Banquo"),
        },
        '{"sentences": [{"index": 3, "questions": ["Who is Banquo?"], "types": ["entity omission"]}]}',
        '{"sentences": [{"index": 3, "questions": ["Who is Banquo?"], "types": ["entity om',
        '{"confusions": [{"index": 3, "questions": ["Who is Banquo?"]}]}',
    ),
    Case(
        DoctorAnswer,
        "doctor",
        {"passage": "Macbeth murders King Duncan in his sleep.", "claim": "Duncan dies."},
        '{"rationale": "Duncan is murdered, so he dies.", "supported": true}',
        '{"rationale": "Duncan is murdered, so he di',
        '{"answer": "yes"}',
    ),
]
IDS = [case.schema.__name__ for case in CASES]


@pytest.fixture(autouse=True)
def _fresh_format_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm, "_methods", {})


def answers(kind: str, case: Case) -> Callable[[dict[str, Any]], str | dict[str, Any]]:
    """A responder giving one kind of answer to every request."""

    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        if kind == "truncated, finish length":
            return {"content": case.truncated, "finish_reason": "length"}
        if kind == "truncated, finish stop":
            return case.truncated
        if kind == "wrong key":
            return case.wrong_key
        if kind == "wrong key in a fence":
            return f"Here it is:\n```json\n{case.wrong_key}\n```"
        if kind == "prompt echoed":
            return last_user_text(body)
        if kind == "prompt echoed, finish length":
            return {"content": last_user_text(body)[:1500], "finish_reason": "length"}
        if kind == "valid but cut off":
            return {"content": case.valid, "finish_reason": "length"}
        if kind == "valid inside a list":
            return f"[{case.valid}]"
        raise AssertionError(kind)

    return respond


UNREAD = [
    "truncated, finish length",
    "truncated, finish stop",
    "wrong key",
    "wrong key in a fence",
    "prompt echoed",
    "prompt echoed, finish length",
    "valid but cut off",
    "valid inside a list",
]


@pytest.mark.parametrize("kind", UNREAD)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_an_answer_not_read_whole_is_a_counted_failure(
    case: Case, kind: str, scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(answers(kind, case))
    ctx = ctx_for(server, parse_retries=1)
    answer = ask_structured(ctx, "judge", load(case.prompt), case.messages, case.schema)
    assert not answer.ok and answer.value is None, answer
    assert answer.error
    if "length" in kind or "cut off" in kind:
        assert answer.finish_reason == "length" and "cut off" in answer.error
    usage = totals(answer.usage)
    assert (usage["calls"], usage["failures"]) == (
        2,
        1,
    )  # retried once with the failed answer shown, then counted
    retry = server.completions[1]["messages"]
    assert retry[-2]["role"] == "assistant" and "could not be used" in retry[-1]["content"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_valid_answer_still_passes_in_every_form(
    case: Case, scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    forms = [
        case.valid,
        f"```json\n{case.valid}\n```",
        f"Here is my answer: {case.valid} I hope it helps.",
        f"<think>Maybe {case.wrong_key}.</think>\n{case.valid}",
    ]
    server: OpenAIServer = scripted_server(lambda body: forms[len(server.completions) - 1])
    ctx = ctx_for(server)
    for number, form in enumerate(forms):
        messages = [*case.messages, ("user", f"Form {number}.")]
        answer = ask_structured(ctx, "judge", load(case.prompt), messages, case.schema)
        assert answer.ok, (form, answer.error)
        assert answer.value == case.schema.model_validate(json.loads(case.valid))
        assert totals(answer.usage)["failures"] == 0


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_content_fields_are_required_in_the_schema_sent(
    case: Case, scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: case.valid)
    ask_structured(ctx_for(server), "judge", load(case.prompt), case.messages, case.schema)
    sent = server.completions[0]["response_format"]["json_schema"]["schema"]
    content = {
        SceneTriples: {"characters", "triples"},
        AtomicFacts: {"facts"},
        Verdict: {"rationale", "supported"},
        BatchedConfusions: {"sentences"},
        DoctorAnswer: {"rationale", "supported"},
    }[case.schema]
    assert content <= set(sent["required"])
    if case.schema is BatchedConfusions:
        assert "index" in sent["$defs"]["SentenceConfusion"]["required"]


def test_a_cut_off_answer_is_not_cached_and_a_whole_one_is(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    case = CASES[1]
    replies: list[str | dict[str, Any]] = [{"content": case.valid, "finish_reason": "length"}, case.valid]
    server: OpenAIServer = scripted_server(lambda body: replies[min(len(server.completions), 2) - 1])
    ctx = ctx_for(server, parse_retries=0)
    first = ask_structured(ctx, "judge", load(case.prompt), case.messages, case.schema)
    assert not first.ok and first.finish_reason == "length"
    second = ask_structured(ctx, "judge", load(case.prompt), case.messages, case.schema)
    assert second.ok and not second.cached  # the cut-off answer was not replayed from the cache
    third = ask_structured(ctx, "judge", load(case.prompt), case.messages, case.schema)
    assert third.ok and third.cached and len(server.completions) == 2


def test_cut_off_text_answers_are_not_cached(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: {"content": "Macbeth murders Dun", "finish_reason": "length"})
    ctx = ctx_for(server)
    for _ in range(2):
        answer = llm.ask_text(ctx, "summarizer", load("decompose"), [("user", "Summarize.")])
        assert answer.finish_reason == "length" and not answer.cached
    assert len(server.completions) == 2


def rejecting(formats: set[str], reply: Callable[[dict[str, Any]], str | dict[str, Any]]) -> Any:
    """A server that answers HTTP 400 to the response_format types in ``formats`` and ``reply`` otherwise."""

    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        kind = (body.get("response_format") or {}).get("type")
        if kind in formats:
            return {"status": 400, "error": f"response_format type '{kind}' is not supported by this server"}
        return reply(body)

    return respond


@pytest.mark.parametrize(
    ("path", "rejected"),
    [("json_mode", {"json_schema"}), ("text", {"json_schema", "json_object"})],
)
@pytest.mark.parametrize("kind", ["valid but cut off", "truncated, finish length", "truncated, finish stop"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_cut_off_is_a_failure_on_the_json_mode_and_text_paths(
    case: Case,
    kind: str,
    path: str,
    rejected: set[str],
    scripted_server: Callable[..., OpenAIServer],
    ctx_for: Callable[..., Context],
) -> None:
    server = scripted_server(rejecting(rejected, answers(kind, case)))
    answer = ask_structured(
        ctx_for(server, parse_retries=1), "judge", load(case.prompt), case.messages, case.schema
    )
    assert not answer.ok and answer.error
    if "length" in kind or "cut off" in kind:
        assert answer.finish_reason == "length" and "cut off" in answer.error
        if path == "text":  # no SDK refusal on this path: the text comes back, and still does not count
            assert answer.text
    assert totals(answer.usage)["failures"] == 1
    answered = [b for b in server.completions if (b.get("response_format") or {}).get("type") not in rejected]
    assert len(answered) == 2


class _CutOffLocalModel:
    """Stands in for the embedded model: a whole-looking answer that llama.cpp reports as cut off."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    def invoke(self, messages: Any, **params: Any) -> Any:
        from langchain_core.messages import AIMessage

        self.calls += 1
        return AIMessage(self.text, response_metadata={"finish_reason": "length"})


def test_the_embedded_model_reports_its_finish_reason_on_the_message() -> None:
    from storyjudge.core.models import _local_chat_class

    model = _local_chat_class().model_construct()
    result = model._create_chat_result(  # type: ignore[attr-defined]
        {
            "choices": [
                {"message": {"role": "assistant", "content": '{"facts": []'}, "finish_reason": "length"}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    )
    assert result.generations[0].message.response_metadata["finish_reason"] == "length"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_cut_off_embedded_model_answer_is_a_failure(
    case: Case, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    fake = _CutOffLocalModel(case.valid)
    monkeypatch.setattr(llm, "chat_model", lambda spec, ctx: fake)
    ctx = Context(model="local:smollm2", cache_dir=str(tmp_path / "cache"), parse_retries=1)
    answer = ask_structured(ctx, "judge", load(case.prompt), case.messages, case.schema)
    assert not answer.ok and answer.finish_reason == "length" and "cut off" in (answer.error or "")
    assert fake.calls == 2 and totals(answer.usage)["failures"] == 1
    again = ask_structured(ctx, "judge", load(case.prompt), case.messages, case.schema)
    # the embedded model answers a request the same way every time: its cut-off answer is replayed from the
    # cache, still a failure, and a rerun spends no time asking it again
    assert fake.calls == 2 and again.cached and not again.ok and "cut off" in (again.error or "")
    assert totals(again.usage)["failures"] == 1 and totals(again.usage)["calls"] == 0


def test_a_server_models_cut_off_answer_is_asked_again_on_a_rerun(
    scripted_server: Any, tmp_path: Any
) -> None:
    """A served model's cut-off answer may be a glitch: never cached, asked again (the embedded model's is)."""
    case = CASES[0]
    asked: list[int] = []

    def cut(body: dict[str, Any]) -> dict[str, Any]:
        asked.append(1)
        return {"content": case.truncated, "finish_reason": "length"}

    server = scripted_server(cut)
    ctx = Context(
        model="openai:scripted", base_url=server.base_url, cache_dir=str(tmp_path), parse_retries=0,
        retry_budget_s=0,
    )  # fmt: skip
    first = ask_structured(ctx, "judge", load(case.prompt), case.messages, case.schema)
    again = ask_structured(ctx, "judge", load(case.prompt), case.messages, case.schema)
    assert not first.ok and not again.ok and not again.cached and len(asked) == 2


@pytest.mark.parametrize(
    "bad",
    [
        '{"atomic_facts": ["Bob steals the map from Alice."]}',  # wrong key
        '{"facts": ["Bob steals the map from Alice.", "Bob st',  # cut off, not said so
        {"content": '{"facts": []}', "finish_reason": "length"},  # parses, but cut off
    ],
    ids=["wrong-key", "truncated", "parses-but-length"],
)
def test_an_unread_decomposition_is_a_decompose_failure_not_a_sentence_without_facts(
    bad: str | dict[str, Any],
    scripted_server: Callable[..., OpenAIServer],
    ctx_for: Callable[..., Context],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from graphs.factscore import build_graph
    from storyjudge.core import embeddings
    from tests.scripted_story import FIRST_SUMMARY, STORY, WRONG, StoryResponder
    from tests.unit.test_index_graph import BagOfWords

    monkeypatch.setitem(embeddings._embedders, "test-bow", BagOfWords())
    story = StoryResponder()

    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        if (body.get("response_format") or {}).get("json_schema", {}).get("name") == "AtomicFacts":
            if WRONG in last_user_text(body).split("<sentence")[-1]:
                return bad
        return story(body)

    server = scripted_server(respond)
    ctx = ctx_for(server, embedder="test-bow", parse_retries=0)
    out = build_graph().invoke({"summary": FIRST_SUMMARY, "document": STORY}, context=ctx)
    card = out["factscore"]
    assert card["decompose_failures"] == 1
    assert not any("steals" in v["fact"]["text"] for v in card["verdicts"])
    assert card["facts"] == 2 and card["score"] == 1.0
