"""A quiet terminal: one Models line when every role has one model, a rounds table that fits 80 columns."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest
from rich.console import Console

from storyjudge.apps.cli import common, refine
from storyjudge.core.context import Context


def _round(
    n: int, *, score: float | None, reliable: bool = True, accepted: bool = True, note: str = ""
) -> Any:
    card = {
        "score": score,
        "reliable": reliable,
        "coverage": 1.0 if reliable else 0.4,
        "supported": 1234,
        "unsupported": 1234,
        "unjudged": 1234,
        "facts": 3702,
    }
    coherence = {"score": 0.9, "coverage": 0.4, "reliable": reliable}
    return {
        "iteration": n,
        "summary": "s",
        "factscore": card,
        "accepted": accepted,
        "note": note,
        "coherence": coherence,
    }


def _render(renderable: Any, width: int = 80) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width).print(renderable)
    return buffer.getvalue()


def test_the_rounds_table_fits_80_columns_without_cutting_a_word() -> None:
    rounds = [
        _round(0, score=0.933),
        _round(1, score=0.5, reliable=False, note="score not reliable: ..."),
        _round(
            12,
            score=None,
            accepted=False,
            note="refinement guard: too long (130 words); not accepted as best",
        ),
    ]
    text = _render(refine._score_table(rounds, best=0))
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert "…" not in text, text
    header = next(line for line in lines if "round" in line and "NFS" in line)
    for column in ("round", "coverage", "supported", "unsupported", "unjudged", "coherence", "outcome"):
        assert column in header, text
    assert "NarrativeFactScore per round" in text and "rejected" in text and "best" in text
    assert (
        refine._round_notes(rounds)[1]
        == "round 12: refinement guard: too long (130 words); not accepted as best"
    )


def test_one_models_line_when_every_role_has_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    monkeypatch.setattr(common, "console", Console(file=buffer, width=80))
    ctx = Context(model="openai:fake-model", base_url="http://127.0.0.1:9/v1")
    common.print_models(ctx, ("extractor", "summarizer", "judge"))
    assert buffer.getvalue().replace("\n", " ").split() == (
        "Models: openai:fake-model for every role (OpenAI-compatible server at http://127.0.0.1:9/v1)".split()
    )
    buffer.truncate(0)
    buffer.seek(0)
    common.print_models(ctx.replace(judge_model="openai:other"), ("extractor", "judge"))
    text = buffer.getvalue()
    assert "Models" in text and "openai:other" in text and "extractor" in text  # roles differ: the table


def test_transformers_loss_type_warning_is_filtered_at_its_logger(capsys: pytest.CaptureFixture[str]) -> None:
    from storyjudge.core import embeddings

    embeddings._quiet_transformers()
    source = logging.getLogger("transformers.modeling_utils")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    source.addHandler(handler)
    try:
        source.warning(
            "`loss_type=None` was set in the config but it is unrecognized. Using the default loss."
        )
        source.warning("something else")
    finally:
        source.removeHandler(handler)
    assert stream.getvalue() == "something else\n"


def test_the_demo_says_what_the_embedded_model_could_not_do_and_how_to_see_more() -> None:
    from pathlib import Path

    from storyjudge.apps.cli.refine import embedded_model_note
    from storyjudge.core.context import Context

    check = {"passed": False, "note": "the judge accepted 4 of 4 planted false facts"}
    final = {
        "ckg_stats": {"scenes": 4, "characters": 0},
        "iterations": [{"iteration": 0, "factscore": {"judge_check": check}}],
        "stop_reason": "nothing to refine",
    }
    lines = embedded_model_note(Context(model="local:smollm2"), final, Path("examples/macbeth-witches.md"))
    text = "\n".join(lines)
    assert "extracted no characters from the 4 scenes" in text
    assert "accepted 4 of 4 planted false facts" in text and "no refinement round ran" in text
    assert "OPENAI_API_KEY" in text and "--base-url" in text
    assert "storyjudge refine examples/macbeth-witches.md --model openai:gpt-4o-mini" in text
    served = Context(model="openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert embedded_model_note(served, final, None) == []  # a real model: nothing to excuse
