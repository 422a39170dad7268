"""A story's runs are kept beside each other; a run or one of its rounds is named RUN or RUN#N."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storyjudge.core.keptruns import RunRef, keep_run, load_summary, new_run_id, story_runs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_run" / "result.json"


def _record() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_runs_are_kept_beside_each_other(tmp_path: Path) -> None:
    first = keep_run(tmp_path, "ui-1", {**_record(), "created": "2026-01-01T00:00:00Z"})
    given = {**_record(), "created": "2026-01-02T00:00:00Z", "summary_source": "given"}
    given["iterations"] = given["iterations"][:1]
    given["best_iteration"] = 0
    keep_run(tmp_path, "ui-2", given)
    rows = story_runs(tmp_path)
    assert [r["id"] for r in rows] == ["ui-2", "ui-1"]  # newest first, the first still there
    assert rows[1]["rounds"] == 2 and rows[1]["nfs"] == pytest.approx(8 / 9) and rows[1]["best_round"] == 1
    assert rows[0]["rounds"] == 1 and rows[0]["nfs"] == 0.625 and rows[0]["summarizer"] == ""
    assert rows[1]["judge"] == "openai:gpt-4o-mini" and rows[1]["words"] > 10
    assert (first.root / "summary.txt").read_text().startswith(_record()["best_summary"].strip())
    assert json.loads(first.result.read_text())["run_id"] == "ui-1"
    (tmp_path / "runs" / "broken").mkdir()
    (tmp_path / "runs" / "broken" / "result.json").write_text("{not json")
    assert len(story_runs(tmp_path)) == 2


def test_run_ids_are_checked_and_new_ones_differ(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Invalid run id"):
        keep_run(tmp_path, "../escape", _record())
    assert new_run_id("ui") != new_run_id("ui") and new_run_id("refine").startswith("refine-")


def test_a_reference_names_a_round(tmp_path: Path) -> None:
    keep_run(tmp_path, "r1", _record())
    run = tmp_path / "runs" / "r1"
    assert RunRef.parse(f"{run}#0") == RunRef(run, 0)
    assert load_summary(RunRef.parse(str(run))).round["iteration"] == 1  # the best round
    assert load_summary(RunRef.parse(f"{run}/result.json#0")).round["iteration"] == 0
    assert RunRef.parse(f"{run}#0").label == "r1#0"
    with pytest.raises(ValueError, match="round number"):
        RunRef.parse(f"{run}#best")
    with pytest.raises(ValueError, match="its rounds are 0, 1"):
        load_summary(RunRef(run, 5))
    with pytest.raises(ValueError, match="no result.json"):
        load_summary(RunRef(tmp_path / "nothing"))
