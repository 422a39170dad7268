"""``storyjudge doctor``: the smoke job, against the scripted server, and its one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from storyjudge.apps.cli import app
from storyjudge.core.scripted_server import OpenAIServer

VERDICT = json.dumps({"rationale": "The passage says Macbeth murders Duncan.", "supported": True})


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("COLUMNS", "200")  # rich would otherwise wrap the table at 80 columns
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return CliRunner()


def test_doctor_passes_against_an_openai_compatible_server(
    scripted_server: Callable[..., OpenAIServer], runner: CliRunner, tmp_path: Path
) -> None:
    def judge(body: dict[str, Any]) -> str:
        return VERDICT

    server = scripted_server(judge)
    args = ["doctor", "--base-url", server.base_url, "--model", "openai:scripted", "--run-dir", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Models: openai:scripted for every role" in out  # one line: every role has the same model
    assert f"OpenAI-compatible server at {server.base_url}" in out
    assert "demo" not in out  # no embedded model in use
    assert "said supported, as expected" in out and "supported=" not in out
    assert "embedder minilm files: 6 layers x 384, 22.7 M parameters" in out
    assert "-d vectors" not in out  # the embedder's weights are not loaded without --deep
    assert "all checks passed" in out
    assert len(server.completions) == 1
    assert server.completions[0]["response_format"]["type"] == "json_schema"
    # a rerun answers from the cache
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "cached" in again.output
    assert len(server.completions) == 1


def test_doctor_deep_loads_the_embedder_and_embeds(
    scripted_server: Callable[..., OpenAIServer], runner: CliRunner, tmp_path: Path
) -> None:
    server = scripted_server(lambda body: VERDICT)
    args = ["doctor", "--deep", "--base-url", server.base_url, "--model", "openai:scripted"]
    result = runner.invoke(app, [*args, "--run-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "said supported, as expected" in result.output
    assert "384-d vectors, window 256 tokens" in result.output
    assert "files:" not in result.output
    assert len(server.completions) == 1


def test_doctor_checks_an_embedded_model_by_its_file_without_calling_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(app, ["doctor", "--model", "local:smollm2", "--run-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "embedded model local:smollm2 files: SmolLM2-135M-Instruct.Q4_1.gguf: GGUF v3" in result.output
    assert "structured call" not in result.output
    assert "all checks passed" in result.output


def test_doctor_names_a_broken_embedder_folder_in_one_line(runner: CliRunner, tmp_path: Path) -> None:
    folder = tmp_path / "bge-m3"
    folder.mkdir()
    (folder / "config.json").write_text("{not json", encoding="utf-8")
    args = ["doctor", "--model", "local:smollm2", "--embedder", f"bge-m3:{folder}"]
    result = runner.invoke(app, [*args, "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "config.json" in result.output or "FlagEmbedding" in result.output


def test_doctor_reports_an_unparseable_model_in_one_line(
    scripted_server: Callable[..., OpenAIServer], runner: CliRunner, tmp_path: Path
) -> None:
    server = scripted_server(lambda body: "I am not sure.")
    args = ["doctor", "--base-url", server.base_url, "--model", "openai:scripted", "--run-dir", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "no parseable structured answer after 3 attempt(s)" in result.output
    assert "Traceback" not in result.output


def test_doctor_with_a_bogus_model_fails_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("OPENAI_API_KEY", None)
    result = subprocess.run(
        [sys.executable, "-m", "storyjudge", "doctor", "--model", "bogus", "--run-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1
    assert errors[0].startswith("error:")
    assert "provider:model" in errors[0]
    assert "Models" not in result.stderr  # the spec is checked before the table would describe it


def test_doctor_rejects_a_bad_setting_in_one_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["doctor", "--concurrency", "0"])
    assert result.exit_code == 1
    assert "concurrency must be >= 1" in result.output
    assert "Traceback" not in result.output
