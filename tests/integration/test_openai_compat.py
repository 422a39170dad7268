"""Real HTTP through ChatOpenAI to an OpenAI-compatible server on 127.0.0.1 (started by the test)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from prompts import Prompt
from storyjudge.core.context import Context
from storyjudge.core.llm import ask_structured, ask_text
from storyjudge.core.models import chat_model
from storyjudge.core.scripted_server import FaultPlan, OpenAIServer, last_user_text
from storyjudge.core.usage import totals

PROMPT = Prompt(name="compat", version="1", text="Answer briefly.")


class Character(BaseModel):
    """A schema with a nested list, as real ones have."""

    name: str = Field(description="The character's name.")
    titles: list[str] = Field(description="Titles the character holds.")


def echo(body: dict[str, Any]) -> str:
    if body.get("response_format"):
        return '{"name": "Macbeth", "titles": ["Thane of Glamis", "Thane of Cawdor"]}'
    return "You said: " + last_user_text(body)


def test_chat_model_is_chat_openai_pointed_at_the_server(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(echo)
    model = chat_model("openai:scripted", ctx_for(server))
    assert isinstance(model, ChatOpenAI)
    assert model.invoke("ping").text == "You said: ping"
    assert server.completions[0]["model"] == "scripted"


def test_plain_text(scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]) -> None:
    server = scripted_server(echo)
    answer = ask_text(
        ctx_for(server), "summarizer", PROMPT, [("system", "Be brief."), ("user", "Who is king?")]
    )
    assert answer.text == "You said: Who is king?"
    assert answer.finish_reason == "stop"
    body = server.completions[0]
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "response_format" not in body
    assert body["temperature"] == 0.0
    usage = totals(answer.usage)
    # token counts come from the server's usage block
    assert usage["calls"] == 1 and usage["input_tokens"] == len("Be brief.\nWho is king?") // 4


def test_structured_output_sends_the_json_schema(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(echo)
    answer = ask_structured(ctx_for(server), "extractor", PROMPT, [("user", "Describe Macbeth.")], Character)
    assert answer.ok and answer.value == Character(
        name="Macbeth", titles=["Thane of Glamis", "Thane of Cawdor"]
    )
    response_format = server.completions[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Character"
    schema = response_format["json_schema"]["schema"]
    assert schema["properties"]["titles"]["type"] == "array"
    assert set(schema["required"]) == {"name", "titles"}


def test_concurrency_bounds_requests_in_flight(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(echo, latency=0.1)
    ctx = ctx_for(server, concurrency=2)
    with ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(lambda i: ask_text(ctx, "judge", PROMPT, [("user", f"q{i}")]).text, range(8)))
    assert texts == [f"You said: q{i}" for i in range(8)]
    assert server.max_in_flight == 2


def test_transient_faults_are_retried(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    faults = FaultPlan({"rate_limit": 0.4}, seed=7, retry_after=0.01)
    server = scripted_server(echo, faults=faults)
    ctx = ctx_for(server, retry_budget_s=30)
    texts = [ask_text(ctx, "judge", PROMPT, [("user", f"q{i}")]).text for i in range(6)]
    assert texts == [f"You said: q{i}" for i in range(6)]
    assert server.faulted  # the plan did inject faults, and every call still succeeded
