"""The embedded default model (SmolLM2-135M via llama.cpp) runs offline and answers schema-valid JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from prompts import Prompt
from storyjudge.core.context import Context
from storyjudge.core.llm import Message, ask_structured, ask_text, schema_instruction
from storyjudge.core.models import chat_model, local_threads
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import totals

pytestmark = pytest.mark.slow

PROMPT = Prompt(name="embedded", version="1", text="Read the sentence and answer.")
MESSAGES: list[Message] = [
    ("user", "Sentence: Macbeth, a Scottish general, kills King Duncan.\nWho kills the king?")
]


class Killer(BaseModel):
    rationale: str = Field(max_length=120, description="A short reason.")
    name: str = Field(max_length=40, description="Who kills the king.")
    is_general: bool = Field(description="Whether the killer is a general.")


def local_context(tmp_path: Path, **fields: object) -> Context:
    return Context(model="local:smollm2", cache_dir=str(tmp_path / "cache"), **fields)  # type: ignore[arg-type]


def test_local_model_returns_a_schema_valid_object(tmp_path: Path) -> None:
    answer = ask_structured(local_context(tmp_path), "judge", PROMPT, MESSAGES, Killer, max_tokens=160)
    assert answer.ok, answer.error
    assert isinstance(answer.value, Killer)
    assert answer.value.name.strip()
    assert answer.attempts == 1  # grammar-constrained decoding needs no parse retry
    usage = totals(answer.usage)
    assert usage["calls"] == 1
    assert usage["cost_usd"] == 0.0
    # real counts from llama.cpp, not a cl100k estimate: they include the chat template's tokens
    sent = "\n".join(text for _, text in MESSAGES) + "\n\n" + schema_instruction(Killer)
    assert usage["input_tokens"] > count_tokens(sent) > 100
    assert 0 < usage["output_tokens"] <= 160
    assert set(answer.usage) == {"local:smollm2"}


def test_local_model_plain_text_is_deterministic_and_cached(tmp_path: Path) -> None:
    ctx = local_context(tmp_path)
    first = ask_text(ctx, "summarizer", PROMPT, MESSAGES, max_tokens=12)
    again = ask_text(ctx, "summarizer", PROMPT, MESSAGES, max_tokens=12)
    assert first.text.strip()
    assert 0 < totals(first.usage)["output_tokens"] <= 12
    assert again.cached and again.text == first.text
    fresh = ask_text(local_context(tmp_path / "other"), "summarizer", PROMPT, MESSAGES, max_tokens=12)
    assert not fresh.cached and fresh.text == first.text  # temperature 0 and a fixed seed


def test_thread_settings_reach_llama_cpp(tmp_path: Path) -> None:
    # ChatLlamaCpp drops constructor arguments it does not know; the prompt threads must still arrive
    model = chat_model("local:smollm2", local_context(tmp_path))
    params = model.client.context_params  # type: ignore[attr-defined]
    assert (params.n_threads, params.n_threads_batch) == local_threads()
