"""What a user sees of a CLI run with its output redirected: stage progress on stderr, the result on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from storyjudge.apps.cli import app
from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import FIRST_SUMMARY, FIXED_SUMMARY, STORY, StoryResponder

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Done:
    """A finished CLI run."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path
    settings: tuple[str, ...] = ()  # the options it ran with (a resume must repeat them)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m storyjudge ARGS`` in a subprocess, stdout and stderr redirected (no terminal)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STORYJUDGE_")}
    env.update(PYTHONPATH=str(ROOT), OPENAI_API_KEY="sk-test", COLUMNS="80")
    return subprocess.run(
        [sys.executable, "-m", "storyjudge", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def refined(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Done]:
    """One refine run of the scripted story, redirected."""
    tmp = tmp_path_factory.mktemp("refine")
    story = tmp / "story.txt"
    story.write_text(STORY)
    server = OpenAIServer(StoryResponder()).start()
    try:
        run_dir = tmp / "run"
        settings = ("--model", "openai:scripted", "--base-url", server.base_url, "--ckg-samples", "1")
        done = cli("refine", str(story), *settings, "--run-dir", str(run_dir), cwd=tmp)
    finally:
        server.stop()
    yield Done(done.returncode, done.stdout, done.stderr, run_dir, settings)


@pytest.mark.slow
def test_refine_prints_each_stage_as_plain_lines_when_redirected(refined: Done) -> None:
    assert refined.returncode == 0, refined.stderr
    err = refined.stderr
    for line in ("extract 0/2 started", "extract 2/2 done", "summarize 2/2 done", "decompose 3/3 done"):
        assert line in err, err
    assert "retrieve 3/3 done" in err and "judge 3/3 done" in err
    assert "decompose 3/3 done in" in err and "(round 1)" in err  # the first refinement round's scoring
    assert "refine 1/1 done" in err


@pytest.mark.slow
def test_refine_prints_the_best_summary_alone_on_stdout_and_writes_it(refined: Done) -> None:
    assert refined.returncode == 0, refined.stderr
    assert refined.stdout == FIXED_SUMMARY + "\n"  # one line, though longer than the 80 columns given
    assert (refined.run_dir / "summary.txt").read_text() == FIXED_SUMMARY + "\n"
    err = refined.stderr
    assert f"Run record: {refined.run_dir / 'result.json'}" in err
    assert f"Report: {refined.run_dir / 'report.html'}" in err and (refined.run_dir / "report.html").exists()
    assert "NarrativeFactScore per round" in err  # the tables go to stderr


@pytest.mark.slow
def test_refine_piped_at_80_columns_is_quiet(refined: Done) -> None:
    """One Models line, no round summaries without --verbose, no third-party warning, nothing over 80 columns."""
    assert refined.returncode == 0, refined.stderr
    err = refined.stderr
    assert err.startswith("Models: openai:scripted for every role") and "┃ role" not in err
    assert "loss_type" not in err and "Warning" not in err
    assert FIXED_SUMMARY not in err and FIRST_SUMMARY not in err  # the summaries: stdout and --verbose only
    paths = ("Run record:", "Report:", "Summary:", "Kept as run")  # a path is printed whole, to be copied
    assert all(len(line) <= 80 for line in err.splitlines() if not line.startswith(paths)), err
    assert "…" not in err and "Stopped after round 1: target reached" in err


@pytest.mark.slow
def test_refine_json_prints_the_run_record_alone(refined: Done) -> None:
    story = refined.run_dir.parent / "story.txt"
    # the run is finished: --resume (with the run's own settings) shows its result without calling a model
    again = cli(
        "refine",
        str(story),
        *refined.settings,
        "--run-dir",
        str(refined.run_dir),
        "--resume",
        "--json",
        cwd=story.parent,
    )
    assert again.returncode == 0, again.stderr
    record = json.loads(again.stdout)
    assert record == json.loads((refined.run_dir / "result.json").read_text())
    assert record["best_summary"] == FIXED_SUMMARY


@pytest.fixture
def story_and_server(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[str]]:
    """The scripted story in a file, and the options that send every model role to the scripted server."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("STORYJUDGE_CACHE_DIR", str(tmp_path / "cache"))
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    server = scripted_server(StoryResponder())
    return story, ["--model", "openai:scripted", "--base-url", server.base_url, "--ckg-samples", "1"]


@pytest.mark.slow
def test_score_and_index_print_their_result_alone_and_json(
    story_and_server: tuple[Path, list[str]], tmp_path: Path
) -> None:
    story, options = story_and_server
    summary = tmp_path / "given.txt"
    summary.write_text(FIRST_SUMMARY)
    run_dir = tmp_path / "score"
    runner = CliRunner()
    score = runner.invoke(
        app, ["score", str(story), "--summary", str(summary), "--run-dir", str(run_dir), *options]
    )
    assert score.exit_code == 0, score.output
    assert score.stdout.startswith("NarrativeFactScore 0.667") and len(score.stdout.splitlines()) == 1
    assert "Atomic facts" in score.stderr and f"Report: {run_dir / 'report.html'}" in score.stderr
    assert (run_dir / "summary.txt").read_text() == FIRST_SUMMARY + "\n"
    as_json = runner.invoke(
        app,
        [
            "score",
            str(story),
            "--summary",
            str(summary),
            "--run-dir",
            str(tmp_path / "s2"),
            "--json",
            *options,
        ],
    )
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["best_summary"] == FIRST_SUMMARY

    index = runner.invoke(
        app, ["index", str(story), "--run-dir", str(tmp_path / "index"), "--json", *options]
    )
    assert index.exit_code == 0, index.output
    record = json.loads(index.stdout)
    assert record["ckg_stats"]["scenes"] == 2 and record["ckg"] == str(tmp_path / "index" / "ckg.json")
    plain = runner.invoke(app, ["index", str(story), "--run-dir", str(tmp_path / "index"), *options])
    assert plain.stdout.startswith("story: 2 scenes") and len(plain.stdout.splitlines()) == 1


@pytest.mark.slow
def test_score_shows_facts_that_look_like_rich_markup_as_they_are(
    story_and_server: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """A fact is the model's words (here the summary's sentence itself): its brackets are text, never styles."""
    story, options = story_and_server
    summary = tmp_path / "marked.txt"
    summary.write_text("Alice sings [bold]x[/bold] at [red] dawn. Bob waves [/] back.")
    score = CliRunner().invoke(
        app, ["score", str(story), "--summary", str(summary), "--run-dir", str(tmp_path / "run"), *options]
    )
    assert score.exit_code == 0, score.output
    table = score.stderr.split("Atomic facts", 1)[1]
    assert "Alice sings [bold]x[/bold] at [red] dawn." in table
    assert "Bob waves [/] back." in table  # a bare closing tag would be a markup error


def test_summarize_prints_the_summary_alone_writes_out_and_json(
    story_and_server: tuple[Path, list[str]], tmp_path: Path
) -> None:
    story, options = story_and_server
    options = options[:4]  # summarize takes no CKG settings
    out_file = tmp_path / "out" / "summary.txt"
    runner = CliRunner()
    args = ["summarize", str(story), "--run-dir", str(tmp_path / "run"), *options]
    result = runner.invoke(app, [*args, "--out", str(out_file)])
    assert result.exit_code == 0, result.output
    assert result.stdout == FIRST_SUMMARY + "\n"
    assert out_file.read_text() == FIRST_SUMMARY + "\n"
    assert "novel trigrams" in result.stderr
    as_json = runner.invoke(app, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["summary"] == FIRST_SUMMARY


def test_coherence_prints_its_score_alone_and_json(
    story_and_server: tuple[Path, list[str]], tmp_path: Path
) -> None:
    _, options = story_and_server
    summary = tmp_path / "given.txt"
    summary.write_text(FIRST_SUMMARY)
    runner = CliRunner()
    result = runner.invoke(app, ["coherence", str(summary), *options[:4]])
    assert result.exit_code == 0, result.output
    assert result.stdout == "BooookScore 1.000 (coverage 100%)\n"
    assert "Errors per sentence by type" in result.stderr
    as_json = runner.invoke(app, ["coherence", str(summary), *options[:4], "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["score"] == 1.0


@pytest.mark.parametrize("command", ["refine", "score"])
def test_dry_run_calls_no_model_writes_nothing_and_says_price_unknown(
    command: str,
    tmp_path: Path,
    scripted_server: Callable[..., OpenAIServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    summary = tmp_path / "given.txt"
    summary.write_text(FIRST_SUMMARY)
    server = scripted_server(StoryResponder())
    run_dir = tmp_path / "run"
    args = [command, str(story), "--summary", str(summary), "--run-dir", str(run_dir), "--dry-run"]
    options = ["--model", "openai:scripted", "--base-url", server.base_url]
    result = CliRunner().invoke(app, [*args, *options])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Dry run, no model called: ") and " LLM calls, " in result.stdout
    assert "price unknown" in result.stdout and "$0.0000" not in result.output
    as_json = CliRunner().invoke(app, [*args, *options, "--json"])
    record = json.loads(as_json.stdout)
    assert record["calls"] > 0 and record["usd"] is None
    priced = CliRunner().invoke(app, [*args, "--model", "openai:gpt-4o-mini", "--json"])
    assert priced.exit_code == 0, priced.output
    assert json.loads(priced.stdout)["usd"] > 0
    assert server.completions == [] and not run_dir.exists()


@pytest.mark.slow
def test_the_readme_names_every_file_of_a_run_directory_and_says_how_to_read_a_result(refined: Done) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listing = readme.split("## A run directory", 1)[1].split("\n## ", 1)[0]
    unnamed = [entry.name for entry in refined.run_dir.iterdir() if f"`{entry.name}" not in listing]
    assert not unnamed, f"files of a run directory the README does not name: {unnamed}"
    reading = readme.split("## Reading a result", 1)[1].split("\n## ", 1)[0]
    for words in ("NarrativeFactScore (NFS)", "BooookScore", "coverage", "reliable", "round 0"):
        assert words in reading, words
    for reason in ("target reached", "patience", "max iterations reached", "nothing to refine"):
        assert reason in reading, reason
