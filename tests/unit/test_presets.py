"""The papers' settings one switch away: preset values, explicit values winning, records, prompt directories."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import pytest
from typer.testing import CliRunner

import prompts
from graphs.coherence import graph as coherence_graph
from graphs.summarize import build_graph as summarize_graph
from prompts import load
from storyjudge.apps.cli import app
from storyjudge.core import presets
from storyjudge.core.context import ConfigError, Context, as_context
from storyjudge.core.resultjson import build_result
from storyjudge.core.scripted_server import OpenAIServer, last_user_text

OFFICIAL = Path(__file__).parents[1] / "fixtures" / "official_prompts"
CLEAN = "Questions: no confusion\nTypes: no confusion"
SUMMARY = "Mara inherits a lighthouse. The Guild wants to buy it."


def test_every_preset_row_is_a_described_field_with_a_source() -> None:
    known = set(Context.model_fields)
    for name, rows in presets.PRESETS.items():
        for field_name, setting in rows.items():
            assert field_name in known, (name, field_name)
            assert setting.source.startswith(presets.SOURCES), setting.source  # seed, official code or ours
            assert setting.value is not None
        as_context({"preset": name, "embedder": "minilm"})  # every preset's values pass validation


def test_booookscore_preset_fills_the_papers_values() -> None:
    ctx = Context(preset="booookscore-paper")
    assert (ctx.summary_temperature, ctx.chunk_size, ctx.max_summary_tokens) == (0.5, 2048, 900)
    assert (ctx.context_window, ctx.artifact_removal, ctx.batched_coherence) == (8192, True, False)
    assert (ctx.chunker, ctx.sentence_splitter, ctx.repeated_sentences) == ("official", "punkt", "once")
    assert ctx.summarizer_temperature == 0.5 and ctx.temperature == 0.0  # the annotator's stays
    assert ctx.preset_applied == {
        "summary_temperature": 0.5,
        "chunk_size": 2048,
        "chunker": "official",
        "max_summary_tokens": 900,
        "context_window": 8192,
        "artifact_removal": True,
        "batched_coherence": False,
        "sentence_splitter": "punkt",
        "repeated_sentences": "once",
    }
    assert (Context().chunker, Context().repeated_sentences) == ("sentences", "each")
    assert Context().preset_applied == {} and Context().summarizer_temperature == 0.0


def test_nfs_preset_retrieves_one_scene_and_counts_predicates(tmp_path: Path) -> None:
    ctx = Context(preset="nfs-paper", bge_m3_path=str(tmp_path))
    assert (ctx.retrieval_k, ctx.ckg_samples, ctx.predicate_min_count) == (1, 3, 2)
    assert (ctx.refine_guard, ctx.nfs_unjudged) == (False, "unsupported")  # the paper's: no guard, indicator
    assert (Context().refine_guard, Context().nfs_unjudged) == (True, "exclude")  # ours stay the default
    with_bge = Context(preset="nfs-paper", bge_m3_path=str(tmp_path))
    assert with_bge.embedder == f"bge-m3:{tmp_path}"
    assert with_bge.preset_applied["embedder"] == f"bge-m3:{tmp_path}"
    with pytest.raises(ConfigError, match="not a folder"):
        Context(preset="nfs-paper", bge_m3_path=str(tmp_path / "missing"))
    assert Context(preset="nfs-paper", bge_m3_path=str(tmp_path), embedder="minilm").embedder == "minilm"


def test_nfs_preset_without_bge_m3_names_the_setting_unless_the_embedder_is_chosen() -> None:
    with pytest.raises(ConfigError, match=r"nfs-paper preset retrieves with BGE-M3.*bge_m3_path"):
        Context(preset="nfs-paper")
    chosen = Context(preset="nfs-paper", embedder="minilm")  # the user's own choice wins, and is recorded
    assert chosen.embedder == "minilm" and "embedder" not in chosen.preset_applied
    assert chosen.refine_guard is False and chosen.nfs_unjudged == "unsupported"


def test_explicit_values_win_over_the_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = Context(preset="booookscore-paper", chunk_size=1024, summary_temperature=0.0)
    assert ctx.chunk_size == 1024 and ctx.summary_temperature == 0.0 and ctx.max_summary_tokens == 900
    assert "chunk_size" not in ctx.preset_applied and "summary_temperature" not in ctx.preset_applied
    monkeypatch.setenv("STORYJUDGE_MAX_SUMMARY_TOKENS", "600")  # a shell-wide setting is the user's too
    assert Context(preset="booookscore-paper").max_summary_tokens == 600
    # a temperature the user chose covers the summarizer too
    assert Context(preset="booookscore-paper", temperature=0.2).summarizer_temperature == 0.2
    # even a value equal to the default wins: retrieval_k=3 given by hand stays 3
    assert Context(preset="nfs-paper", retrieval_k=3, embedder="minilm").retrieval_k == 3


def test_preset_from_the_environment_and_from_an_invoke_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORYJUDGE_PRESET", "nfs-paper")
    assert Context(embedder="minilm").retrieval_k == 1
    monkeypatch.delenv("STORYJUDGE_PRESET")
    ctx = as_context({"preset": "booookscore-paper", "context_window": 4096})
    assert ctx.summary_temperature == 0.5 and ctx.context_window == 4096


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"preset must be empty, 'booookscore-paper' or 'nfs-paper'"):
        Context(preset="booookscore")  # type: ignore[arg-type]
    # the field's choices are the presets there are
    assert get_args(Context.model_fields["preset"].annotation) == ("", *presets.PRESETS)


def test_replace_keeps_the_preset_record() -> None:
    ctx = Context(preset="nfs-paper", embedder="minilm").replace(run_dir="/tmp/x", retrieval_k=2)
    assert ctx.run_dir == "/tmp/x" and ctx.retrieval_k == 2
    assert "retrieval_k" not in ctx.preset_applied and ctx.preset_applied["predicate_min_count"] == 2


def test_run_record_holds_the_preset_and_the_prompt_overrides() -> None:
    ctx = Context(preset="nfs-paper", prompt_dir=str(OFFICIAL), embedder="minilm")
    result = build_result({}, ctx, prompt_versions=prompts.versions(ctx.prompt_dir))
    assert result["context"]["preset"] == "nfs-paper"
    assert result["context"]["preset_applied"]["retrieval_k"] == 1
    assert result["context"]["prompt_dir"] == str(OFFICIAL)
    assert result["prompts"]["coherence"] == load("coherence", str(OFFICIAL)).version_id
    assert result["prompts"]["judge"] == load("judge").version_id
    json.dumps(result)  # serialisable as it is


def test_prompt_dir_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="prompt_dir"):
        Context(prompt_dir=str(tmp_path / "nowhere"))
    (tmp_path / "refine.txt").write_text("version: 9\n---\nRewrite {{summary}}")
    assert Context(prompt_dir=str(tmp_path)).prompt_dir == str(tmp_path)  # every prompt can be replaced


def test_graph_invoked_with_a_preset_dict_summarizes_at_the_papers_temperature(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(lambda body: "Mara keeps the lighthouse.")
    context = {
        "model": "openai:scripted",
        "base_url": server.base_url,
        "cache_dir": str(tmp_path / "cache"),
        "retry_budget_s": 0,
        "preset": "booookscore-paper",
        "artifact_removal": False,
    }
    out = summarize_graph().invoke({"document": "Mara inherits a lighthouse. " * 20}, context=context)
    assert out["summary"] == "Mara keeps the lighthouse."
    assert [body["temperature"] for body in server.completions] == [0.5]


def test_official_coherence_prompt_gets_the_summary_then_the_sentence(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: CLEAN)
    out = coherence_graph.invoke({"summary": SUMMARY}, context=ctx_for(server, prompt_dir=str(OFFICIAL)))
    prompt = load("coherence", str(OFFICIAL))
    assert out["coherence"]["prompt_version"] == prompt.version_id
    texts = sorted(last_user_text(body) for body in server.completions)
    expected = sorted(
        prompt.render(summary=SUMMARY, sentence=sentence)
        for sentence in ("Mara inherits a lighthouse.", "The Guild wants to buy it.")
    )
    assert texts == expected  # raw texts in the official order, no data blocks
    assert all("<summary>" not in text for text in texts)


def test_cli_takes_preset_and_prompt_dir(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(lambda body: CLEAN)
    summary = tmp_path / "summary.txt"
    summary.write_text(SUMMARY)
    out_file = tmp_path / "out.json"
    args = ["coherence", str(summary), "--model", "openai:scripted", "--base-url", server.base_url]
    args += ["--preset", "booookscore-paper", "--prompt-dir", str(OFFICIAL), "--out", str(out_file)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    record: dict[str, Any] = json.loads(out_file.read_text())
    assert record["settings"]["preset"] == "booookscore-paper"
    assert record["settings"]["preset_applied"]["batched_coherence"] is False
    assert record["prompt_version"].startswith("coherence@official+")
    bad = CliRunner().invoke(app, [*args[:6], "--preset", "nope"])
    assert bad.exit_code == 1 and re.search(
        r"preset must be empty, 'booookscore-paper' or 'nfs-paper'", " ".join(bad.output.split())
    )
