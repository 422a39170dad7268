"""What a user sees of a CLI run with its output redirected: stage progress on stderr, the result on stdout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from storyjudge.apps.scripted_server import OpenAIServer
from tests.scripted_story import STORY, StoryResponder

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Done:
    """A finished CLI run."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path


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
        args = ["refine", str(story), "--model", "openai:scripted", "--base-url", server.base_url]
        done = cli(*args, "--run-dir", str(run_dir), "--ckg-samples", "1", cwd=tmp)
    finally:
        server.stop()
    yield Done(done.returncode, done.stdout, done.stderr, run_dir)


@pytest.mark.slow
def test_refine_prints_each_stage_as_plain_lines_when_redirected(refined: Done) -> None:
    assert refined.returncode == 0, refined.stderr
    err = refined.stderr
    for line in ("extract 0/2 started", "extract 2/2 done", "summarize 2/2 done", "decompose 3/3 done"):
        assert line in err, err
    assert "retrieve 3/3 done" in err and "judge 3/3 done" in err
    assert "decompose 3/3 done in" in err and "(round 2)" in err  # the second round's scoring
    assert "refine 1/1 done" in err
