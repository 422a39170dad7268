"""Structured output never fails silently: tolerant parsing, bounded retries, counted failures, fallbacks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

import storyjudge.core.llm as llm
from prompts import Prompt
from storyjudge.core.context import Context
from storyjudge.core.jsonparse import ParseFailure, parse_json_as, strip_thinking
from storyjudge.core.llm import Message, ModelError, ask_structured
from storyjudge.core.scripted_server import OpenAIServer
from storyjudge.core.usage import totals

PROMPT = Prompt(name="check", version="1", text="Decide whether the claim holds.")
MESSAGES: list[Message] = [("system", "You check claims."), ("user", "Claim: Duncan dies.")]
VALID = '{"rationale": "The passage says Macbeth kills him.", "supported": true}'


class Verdict(BaseModel):
    rationale: str
    supported: bool


class Facts(BaseModel):
    facts: list[str]


@pytest.fixture(autouse=True)
def _fresh_format_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no remembered response-format fallback."""
    monkeypatch.setattr(llm, "_methods", {})


# --- tolerant parsing --------------------------------------------------------------------------------------


def test_plain_json() -> None:
    verdict = parse_json_as(VALID, Verdict)
    assert verdict == Verdict(rationale="The passage says Macbeth kills him.", supported=True)


@pytest.mark.parametrize("fence", ["```json\n{}\n```", "```\n{}\n```", "```JSON {} ```"])
def test_fenced_json(fence: str) -> None:
    text = "Here you go:\n" + fence.replace("{}", VALID) + "\nHope that helps."
    assert parse_json_as(text, Verdict).supported is True


def test_prose_around_json() -> None:
    text = f"Let me look. The answer is {VALID} -- that is all {{not json}}."
    assert parse_json_as(text, Verdict).rationale.startswith("The passage")


def test_first_schema_valid_object_wins_over_invalid_ones() -> None:
    text = '{"verdict": "yes"} and then ' + VALID
    assert parse_json_as(text, Verdict).supported is True


def test_thinking_is_ignored() -> None:
    draft = '{"rationale": "draft", "supported": false}'
    assert parse_json_as(f"<think>Maybe {draft}</think>\n{VALID}", Verdict).supported is True
    assert parse_json_as(f"<thinking>\n{draft}\n</thinking>{VALID}", Verdict).supported is True
    # chat templates that open the thinking block in the prompt: the answer holds only the closing tag
    assert parse_json_as(f"Hmm, {draft} perhaps.</think>\n\n{VALID}", Verdict).supported is True
    # an unclosed block (cut off while thinking) leaves nothing usable but never a made-up value
    with pytest.raises(ParseFailure):
        parse_json_as("<think>The claim seems", Verdict)


def test_strip_thinking() -> None:
    assert strip_thinking("<think>a</think>b") == "b"
    assert strip_thinking("a</think> b") == "b"
    assert strip_thinking("  <THINK>x</THINK>  y ") == "y"
    assert strip_thinking("no thoughts") == "no thoughts"


def test_bare_list_for_a_schema_with_one_list_field() -> None:
    assert parse_json_as('["Macbeth kills Duncan.", "Banquo dies."]', Facts).facts == [
        "Macbeth kills Duncan.",
        "Banquo dies.",
    ]
    with pytest.raises(ParseFailure):
        parse_json_as('["a", "b"]', Verdict)
    # only as the whole or outermost value, never a list nested inside another one
    assert parse_json_as('The facts: ["Banquo dies."] That is all.', Facts).facts == ["Banquo dies."]
    with pytest.raises(ParseFailure):
        parse_json_as('{"atomic_facts": ["Banquo dies."]}', Facts)
    with pytest.raises(ParseFailure):
        parse_json_as('{"facts": ["Banquo dies.", "Macbeth', Facts)


def test_the_same_answer_twice_is_one_answer_and_prose_brackets_are_skipped_whole() -> None:
    assert parse_json_as(f"{VALID}\n\nAgain: {VALID}", Verdict).supported is True
    assert parse_json_as(f"See [1] and {{this}}: {VALID}", Verdict).supported is True
    # exactly one fenced block wins over an object quoted in the prose around it
    fenced = '{"rationale": "quoted", "supported": false} is wrong; here:\n```json\n' + VALID + "\n```"
    assert parse_json_as(fenced, Verdict).supported is True


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("The claim is supported.", "no JSON"),
        ('{"rationale": "r", "supported": tru', "no JSON"),
        ('{"rationale": "r"}', "invalid for Verdict"),
        ('{"rationale": "r", "supported": "perhaps"}', "invalid for Verdict"),
        ("[1, 2, 3]", "no JSON"),
        # a cut-off answer: the complete object nested inside it is never taken for the answer
        (
            '{"rationale": "r", "supported": true, "evidence": ["S1", {"rationale": "x", "supported": false}, "S',
            "no JSON",
        ),
        ('The verdict: {"rationale": "r", "supported": tr', "never ends"),
        # a valid object nested in another value is a fragment, not the answer
        ('[{"rationale": "r", "supported": true}]', "no JSON"),
        ('{"verdicts": [{"rationale": "r", "supported": true}]}', "invalid for Verdict"),
        # two different answers in one reply: neither is the answer
        ('{"rationale": "a", "supported": true} or {"rationale": "b", "supported": false}', "2 different"),
    ],
)
def test_unusable_answers_raise_parse_failure_never_a_default(text: str, reason: str) -> None:
    with pytest.raises(ParseFailure, match=reason):
        parse_json_as(text, Verdict)


# --- ask_structured against the scripted server ------------------------------------------------------------


def scripted(*answers: str | dict[str, Any]) -> Callable[[dict[str, Any]], str | dict[str, Any]]:
    """A responder that plays answers in order and repeats the last one."""
    queue = list(answers)

    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return respond


