"""Reliability against a real HTTP server: a fault storm never ends a run, a server that keeps failing costs one
unit, a dead server is named at once, permanent errors are one request and one line, and the careless or hostile
inputs of a user (an impossible prompt, a key meant for OpenAI, broken prompt files, a corrupt checkpoint
database, a full disk) end in one line before anything is lost."""

from __future__ import annotations

import json
import logging
import socket
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from graphs.coherence import build_graph as build_coherence
from storyjudge.apps.cli import app
from storyjudge.core.context import Context
from storyjudge.core.llm import ModelError, ask_text
from storyjudge.core.models import describe_models
from storyjudge.core.scripted_server import FaultPlan, OpenAIServer
from tests.integration.test_faults import coherence_responder, original_prompt
from tests.scripted_story import STORY

STORM = {"rate_limit": 0.2, "server_error": 0.2, "malformed_json": 0.2, "empty": 0.1}


def _prompt() -> Any:
    from prompts import Prompt

    return Prompt(name="reliability", version="1", text="test")


def summaries(count: int, sentences: int) -> list[dict[str, str]]:
    return [
        {
            "id": f"s{k}",
            "summary": " ".join(
                f"In part {i + 1} of story {k}, Mara repairs lamp number {i + 1}." for i in range(sentences)
            ),
        }
        for k in range(count)
    ]


def coherence_run(
    tmp: Path, faults: FaultPlan | None, items: list[dict[str, str]]
) -> tuple[Any, OpenAIServer]:
    with OpenAIServer(original_prompt(coherence_responder), faults=faults) as server:
        ctx = Context(
            model="openai:scripted",
            base_url=server.base_url,
            cache_dir=str(tmp / "cache"),
            concurrency=8,
            retry_budget_s=60,
            parse_retries=2,
        )
        out = build_coherence().invoke({"summaries": items}, context=ctx)
    annotations = sorted((a["summary_id"], a["index"], a["confused"]) for a in out["annotations"])
    return (out["coherence"]["system_score"], annotations), server


