"""The web UI drives the refine graph: its rounds are the graph's, and result.json is the finish node's.

Over real HTTP to the scripted model: the UI's four steps (and a second refinement) on the scripted story give
the same iterations, guard decisions and stop reason as one ``graphs.refine`` invocation with the same settings;
while the UI's thread is paused there is no result.json, and once the loop stops the run record is the one the
graph's ``finish`` node writes (kind "refine"), after which the refine step is refused with the stop reason.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphs.refine import build_graph
from storyjudge.apps.ui.session import RunSession, RunStore
from storyjudge.apps.ui.steps import STEPS, StepRefused, check_step, run_step
from storyjudge.core.context import Context
from storyjudge.core.scripted_server import OpenAIServer
from tests.integration.test_refine_guards import DELETED, KEPT_WRONG, RefinerSays
from tests.scripted_story import FIRST_SUMMARY, FIXED_SUMMARY, STORY


def _rounds(iterations: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a round decided: its summary, score, acceptance, note and guard record."""
    return [
        (it["iteration"], it["summary"], it["factscore"]["score"], it["accepted"], it["note"], it["guard"])
        for it in sorted(iterations, key=lambda i: i["iteration"])
    ]


def _session(server: OpenAIServer, tmp_path: Path) -> RunSession:
    store = RunStore(tmp_path / "runs")
    settings = {"model": "openai:scripted", "base_url": server.base_url, "ckg_samples": 1}
    return store.create("story", STORY, "test", settings)


def _graph_run(server: OpenAIServer, tmp_path: Path) -> dict[str, Any]:
    """The reference: the refine graph in one invocation, with the UI's settings."""
    ctx = Context(
        model="openai:scripted", base_url=server.base_url, run_dir=str(tmp_path / "graph"), ckg_samples=1
    )
    out: dict[str, Any] = build_graph().invoke({"document": STORY, "title": "story"}, context=ctx)
    return out


@pytest.mark.parametrize(
    ("answers", "patience", "refinements"),
    [((DELETED,), "1", 1), ((KEPT_WRONG, FIXED_SUMMARY), "2", 2)],
    ids=["guard-rejects-then-saturated", "rejected-then-target-reached"],
)
def test_the_ui_refine_steps_are_the_refine_graphs_rounds(
    scripted_server: Callable[..., OpenAIServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answers: tuple[str, ...],
    patience: str,
    refinements: int,
) -> None:
    monkeypatch.setenv("STORYJUDGE_PATIENCE", patience)
    reference = _graph_run(scripted_server(RefinerSays(*answers)), tmp_path)
    session = _session(scripted_server(RefinerSays(*answers)), tmp_path)
    events: list[dict[str, Any]] = []
    for step in STEPS[:3]:
        run_step(session, step, events.append)
    assert session.state["next"] == ["refine"]  # paused before the first refinement
    result = session.rd.root / "result.json"
    assert not result.exists()  # nothing has stopped: no run record yet ...
    assert "paused in the web UI" in (session.rd.root / "report.html").read_text()  # ... but a report
    for _ in range(refinements):
        check_step(session, "refine")
        run_step(session, "refine", events.append)
    stages = {event["stage"] for event in events}
    assert {"extract", "index", "summarize", "decompose", "retrieve", "judge", "refine"} <= stages

    assert _rounds(session.state["iterations"]) == _rounds(reference["iterations"])
    assert session.state["stop_reason"] == reference["stop_reason"] != ""
    record = json.loads(result.read_text())
    assert record["kind"] == "refine"  # written by the graph's finish node
    assert _rounds(record["iterations"]) == _rounds(reference["iterations"])
    assert record["stop_reason"] == reference["stop_reason"]
    assert record["best_iteration"] == reference["best_iteration"]
    assert record["best_summary"] == reference["summary"]
    assert reference["stop_reason"] in html.unescape((session.rd.root / "report.html").read_text())
    with pytest.raises(StepRefused, match="refinement loop has stopped: " + reference["stop_reason"][:9]):
        check_step(session, "refine")


def test_scoring_again_forks_the_thread_and_drops_the_stale_record(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    session = _session(scripted_server(RefinerSays(FIXED_SUMMARY)), tmp_path)
    for step in STEPS:
        run_step(session, step, lambda event: None)
    result = session.rd.root / "result.json"
    assert json.loads(result.read_text())["stop_reason"].startswith("target reached")
    thread = session.state["thread"]

    run_step(session, "score", lambda event: None)  # from the checkpoint before the first factscore
    assert session.state["thread"] == thread and session.state["next"] == ["refine"]
    assert [it["iteration"] for it in session.state["iterations"]] == [0]
    assert session.state["summary"]["text"] == FIRST_SUMMARY
    assert not result.exists()  # the finished branch's record no longer describes the run

    run_step(session, "refine", lambda event: None)
    record = json.loads(result.read_text())
    assert [s["nfs"] for s in record["scores"]] == [pytest.approx(2 / 3, abs=1e-3), 1.0]
    assert record["kind"] == "refine" and record["best_summary"] == FIXED_SUMMARY
