"""A refine dry run's low-high range holds: the calls and tokens of the real run fall inside it.

Three texts of different sizes (the witches' scene, Act I, Frankenstein), the scripted benchmark model over
HTTP, two refinement rounds. The dry run reads the same text and settings the run then uses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval.bench.workload import BenchResponder
from storyjudge.apps.cli import app
from storyjudge.core.scripted_server import OpenAIServer
from storyjudge.core.usage import run_usage, totals

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.mark.slow  # each ~30 s here, Frankenstein ~150 s
@pytest.mark.parametrize("text", ["macbeth-witches.md", "macbeth-act1.md", "frankenstein.txt"])
def test_actual_calls_and_tokens_fall_inside_the_dry_run_range(
    text: str, scripted_server: Callable[..., OpenAIServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = scripted_server(BenchResponder(20))
    run_dir = tmp_path / "run"
    args = ["refine", str(EXAMPLES / text), "--max-iterations", "2", "--run-dir", str(run_dir)]
    args += ["--model", "openai:fake-model", "--base-url", server.base_url]
    dry = CliRunner().invoke(app, [*args, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    estimate = json.loads(dry.stdout)
    assert server.completions == [] and not run_dir.exists()
    done = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert done.exit_code == 0, done.output
    actual = totals(run_usage(str(run_dir), None))
    assert actual["calls"] == len(server.completions)
    for key in ("calls", "input_tokens", "output_tokens"):
        low, high = estimate["low"][key], estimate["high"][key]
        assert low <= actual[key] <= high, (key, low, actual[key], high)


def test_a_known_model_is_priced_without_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = ["refine", str(EXAMPLES / "macbeth-witches.md"), "--model", "openai:gpt-4o-mini", "--dry-run"]
    done = CliRunner().invoke(app, [*args, "--run-dir", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("Dry run, no model called: ") and " LLM calls, " in done.stdout
    assert "price unknown" not in done.stdout and " to $" in done.stdout
    estimate = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert 0 < estimate["low"]["usd"] < estimate["high"]["usd"]
    assert estimate["low"]["calls"] < estimate["high"]["calls"]
    unpriced = CliRunner().invoke(app, [*args[:-3], "--model", "openai:fake-model", "--dry-run"])
    assert "price unknown" in unpriced.stdout  # a model without a list price is not priced at $0
