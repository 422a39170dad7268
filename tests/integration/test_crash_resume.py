"""Crash safety of ``storyjudge refine``: a real process killed while judging resumes and finishes the same.

The scripted server runs in the test process with latency, so judging takes a while; the test watches the
server's request log for judge requests (schema "Verdict") and kills the CLI process mid-judging. With one
call in flight at a time, ``--resume`` (checkpoint + LLM cache) may repeat at most two calls: the one in flight,
and the one before it, whose slot was given back when its answer arrived (so the next call could leave) but
whose answer the killed process may not have stored yet.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storyjudge.core.context import ENV_PREFIX
from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import STORY, StoryResponder

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LATENCY = 0.4
WAIT_LIMIT = 240.0  # seconds for a CLI process to reach judging (imports are slow on a busy 2-core machine)


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX) and k != "OPENAI_API_KEY"}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    return env


def refine_args(story: Path, server: OpenAIServer, run_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "storyjudge", "refine", str(story),
        "--model", "openai:scripted", "--base-url", server.base_url, "--run-dir", str(run_dir),
        "--ckg-samples", "1", "--concurrency", "1", *extra,
    ]  # fmt: skip


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    return subprocess.Popen(args, cwd=ROOT, env=cli_env(), stdout=handle, stderr=subprocess.STDOUT)


def wait_for_judging(
    server: OpenAIServer, process: subprocess.Popen[bytes], since: int, answered: int
) -> None:
    """Return once the process's first ``answered`` judge calls are answered and the next one is in flight."""
    deadline = time.monotonic() + WAIT_LIMIT
    while time.monotonic() < deadline:
        judged = [entry for entry in list(server.log)[since:] if entry.schema == "Verdict"]
        if len(judged) > answered and judged[answered].answered is None and judged[answered - 1].answered:
            return
        if process.poll() is not None:
            raise AssertionError(f"the CLI exited ({process.returncode}) before judging")
        time.sleep(0.01)
    process.kill()
    raise AssertionError("the CLI never reached judging")


def outcome(run_dir: Path) -> dict[str, Any]:
    """What a refine run produced, without timings and dates."""
    record = json.loads((run_dir / "result.json").read_text())
    return {
        "scores": record["scores"],
        "best_summary": record["best_summary"],
        "stop_reason": record["stop_reason"],
        "verdicts": [
            [(v["fact"]["id"], v["status"], v["feedback"]) for v in it["factscore"]["verdicts"]]
            for it in record["iterations"]
        ],
        "summaries": [it["summary"] for it in record["iterations"]],
        # the evidence each verdict names, and the texts it names them in
        "evidence": [[v["evidence"] for v in it["factscore"]["verdicts"]] for it in record["iterations"]],
        "passages": record["passages"],
    }


def bodies(server: OpenAIServer, begin: int, end: int | None = None) -> list[str]:
    return [json.dumps(body, sort_keys=True) for body in server.completions[begin:end]]


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("story") / "story.txt"
    path.write_text(STORY)
    return path


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(StoryResponder(), latency=LATENCY) as running:
        yield running


