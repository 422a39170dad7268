"""The web UI keeps every scored summary of a story as a run of its own, and compares them (over HTTP).

The UI server runs in-process on a free loopback port; its model is the scripted OpenAI-compatible server
playing every role on the witches' scenes of Macbeth (the browser tests' responder): its first summary claims
a murder, the judge flags it, the refiner fixes it. Then a summary of one's own is scored: the generated run and
its two rounds must remain beside it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from storyjudge.apps.ui.server import UIServer
from storyjudge.core.scripted_server import OpenAIServer
from tests.integration.test_browser import FIRST_SUMMARY, MacbethResponder, _raw_get, _request

OWN = FIRST_SUMMARY.replace("Macbeth and Banquo meet three witches", "Three witches greet Macbeth and Banquo")


def _step(ui: UIServer, name: str, step: str, body: dict[str, Any]) -> dict[str, Any]:
    status, answer = _request(ui, "POST", f"/api/runs/{name}/steps/{step}", body)
    assert status == 202, answer
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        _, job = _request(ui, "GET", f"/api/runs/{name}/job")
        if job["job"]["status"] != "running":
            assert job["job"]["status"] == "done", job
            break
        time.sleep(0.2)
    status, view = _request(ui, "GET", f"/api/runs/{name}")
    assert status == 200
    return view


@pytest.mark.slow
def test_a_story_keeps_every_run_and_compares_them(ui: UIServer, tmp_path: Path) -> None:
    with OpenAIServer(MacbethResponder()) as model:
        settings = {"model": "openai:scripted", "base_url": model.base_url, "ckg_samples": 1}
        status, view = _request(ui, "POST", "/api/runs", {"example": "macbeth-witches", "settings": settings})
        assert status == 201 and view["runs"] == []
        name = view["name"]
        _step(ui, name, "graph", {"settings": settings})
        _step(ui, name, "summary", {"settings": settings})
        view = _step(ui, name, "score", {"settings": settings})
        generated = view["run_id"]
        assert [r["id"] for r in view["runs"]] == [generated] and view["runs"][0]["rounds"] == 1
        view = _step(ui, name, "refine", {"settings": settings})
        assert view["run_id"] == generated and view["runs"][0]["rounds"] == 2  # a round of the same run

        _step(ui, name, "summary", {"settings": settings, "summary": OWN})
        view = _step(ui, name, "score", {"settings": settings})
    own = view["run_id"]
    assert own != generated and len(view["iterations"]) == 1
    runs = {r["id"]: r for r in view["runs"]}
    assert set(runs) == {generated, own}  # nothing replaced
    assert runs[generated]["rounds"] == 2 and runs[generated]["summary_source"] == "generated"
    assert runs[generated]["nfs"] == 1.0 and runs[generated]["best_round"] == 1
    assert (
        runs[own]["rounds"] == 1 and runs[own]["summary_source"] == "given" and runs[own]["summarizer"] == ""
    )
    assert runs[own]["judge"] == "openai:scripted" and runs[own]["coverage"] == 1.0
    kept = tmp_path / "runs" / name / "runs"
    rounds = json.loads((kept / generated / "result.json").read_text())["iterations"]
    assert [it["factscore"]["score"] for it in rounds] == [0.8, 1.0]
    _, saved = _request(ui, "GET", "/api/runs")
    assert saved[0]["runs"] == 2

    status, headers, page = _raw_get(ui, f"/runs/{name}/runs/{generated}/report.html")
    assert status == 200 and b"great hall" in page and "script-src" in headers["content-security-policy"]
    assert _raw_get(ui, f"/runs/{name}/runs/nothing-here/report.html")[0] == 404
    (kept / "wrong-shape").mkdir()
    (kept / "wrong-shape" / "result.json").write_text(json.dumps({"iterations": "abc"}))
    status, _, page = _raw_get(ui, f"/runs/{name}/runs/wrong-shape/report.html")
    assert status == 422 and b"field 'iterations'" in page  # one line naming the file and the field
    status, answer = _request(ui, "GET", f"/api/runs/{name}/compare?runs={generated}&runs=wrong-shape")
    assert status == 400 and "field 'iterations'" in str(answer)
    listed = {r["id"] for r in _request(ui, "GET", f"/api/runs/{name}")[1]["runs"]}
    assert listed == {generated, own}  # the run list leaves the unreadable record out

    query = f"runs={generated}%230&runs={generated}&runs={own}"
    status, result = _request(ui, "GET", f"/api/runs/{name}/compare?{query}")
    assert status == 200
    assert [s["nfs"]["score"] for s in result["summaries"]] == [0.8, 1.0, 0.8]
    refined, mine = result["pairs"]
    assert refined["nfs"]["difference"] == pytest.approx(0.2) and refined["comparable"]
    assert [f["fact"]["text"] for f in refined["only_b"]] == [
        "Macbeth resolves to murder Duncan in his chamber that night."
    ]
    assert refined["only_b"][0]["counterpart"]["verdict"] == "unsupported"
    assert mine["only_a"] == [] and mine["only_b"] == []  # the same facts, reworded: aligned as the same
    status, _, html = _raw_get(ui, f"/runs/{name}/compare.html?{query}")
    assert status == 200 and b"Differences" in html
    status, answer = _request(ui, "GET", f"/api/runs/{name}/compare?runs={generated}")
    assert status == 400 and "two or more" in answer["error"]
    status, answer = _request(ui, "GET", f"/api/runs/{name}/compare?runs=..%2Fx&runs={own}")
    assert status == 400

    ui.store.open(name).update(
        run_id=None
    )  # as a run scored before runs were kept: a new step keeps it first
    with OpenAIServer(MacbethResponder()) as model:
        settings = {"model": "openai:scripted", "base_url": model.base_url, "ckg_samples": 1}
        view = _step(ui, name, "summary", {"settings": settings, "summary": OWN})
    assert len(view["runs"]) == 3 and view["runs"][0]["summary_source"] == "given"
    assert view["runs"][0]["rounds"] == 1 and view["runs"][0]["nfs"] == 0.8


@pytest.mark.slow
def test_a_person_corrects_a_verdict_and_the_refiner_reads_it(ui: UIServer, tmp_path: Path) -> None:
    reason = "Banquo is not named in these scenes; say who meets the witches."
    with OpenAIServer(MacbethResponder()) as model:
        settings = {"model": "openai:scripted", "base_url": model.base_url, "ckg_samples": 1}
        _, view = _request(ui, "POST", "/api/runs", {"example": "macbeth-witches", "settings": settings})
        name = view["name"]
        _step(ui, name, "graph", {"settings": settings})
        _step(ui, name, "summary", {"settings": settings})
        view = _step(ui, name, "score", {"settings": settings})
        assert view["iterations"][0]["score"] == 0.8
        state = json.loads((tmp_path / "runs" / name / "ui.json").read_text())
        verdicts = state["iterations"][0]["factscore"]["verdicts"]
        fact = next(v["fact"] for v in verdicts if v["fact"]["text"].startswith("Macbeth and Banquo meet"))
        body = {"iteration": 0, "fact_id": fact["id"], "verdict": "unsupported", "reason": "  "}
        status, answer = _request(ui, "POST", f"/api/runs/{name}/corrections", body)
        assert status == 400 and "Say why" in answer["error"]
        status, view = _request(ui, "POST", f"/api/runs/{name}/corrections", {**body, "reason": reason})
        assert status == 200
        shown = view["iterations"][0]
        assert shown["score"] == pytest.approx(0.6) and shown["corrections"] == 1
        assert "with 1 correction" in shown["html"] and reason in shown["html"]
        kept = json.loads((tmp_path / "runs" / name / "runs" / view["run_id"] / "result.json").read_text())
        (record,) = kept["corrections"]
        assert record["who"] == "a person" and record["verdict"] == "unsupported" and record["when"]
        card = kept["iterations"][0]["factscore"]
        assert card["corrections"] == 1 and card["score"] == pytest.approx(0.6)
        marked = next(v for v in card["verdicts"] if v["fact"]["id"] == fact["id"])
        assert marked["correction"]["old"] == "supported" and marked["correction"]["new"] == "unsupported"

        view = _step(ui, name, "refine", {"settings": settings})
        refiner = [b for b in model.completions if "You revise a summary" in json.dumps(b)]
        assert refiner and reason in json.dumps(refiner[-1])  # the refiner saw the person's verdict
        assert [it["iteration"] for it in view["iterations"]] == [0, 1]
        assert view["iterations"][0]["corrections"] == 1  # the corrected round stays corrected

    status, result = _request(
        ui, "GET", f"/api/runs/{name}/compare?runs={view['run_id']}%230&runs={view['run_id']}"
    )
    assert status == 200
    first = result["summaries"][0]
    assert first["corrections"] == 1 and first["nfs"]["score"] == pytest.approx(0.6)
    assert first["nfs_without_corrections"]["score"] == pytest.approx(0.8)


def test_a_step_names_a_dead_model_server_before_it_starts(ui: UIServer) -> None:
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    settings = {"model": "openai:scripted", "base_url": dead, "ckg_samples": 1}
    status, view = _request(ui, "POST", "/api/runs", {"example": "macbeth-witches", "settings": settings})
    assert status == 201
    started = time.monotonic()
    status, answer = _request(ui, "POST", f"/api/runs/{view['name']}/steps/graph", {"settings": settings})
    assert status >= 400 and "Cannot reach the model server at http://127.0.0.1" in json.dumps(answer)
    assert time.monotonic() - started < 3
