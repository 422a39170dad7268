"""``storyjudge score`` keeps each scored summary of a story as a run; ``storyjudge compare`` sets them side by side."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from storyjudge.apps.cli import app
from storyjudge.core.keptruns import story_runs
from storyjudge.core.runrecord import SCHEMA_FILE, SCHEMA_VERSION, load_run
from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import FIRST_SUMMARY, FIXED_SUMMARY, STORY, StoryResponder


@pytest.mark.slow
def test_two_summaries_scored_are_kept_and_compared(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.chdir(tmp_path)  # compare writes compare.html into the working directory by default
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    server = scripted_server(StoryResponder())
    options = ["--model", "openai:scripted", "--base-url", server.base_url, "--ckg-samples", "1"]
    run_dir = tmp_path / "story-run"
    runner = CliRunner()
    for n, text in enumerate((FIRST_SUMMARY, FIXED_SUMMARY)):
        summary = tmp_path / f"summary-{n}.txt"
        summary.write_text(text)
        done = runner.invoke(
            app, ["score", str(story), "--summary", str(summary), "--run-dir", str(run_dir), *options]
        )
        assert done.exit_code == 0, done.output
        assert "Kept as run score-" in done.stderr
    runs = story_runs(run_dir)
    for row in runs:  # a real record validates against the typed models and the shipped JSON Schema
        written = json.loads((run_dir / "runs" / row["id"] / "result.json").read_text(encoding="utf-8"))
        assert (
            written["schema_version"] == SCHEMA_VERSION
            and load_run(run_dir / "runs" / row["id"]).record() == written
        )
        jsonschema.validate(written, json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    assert len(runs) == 2 and {r["summary_source"] for r in runs} == {"given"}  # the second replaced nothing
    first, second = sorted(runs, key=lambda r: r["created"] + r["id"])
    kept = run_dir / "runs"
    assert (kept / first["id"] / "report.html").is_file()

    page = tmp_path / "compare.html"
    shown = runner.invoke(
        app,
        ["compare", str(kept / first["id"]), str(kept / second["id"]), "--html", str(page)],
        env={"COLUMNS": "200"},
    )
    assert shown.exit_code == 0, shown.output
    assert (
        "NFS [95% CI]" in shown.stdout
        and "0.667 [" in shown.stdout
        and "1.000 [1.000, 1.000]" in shown.stdout
    )
    assert f"{second['id']} - {first['id']}: NFS +0.333" in shown.stdout
    assert "supported only in" in shown.stdout and page.is_file()
    as_json = runner.invoke(app, ["compare", str(kept / first["id"]), str(kept / second["id"]), "--json"])
    result = json.loads(as_json.stdout)
    assert result["pairs"][0]["comparable"] and len(result["pairs"][0]["only_b"]) == 1

    other = tmp_path / "other.txt"
    other.write_text(STORY.replace("Alice", "Carol"))
    elsewhere = tmp_path / "other-run"
    done = runner.invoke(
        app,
        [
            "score",
            str(other),
            "--summary",
            str(tmp_path / "summary-0.txt"),
            "--run-dir",
            str(elsewhere),
            *options,
        ],
    )
    assert done.exit_code == 0, done.output
    (foreign,) = story_runs(elsewhere)
    refused = runner.invoke(
        app, ["compare", str(kept / first["id"]), str(elsewhere / "runs" / foreign["id"])]
    )
    assert refused.exit_code == 1 and "another story" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
