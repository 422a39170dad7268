"""result.json is typed (``core.runrecord``): one reader, one migration, one line when a record is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

import storyjudge
from storyjudge.apps.cli import app
from storyjudge.core.keptruns import keep_run, story_runs
from storyjudge.core.runrecord import SCHEMA_FILE, SCHEMA_VERSION, Run, RunRecordError, load_run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_run" / "result.json"
SCORED = Path(__file__).resolve().parents[1] / "fixtures" / "score_run" / "result.json"


def test_the_shipped_schema_is_the_one_the_models_generate() -> None:
    shipped = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert shipped == Run.model_json_schema(), (
        "result.schema.json is stale: run "
        "python -c 'from storyjudge.core.runrecord import write_schema; write_schema()'"
    )
    assert shipped["properties"]["iterations"]["type"] == "array"


def test_an_old_record_loads_through_the_migration_unchanged(tmp_path: Path) -> None:
    old = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert "schema_version" not in old  # written before the record was versioned
    run = storyjudge.load_run(FIXTURE)
    assert run.schema_version == SCHEMA_VERSION and [r.iteration for r in run.iterations] == [0, 1]
    assert run.iterations[1].factscore.score == pytest.approx(8 / 9)
    assert run.record() == {**old, "schema_version": SCHEMA_VERSION}  # nothing added, nothing lost
    jsonschema.validate(run.record(), Run.model_json_schema())
    kept = keep_run(tmp_path, "refine-1", old).root
    assert load_run(kept).record()["best_summary"] == old["best_summary"]  # a run folder, or its result.json


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"iterations": "abc"}, "iterations"),
        ({"iterations": [{"iteration": 0, "summary": "s", "factscore": {"score": "high"}}]}, "iterations.0"),
        ({"schema_version": SCHEMA_VERSION + 1}, "newer storyjudge"),
    ],
)
def test_a_record_of_the_wrong_shape_is_one_line_naming_file_and_field(
    tmp_path: Path, change: dict, field: str
) -> None:
    bad = tmp_path / "result.json"
    bad.write_text(json.dumps({**json.loads(FIXTURE.read_text(encoding="utf-8")), **change}))
    with pytest.raises(RunRecordError) as raised:
        load_run(bad)
    message = str(raised.value)
    assert str(bad) in message and field in message and "\n" not in message


def test_commands_reading_a_wrong_record_say_so_in_one_line(tmp_path: Path) -> None:
    record = {**json.loads(FIXTURE.read_text(encoding="utf-8")), "iterations": "abc"}
    good = keep_run(tmp_path, "refine-1", json.loads(FIXTURE.read_text(encoding="utf-8"))).root
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "result.json").write_text(json.dumps(record))
    runner = CliRunner()
    for args in (["compare", str(bad / "result.json"), str(good)], ["report", str(bad)]):
        done = runner.invoke(app, args)
        lines = done.output.strip().splitlines()
        assert done.exit_code != 0 and 1 <= len(lines) <= 2, done.output
        assert "Traceback" not in done.output and "'iterations'" in done.output
        assert done.exception is None or isinstance(done.exception, SystemExit)
    (tmp_path / "runs" / "wrong").mkdir()
    (tmp_path / "runs" / "wrong" / "result.json").write_text(json.dumps(record))
    assert [r["id"] for r in story_runs(tmp_path)] == ["refine-1"]  # the run list leaves it out


def test_a_scored_run_with_planted_facts_reads_typed() -> None:
    """A record ``score examples/macbeth-witches.md --summary S`` wrote (scripted models, planting on)."""
    written = json.loads(SCORED.read_text(encoding="utf-8"))
    run = load_run(SCORED)
    assert run.record() == written and written["schema_version"] == SCHEMA_VERSION
    jsonschema.validate(written, json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    card = run.iterations[0].factscore
    check = card.judge_check
    assert check is not None and check.decision == "passed" and check.true.planted == 4
    assert check.false_acceptance_ci95 == pytest.approx([0.0, 0.409616]) and check.true_acceptance_ci95
    assert card.score_ci95 == [0.0, 1.0] and card.score_corrected == 1.0 and card.score_corrected_ci95
    assert run.iterations[0].factscore.verdicts[0].evidence is not None
    assert run.usage.total.calls == 21 and run.scores[0].nfs == pytest.approx(2 / 3)


def test_a_judge_check_recorded_before_the_decision_rule_still_loads(tmp_path: Path) -> None:
    tally = {"planted": 2, "judged": 2, "accepted": 1}
    old = {
        **{"planted": 6, "easy": tally, "hard": tally, "true": tally, "false_acceptance": 0.5},
        **{"true_acceptance": 0.5, "max_false_acceptance": 0.34, "passed": False, "verdicts": []},
        "note": "the judge accepted 2 of 4 planted false facts",
    }
    record = json.loads(FIXTURE.read_text(encoding="utf-8"))
    record["iterations"][0]["factscore"]["judge_check"] = old
    (tmp_path / "result.json").write_text(json.dumps(record))
    run = load_run(tmp_path)
    check = run.iterations[0].factscore.judge_check
    assert (
        check is not None and check.decision is None and check.passed is False
    )  # readers fall back on passed
    assert (
        run.record()["iterations"][0]["factscore"]["judge_check"] == old
    )  # its old threshold kept as it was