@pytest.mark.slow
@pytest.mark.parametrize("rates", [STORM, {"rate_limit": 0.4}], ids=["storm", "429x40%"])
def test_a_fault_storm_gives_the_fault_free_scores(
    rates: dict[str, float],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every call of 200 sentences gets through a storm; retries say so in a line now and then, not each.

    Most attempts fail (70 % in the mixed storm), so some calls take over ten; back-off is capped at a second
    here to keep the test short (the budget, not the count, decides when a call gives up).
    """
    from storyjudge.core import retry

    monkeypatch.setattr(retry, "BACKOFF_CAP", 1.0)
    monkeypatch.setattr(
        retry, "storm", retry._Storm()
    )  # its first line is not held back by an earlier test's
    items = summaries(10, 20)
    clean, _ = coherence_run(tmp_path / "clean", None, items)
    with caplog.at_level(logging.INFO, logger="storyjudge"):
        stormy, server = coherence_run(tmp_path / "storm", FaultPlan(rates, seed=5, retry_after=0.01), items)
    assert set(server.faulted) == set(rates)
    assert stormy == clean
    retries = [r for r in caplog.records if r.levelno == logging.INFO and "retrying" in r.getMessage()]
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(retries) >= len(server.faulted) - server.faulted.count("empty") > 50
    assert lines and all("server busy" in r.getMessage() for r in lines) and len(lines) <= 5


@pytest.mark.slow
def test_a_storm_of_cut_off_and_empty_answers_scores_every_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """429s, 500s, answers cut off at the token limit and empty ones: retried within the budget, all 400 scored."""
    from storyjudge.core import retry

    monkeypatch.setattr(retry, "BACKOFF_CAP", 1.0)
    rates = {"rate_limit": 0.2, "server_error": 0.2, "truncated": 0.15, "empty": 0.1}
    items = summaries(20, 20)
    clean, _ = coherence_run(tmp_path / "clean", None, items)
    stormy, server = coherence_run(tmp_path / "storm", FaultPlan(rates, seed=11, retry_after=0.01), items)
    assert server.faulted.count("truncated") > 50
    _, annotations = stormy
    assert len(annotations) == 400 and all(confused is not None for _, _, confused in annotations)
    assert stormy == clean


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("STORYJUDGE_PROGRESS", "0")
    return CliRunner()


def _jsonl(path: Path, items: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


@pytest.mark.slow
def test_a_sentence_the_server_never_answers_costs_that_sentence_only(
    scripted_server: Callable[..., OpenAIServer], runner: CliRunner, tmp_path: Path
) -> None:
    """500 forever for one sentence of 400: it is unscored (coverage 399/400), the output is written."""
    answer = original_prompt(coherence_responder)

    def responder(body: dict[str, Any]) -> Any:
        if "story 7, Mara repairs lamp number 13." in body["messages"][0]["content"].split("<sentence")[-1]:
            return {"status": 500, "error": "internal error"}
        return answer(body)

    server = scripted_server(responder)
    out = tmp_path / "out.json"
    args = ["coherence", str(_jsonl(tmp_path / "s.jsonl", summaries(20, 20))), "--out", str(out)]
    args += ["--base-url", server.base_url, "--model", "openai:scripted", "--concurrency", "8"]
    args += ["--set", f"cache_dir={tmp_path / 'cache'}", "--set", "retry_budget_s=1.5"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    assert (record["scored"], record["sentences"]) == (399, 400)
    failed = [a for s in record["summaries"] for a in s["annotations"] if a["confused"] is None]
    assert len(failed) == 1 and "no answer from the server" in failed[0]["error"]
    assert "retry_budget_s" in failed[0]["error"]


def _dead_url() -> str:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("command", ["refine", "score", "summarize", "index", "coherence", "doctor"])
def test_a_dead_server_is_named_at_once(command: str, runner: CliRunner, tmp_path: Path) -> None:
    story = tmp_path / "story.txt"
    story.write_text(STORY, encoding="utf-8")
    summary = tmp_path / "summary.txt"
    summary.write_text("Alice meets Bob at the harbour.", encoding="utf-8")
    given = {
        "refine": [str(story)],
        "score": [str(story), "--summary", str(summary)],
        "summarize": [str(story)],
        "index": [str(story)],
        "coherence": [str(summary)],
        "doctor": [],
    }[command]
    args = [
        command,
        *given,
        "--base-url",
        _dead_url(),
        "--model",
        "openai:any",
        "--run-dir",
        str(tmp_path / "r"),
    ]
    if command == "coherence":
        args = args[:-2]
    started = time.monotonic()
    result = runner.invoke(app, args)
    seconds = time.monotonic() - started
    assert result.exit_code == 1, result.output
    (line,) = _error_lines(result.output)
    assert "Cannot reach the model server at http://127.0.0.1" in line and "--base-url" in line
    assert seconds < 3, seconds
    assert "Models" not in result.output  # stopped before the run started
    assert not (tmp_path / "r").exists()  # a command that cannot make its first call claims no folder


def test_a_refused_key_and_an_unknown_model_are_named_before_the_run(
    scripted_server: Callable[..., OpenAIServer],
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = scripted_server(lambda body: "unused", model="served-model", strict_model=True, api_key="right")
    summary = tmp_path / "summary.txt"
    summary.write_text("Alice meets Bob at the harbour.", encoding="utf-8")
    args = ["coherence", str(summary), "--base-url", server.base_url, "--set", f"cache_dir={tmp_path / 'c'}"]
    monkeypatch.setenv("STORYJUDGE_API_KEY", "wrong")
    result = runner.invoke(app, [*args, "--model", "openai:served-model"])
    (line,) = _error_lines(result.output)
    assert result.exit_code == 1 and "refused the key (401" in line and "STORYJUDGE_API_KEY" in line
    monkeypatch.setenv("STORYJUDGE_API_KEY", "right")
    result = runner.invoke(app, [*args, "--model", "openai:other-model"])
    (line,) = _error_lines(result.output)
    assert result.exit_code == 1 and "has no model 'other-model'" in line and "served-model" in line
    assert server.completions == []


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (
            {"status": 400, "error": "This model's maximum context length is 8192 tokens."},
            "context_window is",
        ),
        ({"status": 401, "error": "invalid api key"}, "Check the key"),
        ({"status": 403, "error": "forbidden"}, "Check the key"),
        ({"status": 404, "error": "The model `x` does not exist."}, "Check the model name"),
    ],
)
def test_permanent_errors_are_one_request_and_one_line(
    reply: dict[str, Any],
    says: str,
    scripted_server: Callable[..., OpenAIServer],
    ctx_for: Callable[..., Context],
) -> None:
    server = scripted_server(lambda body: reply)
    with pytest.raises(ModelError, match=says) as raised:
        ask_text(ctx_for(server, retry_budget_s=60), "judge", _prompt(), [("user", "hi")])
    assert len(server.completions) == 1
    assert "\n" not in str(raised.value)


def test_a_server_gone_mid_run_stops_the_calls(
    scripted_server: Callable[..., OpenAIServer],
    ctx_for: Callable[..., Context],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every connection refused: the call ends after the gone window, not after its whole retry budget."""
    from storyjudge.core import retry

    monkeypatch.setattr(retry, "GONE_SECONDS", 1.0)
    server = scripted_server(lambda body: "fine")
    ctx = ctx_for(server, retry_budget_s=300)
    server.stop()
    started = time.monotonic()
    with pytest.raises(ModelError, match="Cannot reach the model server"):
        ask_text(ctx, "judge", _prompt(), [("user", "hi")])
    assert time.monotonic() - started < 5


def test_a_prompt_over_the_context_window_is_not_sent(
    scripted_server: Callable[..., OpenAIServer], runner: CliRunner, tmp_path: Path
) -> None:
    """A 1 MB "summary": one line naming the prompt, its tokens and context_window; no request at all."""
    server = scripted_server(original_prompt(coherence_responder))
    words = " ".join(f"Mara mends lamp {n} by the quay." for n in range(30000))
    path = _jsonl(tmp_path / "huge.jsonl", [{"id": "huge", "summary": words}])
    assert path.stat().st_size > 900_000
    args = ["coherence", str(path), "--base-url", server.base_url, "--model", "openai:scripted"]
    result = runner.invoke(app, [*args, "--set", f"cache_dir={tmp_path / 'c'}"])
    assert result.exit_code == 1, result.output
    (line,) = _error_lines(result.output)
    assert "The summary 'huge' is 359001 tokens, more than context_window (8192)" in line
    assert server.completions == []


def test_any_prompt_over_the_context_window_is_refused_unsent(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: "fine")
    scene = "Alice rows past the quay while Bob sleeps. " * 400
    with pytest.raises(
        ModelError, match=r"The reliability prompt for openai:scripted is \d+ tokens"
    ) as raised:
        ask_text(ctx_for(server, context_window=1024), "judge", _prompt(), [("user", scene)])
    assert "more than context_window (1024); not sent" in str(raised.value)
    assert server.completions == []


def test_the_openai_key_goes_to_openai_only(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_BASE_URL elsewhere: the Models table names that server and OPENAI_API_KEY never reaches it."""
    server = scripted_server(lambda body: "fine")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-own-key-0123456789")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    ctx = Context(model="openai:scripted", cache_dir=str(tmp_path / "c"))
    assert all(
        note == f"OpenAI-compatible server at {server.base_url}" for _, _, note in describe_models(ctx)
    )
    ask_text(ctx, "judge", _prompt(), [("user", "one")])
    monkeypatch.setenv("STORYJUDGE_API_KEY", "sk-server-key-0123456789")
    ask_text(ctx, "judge", _prompt(), [("user", "two")])
    assert [entry.authorization for entry in server.log] == [
        "Bearer not-needed",
        "Bearer sk-server-key-0123456789",
    ]


@pytest.mark.parametrize("template", ["No placeholders at all.", "Judge {{summary}} and {{unknown_field}}."])
def test_prompt_files_are_checked_before_the_first_call(
    template: str, scripted_server: Callable[..., OpenAIServer], runner: CliRunner, tmp_path: Path
) -> None:
    server = scripted_server(original_prompt(coherence_responder))
    prompt_dir = tmp_path / "prompts"
    prompt_dir.mkdir()
    (prompt_dir / "coherence.txt").write_text(f"version: mine\n---\n{template}\n", encoding="utf-8")
    summary = tmp_path / "summary.txt"
    summary.write_text("Alice meets Bob at the harbour. They sail.", encoding="utf-8")
    args = ["coherence", str(summary), "--base-url", server.base_url, "--model", "openai:scripted"]
    result = runner.invoke(
        app, [*args, "--prompt-dir", str(prompt_dir), "--set", f"cache_dir={tmp_path / 'c'}"]
    )
    assert result.exit_code == 1, result.output
    (line,) = _error_lines(result.output)
    assert "coherence.txt has the placeholders" in line and "'sentence'" in line
    assert server.completions == []


@pytest.mark.parametrize("resume", [False, True], ids=["new", "resume"])
@pytest.mark.parametrize("damage", ["schema", "older-langgraph", "pages"])
def test_a_broken_checkpoint_database_is_one_line(
    damage: str, resume: bool, scripted_server: Callable[..., OpenAIServer], runner: CliRunner, tmp_path: Path
) -> None:
    server = scripted_server(lambda body: "unused")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    database = run_dir / "checkpoints.sqlite"
    conn = sqlite3.connect(database)
    if damage == "schema":
        conn.execute("CREATE TABLE checkpoints (id INTEGER, data BLOB)")
    elif damage == "older-langgraph":  # its thread_ts where LangGraph now has checkpoint_ns, checkpoint_id
        conn.execute(
            "CREATE TABLE checkpoints (thread_id TEXT NOT NULL, thread_ts TEXT NOT NULL, parent_ts TEXT, "
            "checkpoint BLOB, metadata BLOB, PRIMARY KEY (thread_id, thread_ts))"
        )
        conn.execute("INSERT INTO checkpoints VALUES ('t', '1', NULL, x'00', x'00')")
    else:
        conn.execute("CREATE TABLE filler (x TEXT)")
        conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,)] * 200)
    conn.commit()
    conn.close()
    if damage == "pages":
        data = bytearray(database.read_bytes())
        data[4096 * 2 : 4096 * 2 + 200] = b"\xff" * 200  # a page in the middle, past the header
        database.write_bytes(bytes(data))
    story = tmp_path / "story.txt"
    story.write_text(STORY, encoding="utf-8")
    args = ["refine", str(story), "--run-dir", str(run_dir), "--base-url", server.base_url]
    result = runner.invoke(app, [*args, "--model", "openai:scripted", *(["--resume"] if resume else [])])
    assert result.exit_code == 1, result.output
    (line,) = _error_lines(result.output)
    assert "checkpoints.sqlite is not a checkpoint database" in line and "--run-dir" in line
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    if damage == "older-langgraph":
        assert "another LangGraph version" in line


def test_a_full_disk_is_one_line_naming_the_path(
    scripted_server: Callable[..., OpenAIServer],
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from storyjudge.core import callcache

    def full(*args: Any, **kwargs: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    for name in dir(callcache):
        cls = getattr(callcache, name)
        if isinstance(cls, type) and hasattr(cls, "put"):
            monkeypatch.setattr(cls, "put", full)
    server = scripted_server(original_prompt(coherence_responder))
    summary = tmp_path / "summary.txt"
    summary.write_text("Alice meets Bob at the harbour. They sail.", encoding="utf-8")
    cache = tmp_path / "cache"
    args = ["coherence", str(summary), "--base-url", server.base_url, "--model", "openai:scripted"]
    result = runner.invoke(app, [*args, "--set", f"cache_dir={cache}"])
    assert result.exit_code == 1, result.output
    (line,) = _error_lines(result.output)
    assert "The disk is full" in line and str(cache) in line and "openai:scripted failed" not in line


@pytest.mark.slow
def test_a_summarizer_step_that_keeps_failing_stops_the_run_with_its_resume_command(
    scripted_server: Callable[..., OpenAIServer],
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing goes on without the summary: the run stops, says how to continue, and the resume finishes."""
    from storyjudge.core.scripted_server import all_text
    from tests.scripted_story import StoryResponder

    story_answers = StoryResponder()
    broken = [True]

    def responder(body: dict[str, Any]) -> Any:
        summarizing = not body.get("response_format") and "You revise a summary" not in all_text(body)
        if broken[0] and summarizing and "causes any confusion" not in all_text(body):
            return {"status": 503, "error": "overloaded"}
        return story_answers(body)

    server = scripted_server(responder)
    story = tmp_path / "story.txt"
    story.write_text(STORY, encoding="utf-8")
    run_dir = tmp_path / "run"
    args = ["refine", str(story), "--run-dir", str(run_dir), "--base-url", server.base_url]
    args += ["--model", "openai:scripted", "--ckg-samples", "1", "--set", "retry_budget_s=1"]
    monkeypatch.setattr("sys.argv", ["storyjudge", *args])
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    (line,) = _error_lines(result.output)
    assert "503" in line and f"Finished work is checkpointed in {run_dir}" in line
    assert line.endswith(f"continue with: storyjudge {' '.join(args)} --resume")
    assert (
        "retrying after openai:scripted: OpenAIAPIError: Error code: 503" in (run_dir / "run.log").read_text()
    )
    extractions = story_answers.calls["extract"]
    broken[0] = False
    resumed = runner.invoke(app, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert story_answers.calls["extract"] == extractions  # the index was kept, not redone


def test_a_server_that_goes_away_mid_run_ends_it_quickly_keeping_the_answers(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stops after 40 answers of 400: the run ends within seconds, saying how a rerun continues."""
    import threading

    from storyjudge.core import retry

    monkeypatch.setattr(retry, "GONE_SECONDS", 1.0)
    answered = threading.Event()
    answer = original_prompt(coherence_responder)
    count = [0]

    def responder(body: dict[str, Any]) -> Any:
        count[0] += 1
        if count[0] == 40:
            answered.set()
        if count[0] > 40:  # the connections kept open die with the server; new ones are refused
            raise ConnectionAbortedError("the server is gone")
        return answer(body)

    server = OpenAIServer(responder, latency=0.05).start()

    def stop_when_answered() -> None:
        answered.wait(60)
        server.stop()

    threading.Thread(target=stop_when_answered, daemon=True).start()
    cache = tmp_path / "cache"
    args = [
        "coherence",
        str(_jsonl(tmp_path / "s.jsonl", summaries(20, 20))),
        "--out",
        str(tmp_path / "o.json"),
    ]
    args += ["--base-url", server.base_url, "--model", "openai:scripted", "--concurrency", "4"]
    monkeypatch.setattr("sys.argv", ["storyjudge", *args, "--set", f"cache_dir={cache}"])
    started = time.monotonic()
    result = runner.invoke(app, [*args, "--set", f"cache_dir={cache}"])
    assert result.exit_code == 1, result.output
    (line,) = _error_lines(result.output)
    assert "Cannot reach the model server" in line and f"Answers so far are cached in {cache}" in line
    assert "the same command again continues from them: storyjudge coherence" in line
    assert time.monotonic() - started < 30
    assert not (tmp_path / "o.json").exists() and count[0] >= 40


def test_a_summary_far_longer_than_summaries_asks_for_yes(runner: CliRunner, tmp_path: Path) -> None:
    """Within a large context window, a 100 KB "summary" still costs its length squared: --yes or nothing."""
    words = " ".join(f"Mara mends lamp {n} by the quay." for n in range(3000))
    path = _jsonl(tmp_path / "long.jsonl", [{"id": "long", "summary": words}])
    args = ["coherence", str(path), "--base-url", _dead_url(), "--model", "openai:any"]
    args += ["--set", "context_window=200000", "--set", f"cache_dir={tmp_path / 'c'}"]
    refused = runner.invoke(app, args)
    (line,) = _error_lines(refused.output)
    assert refused.exit_code == 1 and "far longer than a summary" in line and "--yes" in line
    allowed = runner.invoke(app, [*args, "--yes"])
    (line,) = _error_lines(allowed.output)
    assert allowed.exit_code == 1 and "Cannot reach the model server" in line  # past the check


def test_an_experiment_names_a_dead_server_before_its_first_item(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "experiment.yaml"
    config.write_text(
        f"name: dead\nout_dir: {tmp_path / 'out'}\ntask: score\nmetrics: [factscore]\n"
        "datasets:\n  - {kind: storysumm, path: 'storysumm:val', limit: 1}\n"
        f"models: ['openai:any']\ncontext: {{base_url: '{_dead_url()}'}}\n",
        encoding="utf-8",
    )
    started = time.monotonic()
    result = runner.invoke(app, ["eval", "run", str(config)])
    seconds = time.monotonic() - started
    assert result.exit_code == 1, result.output
    (line,) = _error_lines(result.output)
    assert "Cannot reach the model server at http://127.0.0.1" in line
    assert seconds < 3, seconds
    assert not (tmp_path / "out" / "rows.jsonl").exists()  # no item was started
