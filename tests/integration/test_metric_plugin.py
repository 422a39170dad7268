"""A metric added in one file (``examples/metrics/entity_coverage.py``) through score, compare and eval.

The scripted model plays every role over HTTP on the witches' scenes of Macbeth; the example metric's card must
land in result.json, the report, ``compare`` (table and ``--json``) and an eval's rows and summary table, none
of which knows it.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from storyjudge.apps.cli import app
from storyjudge.core.keptruns import story_runs
from storyjudge.core.runrecord import load_run
from storyjudge.core.scripted_server import OpenAIServer
from tests.integration.test_browser import FIRST_SUMMARY, FIXED_SUMMARY, MacbethResponder

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
METRIC = f"{ROOT / 'examples' / 'metrics' / 'entity_coverage.py'}:EntityCoverage"


def test_example_metric_through_score_compare_and_eval(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.chdir(ROOT)  # the metric named as the README names it, relative to the repository
    server = scripted_server(MacbethResponder())
    story = ROOT / "examples" / "macbeth-witches.md"
    run_dir = tmp_path / "witches"
    options = ["--model", "openai:scripted", "--base-url", server.base_url, "--ckg-samples", "1"]
    runner = CliRunner()
    for n, text in enumerate((FIRST_SUMMARY, FIXED_SUMMARY)):
        summary = tmp_path / f"summary-{n}.txt"
        summary.write_text(text)
        done = runner.invoke(
            app,
            ["score", str(story), "--summary", str(summary), "--run-dir", str(run_dir), *options]
            + ["--metric", "examples/metrics/entity_coverage.py:EntityCoverage"],
        )
        assert done.exit_code == 0, done.output
        assert "entity_coverage: " in done.stderr
    record = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    card = record["iterations"][0]["metrics"]["entity_coverage"]
    assert isinstance(card["score"], float) and 0 < card["score"] <= 1 and not card.get("error"), card
    assert card["headline"].endswith("characters named)") and card["named"]
    assert load_run(run_dir).iterations[0].metrics["entity_coverage"].score == card["score"]
    assert "entity_coverage" in (run_dir / "report.html").read_text(encoding="utf-8")

    kept = [
        run_dir / "runs" / r["id"] for r in sorted(story_runs(run_dir), key=lambda r: r["created"] + r["id"])
    ]
    page = ["--html", str(tmp_path / "compare.html")]
    table = runner.invoke(app, ["compare", *map(str, kept), *page], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "entity_coverage" in table.stdout and card["headline"] in table.stdout
    as_json = runner.invoke(app, ["compare", *map(str, kept), *page, "--json"])
    shown = json.loads(as_json.stdout)["summaries"]
    assert all(isinstance(s["metrics"]["entity_coverage"]["score"], float) for s in shown)

    copy = tmp_path / "witches.md"
    shutil.copy(story, copy)
    config = tmp_path / "grid.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "metric-test",
                "out_dir": str(tmp_path / "exp"),
                "task": "refine",
                "metrics": ["factscore", METRIC],
                "datasets": [{"kind": "documents", "paths": [str(copy)]}],
                "models": ["openai:scripted"],
                "base_url": server.base_url,
                "loops": [{"max_iterations": 0}],
                "context": {"ckg_samples": 1, "retry_budget_s": 0},
            }
        )
    )
    result = runner.invoke(app, ["eval", str(config)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "exp"
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok"], rows
    assert isinstance(rows[0]["metrics"]["entity_coverage"]["score"], float)
    line = next(csv.DictReader((out / "summary.csv").open(encoding="utf-8")))
    assert float(line["entity_coverage_best"]) == rows[0]["metrics"]["entity_coverage"]["score"]
    assert line["entity_coverage_failed"] == "0"