def test_valid_first_answer(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted(VALID))
    answer = ask_structured(ctx_for(server), "judge", PROMPT, MESSAGES, Verdict)
    assert answer.ok and answer.value is not None and answer.value.supported is True
    assert (answer.attempts, answer.error, answer.cached) == (1, None, False)
    assert totals(answer.usage)["calls"] == 1
    assert totals(answer.usage)["failures"] == 0
    # the schema instruction goes after the data, in the last user message
    last = server.completions[0]["messages"][-1]
    assert last["role"] == "user" and last["content"].startswith("Claim: Duncan dies.")
    assert '"supported"' in last["content"]


def test_garbage_then_valid_is_ok_on_the_second_attempt(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted("I think it is supported.", VALID))
    answer = ask_structured(ctx_for(server), "judge", PROMPT, MESSAGES, Verdict)
    assert answer.ok and answer.value is not None and answer.value.supported is True
    assert answer.attempts == 2
    usage = totals(answer.usage)
    assert (usage["calls"], usage["failures"]) == (2, 0)
    retry = server.completions[1]["messages"]
    # the retry shows the model its unusable answer and why
    assert retry[-2] == {"role": "assistant", "content": "I think it is supported."}
    assert "could not be used" in retry[-1]["content"]


def test_always_garbage_is_a_counted_failure_without_a_value(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted("Yes."))
    answer = ask_structured(ctx_for(server, parse_retries=2), "judge", PROMPT, MESSAGES, Verdict)
    assert not answer.ok
    assert answer.value is None
    assert answer.error and "no JSON" in answer.error
    assert answer.text == "Yes."
    assert answer.attempts == 3
    assert len(server.completions) == 3
    usage = totals(answer.usage)
    assert (usage["calls"], usage["failures"]) == (3, 1)


def test_schema_invalid_answer_is_not_defaulted(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted('{"rationale": "unsure"}'))
    answer = ask_structured(ctx_for(server, parse_retries=0), "judge", PROMPT, MESSAGES, Verdict)
    assert answer.value is None and not answer.ok
    assert answer.error and "supported" in answer.error


def test_answer_cut_off_at_max_tokens_says_so(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted({"content": VALID[:20], "finish_reason": "length"}))
    answer = ask_structured(ctx_for(server, parse_retries=0), "judge", PROMPT, MESSAGES, Verdict)
    assert not answer.ok
    assert answer.finish_reason == "length"
    assert answer.error and "cut off" in answer.error


def test_json_schema_response_format_is_sent(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted(VALID))
    ask_structured(ctx_for(server), "judge", PROMPT, MESSAGES, Verdict)
    response_format = server.completions[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"]["required"] == ["rationale", "supported"]


def rejects(kinds: set[str]) -> Callable[[dict[str, Any]], str | dict[str, Any]]:
    """A server that answers HTTP 400 to the response_format types in ``kinds``."""

    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        kind = (body.get("response_format") or {}).get("type")
        if kind in kinds:
            return {"status": 400, "error": f"response_format type '{kind}' is not supported by this server"}
        return "```json\n" + VALID + "\n```"

    return respond


def test_server_rejecting_json_schema_falls_back_to_json_mode(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(rejects({"json_schema"}))
    ctx = ctx_for(server)
    answer = ask_structured(ctx, "judge", PROMPT, MESSAGES, Verdict)
    assert answer.ok and answer.attempts == 1
    sent = [(body.get("response_format") or {}).get("type") for body in server.completions]
    assert sent == ["json_schema", "json_object"]
    # the fallback is remembered: the next call goes straight to JSON mode
    ask_structured(ctx, "judge", PROMPT, [("user", "Claim: Banquo dies.")], Verdict)
    assert server.completions[-1]["response_format"] == {"type": "json_object"}


def test_server_rejecting_every_format_falls_back_to_plain_text(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(rejects({"json_schema", "json_object"}))
    answer = ask_structured(ctx_for(server), "judge", PROMPT, MESSAGES, Verdict)
    assert answer.ok
    assert [body.get("response_format", {}).get("type") for body in server.completions] == [
        "json_schema",
        "json_object",
        None,
    ]


def test_other_bad_requests_are_errors_not_fallbacks_nor_retried(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted({"status": 400, "error": "messages: too many"}))
    with pytest.raises(ModelError, match="too many"):
        ask_structured(ctx_for(server, retry_budget_s=5), "judge", PROMPT, MESSAGES, Verdict)
    assert len(server.completions) == 1


def test_a_refused_key_fails_at_once_with_advice(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted({"status": 401, "error": "invalid api key"}))
    with pytest.raises(ModelError, match="refused the request.*key"):
        ask_structured(ctx_for(server, retry_budget_s=5), "judge", PROMPT, MESSAGES, Verdict)
    assert len(server.completions) == 1


def test_server_errors_are_retried(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted({"status": 500, "error": "overloaded"}, VALID))
    answer = ask_structured(ctx_for(server, retry_budget_s=5), "judge", PROMPT, MESSAGES, Verdict)
    assert answer.ok
    assert len(server.completions) == 2


def test_unreachable_server_says_what_to_check(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted(VALID))
    ctx = ctx_for(server)
    server.stop()
    with pytest.raises(ModelError, match="Cannot reach the model server.*--base-url"):
        ask_structured(ctx, "judge", PROMPT, MESSAGES, Verdict)


def test_structured_answers_come_back_as_json_text(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(scripted(VALID))
    answer = ask_structured(ctx_for(server), "judge", PROMPT, MESSAGES, Verdict)
    assert json.loads(answer.text) == json.loads(VALID)