@pytest.fixture(scope="module")
def uninterrupted(
    story: Path, server: OpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The reference: the same run, never interrupted, and how many LLM calls it made."""
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    before = len(server.completions)
    done = subprocess.run(refine_args(story, server, run_dir), cwd=ROOT, env=cli_env(), capture_output=True)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    return {"outcome": outcome(run_dir), "calls": len(server.completions) - before}


def test_sigkill_while_judging_then_resume_finishes_the_same(
    story: Path, server: OpenAIServer, uninterrupted: dict[str, Any], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    begin = len(server.completions)
    process = start(refine_args(story, server, run_dir), tmp_path / "first.log")
    wait_for_judging(server, process, since=begin, answered=1)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert not (run_dir / "result.json").exists(), "killed before it could finish"
    middle = len(server.completions)

    resumed = subprocess.run(
        refine_args(story, server, run_dir, "--resume"), cwd=ROOT, env=cli_env(), capture_output=True
    )
    output = resumed.stdout.decode() + resumed.stderr.decode()
    assert resumed.returncode == 0, output
    assert "Resuming" in output
    assert outcome(run_dir) == uninterrupted["outcome"]
    first, second = bodies(server, begin, middle), bodies(server, middle)
    repeated = [body for body in second if body in first]
    # the call in flight, and the one before it (see the module docstring)
    assert len(repeated) <= 2, f"{len(repeated)} LLM calls repeated after the crash"
    assert len(first) + len(second) - len(repeated) == uninterrupted["calls"]
    # the usage record counts every request of both parts, the killed part's included
    reported = json.loads((run_dir / "result.json").read_text())["usage"]["total"]["calls"]
    assert reported == len(first) + len(second)
    assert f"LLM calls {reported} " in output


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_stops_cleanly_with_a_resume_hint_and_resumes(
    stop: signal.Signals, story: Path, server: OpenAIServer, uninterrupted: dict[str, Any], tmp_path: Path
) -> None:
    """Ctrl-C, or SIGTERM from a process manager: the same stop, the same resume line (exit 128 + signal)."""
    run_dir = tmp_path / "run"
    log = tmp_path / "first.log"
    since = len(server.log)
    process = start(refine_args(story, server, run_dir), log)
    wait_for_judging(server, process, since=since, answered=1)
    process.send_signal(stop)
    process.wait(timeout=60)
    output = log.read_text()
    assert process.returncode == 128 + stop, output
    assert "Traceback" not in output
    assert "Resume with the same command plus --resume" in output and str(run_dir) in output
    resumed = subprocess.run(
        refine_args(story, server, run_dir, "--resume"), cwd=ROOT, env=cli_env(), capture_output=True
    )
    assert resumed.returncode == 0, resumed.stdout.decode() + resumed.stderr.decode()
    assert outcome(run_dir) == uninterrupted["outcome"]


def test_ctrl_c_sends_no_more_calls_than_are_in_flight(story: Path, tmp_path: Path) -> None:
    """Ctrl-C with many calls to go: at most the calls in flight (the concurrency) reach the server after it."""
    concurrency, wide = 4, ("--ckg-samples", "40", "--concurrency", "4")  # 80 extraction calls to make
    with OpenAIServer(StoryResponder(), latency=0.3) as server:
        run_dir, log = tmp_path / "run", tmp_path / "first.log"
        args = [*refine_args(story, server, run_dir)[:-4], *wide]
        process = start(args, log)
        deadline = time.monotonic() + WAIT_LIMIT
        while len(server.log) < 10 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(server.log) >= 10, log.read_text()
        at_signal = len(server.log)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)  # a generous bound: it exits in well under a second
        output = log.read_text()
        after = len(server.log) - at_signal
        assert process.returncode == 130, output
        assert after <= concurrency, f"{after} requests after Ctrl-C"
        assert "Traceback" not in output and "--resume" in output and str(run_dir) in output
        resumed = subprocess.run([*args, "--resume"], cwd=ROOT, env=cli_env(), capture_output=True)
        assert resumed.returncode == 0, resumed.stdout.decode() + resumed.stderr.decode()
        assert json.loads((run_dir / "result.json").read_text())["stop_reason"]


def test_resume_of_a_run_killed_before_its_first_checkpoint_starts_it(
    story: Path, server: OpenAIServer, uninterrupted: dict[str, Any], tmp_path: Path
) -> None:
    """A process killed while it was still starting left a thread id but no checkpoint: resume runs it all."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "meta.json").write_text(
        json.dumps(
            {"document_hash": _hash(STORY), "source": str(story), "refine_thread": "refine-killed-at-start"}
        )
    )
    resumed = subprocess.run(
        refine_args(story, server, run_dir, "--resume"), cwd=ROOT, env=cli_env(), capture_output=True
    )
    assert resumed.returncode == 0, resumed.stdout.decode() + resumed.stderr.decode()
    assert outcome(run_dir) == uninterrupted["outcome"]


def _hash(text: str) -> str:
    from storyjudge.core.rundir import document_hash

    return document_hash(text)
