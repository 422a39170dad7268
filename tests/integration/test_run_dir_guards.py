"""Runs that must not mix: a resume with other settings, two processes in one directory; other kinds side by side.

Each case runs the real command in process (typer's CliRunner) against the scripted server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from storyjudge.apps.cli import app
from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import FIXED_SUMMARY, STORY, StoryResponder

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], env={"OPENAI_API_KEY": ""})


def last_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    return errors[0]


@pytest.fixture
def finished(tmp_path: Path, scripted_server: Callable[..., OpenAIServer]) -> tuple[Path, Path, OpenAIServer]:
    """A refine run of the scripted story that finished after one iteration."""
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    server = scripted_server(StoryResponder())
    run_dir = tmp_path / "run"
    done = invoke(*common(story, server, run_dir), "--max-iterations", "1")
    assert done.exit_code == 0, done.output
    return story, run_dir, server


def common(story: Path, server: OpenAIServer, run_dir: Path) -> list[str | Path]:
    return [
        *("refine", story, "--model", "openai:scripted", "--base-url", server.base_url),
        *("--run-dir", run_dir, "--ckg-samples", "1", "--set", "retry_budget_s=0"),
    ]


def test_meta_records_the_kind_and_the_settings(finished: tuple[Path, Path, OpenAIServer]) -> None:
    _, run_dir, server = finished
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["kind"] == "refine"
    settings = meta["settings"]
    assert settings["judge_model"] == "openai:scripted" and settings["base_url"] == server.base_url
    assert settings["ckg_samples"] == 1 and settings["max_iterations"] == 1 and settings["prompts"]
    assert "concurrency" not in settings and "run_dir" not in settings


def test_resume_with_other_settings_is_refused_with_the_differences(
    finished: tuple[Path, Path, OpenAIServer],
) -> None:
    story, run_dir, server = finished
    before = (run_dir / "result.json").read_bytes()
    calls = len(server.completions)
    error = last_error(
        invoke(*common(story, server, run_dir), "--resume", "--max-iterations", "1", "--chunk-size", "900")
    )
    assert "chunk_size: " in error and "max_iterations: " not in error
    error = last_error(invoke(*common(story, server, run_dir), "--resume", "--max-iterations", "3"))
    assert "max_iterations: 1 -> 3" in error and "--allow-change" in error
    error = last_error(
        invoke(
            *common(story, server, run_dir), "--resume", "--chunk-size", "900", "--allow-change", "chunk_size"
        )
    )
    assert "--allow-change accepts" in error
    assert (run_dir / "result.json").read_bytes() == before and len(server.completions) == calls


def test_resume_may_change_an_allowed_setting(finished: tuple[Path, Path, OpenAIServer]) -> None:
    story, run_dir, server = finished
    resumed = invoke(
        *common(story, server, run_dir),
        "--resume",
        "--max-iterations",
        "3",
        "--allow-change",
        "max_iterations",
    )
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((run_dir / "meta.json").read_text())["settings"]["max_iterations"] == 3


def test_runs_of_other_kinds_are_kept_side_by_side(
    finished: tuple[Path, Path, OpenAIServer], tmp_path: Path
) -> None:
    """A story's folder holds a refine run and then a score and an index of the same story: each exits 0, the
    refine run stays kept, and the refine run still resumes with its own settings."""
    story, run_dir, server = finished
    summary = tmp_path / "summary.txt"
    summary.write_text(FIXED_SUMMARY)
    refined = {p.name for p in (run_dir / "runs").iterdir()}
    assert len(refined) == 1 and next(iter(refined)).startswith("refine-")
    kept = (run_dir / "runs" / next(iter(refined)) / "result.json").read_bytes()
    model = ("--model", "openai:scripted", "--base-url", server.base_url)
    given = ("--summary", summary, *model, "--run-dir", run_dir, "--ckg-samples", "1")
    assert "no earlier score run" in last_error(invoke("score", story, *given, "--resume"))
    score = invoke("score", story, *given)
    assert score.exit_code == 0, score.output
    index = invoke("index", story, *model, "--run-dir", run_dir, "--ckg-samples", "1")
    assert index.exit_code == 0, index.output
    summarized = invoke("summarize", story, *model, "--run-dir", run_dir)
    assert summarized.exit_code == 0, summarized.output
    runs = {p.name.split("-")[0] for p in (run_dir / "runs").iterdir()}
    assert runs == {"refine", "score"}
    assert (run_dir / "runs" / next(iter(refined)) / "result.json").read_bytes() == kept
    meta = json.loads((run_dir / "meta.json").read_text())
    assert set(meta["settings_by_kind"]) == {"refine", "score", "index", "summarize"}
    assert meta["settings_by_kind"]["refine"]["max_iterations"] == 1
    resumed = invoke(*common(story, server, run_dir), "--resume", "--max-iterations", "1")
    assert resumed.exit_code == 0, resumed.output
    assert "already finished" in resumed.output
    own = json.loads((run_dir / "runs" / next(iter(refined)) / "result.json").read_text())
    assert own["kind"] == "refine" and json.loads((run_dir / "result.json").read_text())["kind"] == "refine"


def test_a_run_directory_in_use_by_another_process_is_refused(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from storyjudge.core.rundir import RunDir; "
            f"RunDir(Path({str(run_dir)!r})).lock(); print('locked', flush=True); time.sleep(120)",
        ],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        server = scripted_server(StoryResponder())
        error = last_error(invoke(*common(story, server, run_dir)))
        assert "in use" in error and str(holder.pid) in error
        assert not server.completions
    finally:
        holder.kill()
        holder.wait()
    done = invoke(*common(story, server, run_dir), "--max-iterations", "1")  # the lock went with its process
    assert done.exit_code == 0, done.output
