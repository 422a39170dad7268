"""An experiment's careless inputs: mistyped config values are one line, item ids are strings or integers, and
no two ids share a record file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.datasets import _read_records
from eval.grid import ExperimentConfig, load_config
from eval.runner import record_name
from storyjudge.core.context import ConfigError


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("budget", [1], "budget must be a mapping"),
        ("context", [1, 2], "context must be a mapping"),
        ("loops", [5], r"loops\[0\] must be a mapping"),
        ("loops", {"max_iterations": 2}, "loops must be a list"),
        ("seed", [1], "seed must be an integer"),
        ("concurrency", "many", "concurrency must be an integer"),
        ("budget", {"max_calls": "lots"}, "budget.max_calls must be a number"),
    ],
)
def test_mistyped_config_values_are_one_clear_error(key: str, value: Any, says: str, tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text("[]", encoding="utf-8")
    config = {"task": "score", "datasets": [{"kind": "storysumm", "path": str(data)}], key: value}
    with pytest.raises(ConfigError, match=says) as raised:
        ExperimentConfig.from_dict(config)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("datasets: [{kind: squality, limit: one}]", r"datasets\[0\]\.limit must be an integer, not 'one'"),
        (
            "datasets: {kind: squality}",
            r"datasets must be a list \(e\.g\. datasets: \[\{'kind': 'squality'\}\]\), not \{'kind': 'squality'\}",
        ),
        (
            "datasets: [{kind: squality, limits: 2}]",
            r"there is no setting 'datasets\[0\]\.limits'; did you mean limit",
        ),
        ("datasets: [squality]\ntask: scoring", r"task must be 'refine' or 'score', not 'scoring'"),
        (
            "datasets: [squality]\nbudget: {max_calls: 5, usd: 1}",
            r"budget key 'usd' must be 'max_calls' or 'max_usd'",
        ),
        ("datasets: [squality]\nconcurrency: 0", r"concurrency must be >= 1, not 0"),
        (
            "datasets: [squality]\ncontext: {nfs_unjudged: maybe}",
            r"invalid setting: nfs_unjudged must be 'exclude' or 'unsupported', not 'maybe'",
        ),
        ("models: [local:smollm2]", r"datasets is missing \(the datasets to run, e\.g\. datasets: \["),
        ("datasets: [squality\n", r"is not valid YAML"),
    ],
)
def test_a_bad_config_file_is_one_line_naming_the_file_the_field_and_what_it_takes(
    text: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "experiment.yaml"
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=says) as raised:
        load_config(path)
    assert str(raised.value).startswith(str(path)) and "\n" not in str(raised.value)


def test_record_names_never_collide() -> None:
    ids = ["x", "X", "../../x", "a/b", "a-b", "1"]
    names = [record_name(item_id) for item_id in ids]
    assert len(set(names)) == len(ids)
    assert names[0].startswith("x-") and names[2].startswith("x-") and "/" not in names[2]
    assert record_name("x") == record_name("x")


@pytest.mark.parametrize("bad", ["null", '{"x": 1}', "NaN", "true", '""'])
def test_ids_must_be_strings_or_integers(bad: str, tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text(f'[{{"id": {bad}, "story": "s"}}]', encoding="utf-8")
    with pytest.raises(ValueError, match="is not a non-empty string or an integer"):
        _read_records(path)


def test_string_and_integer_ids_are_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps([{"id": 7}, {"id": "a/b"}, {"uid": "u"}, {}]), encoding="utf-8")
    assert [item_id for item_id, _ in _read_records(path)] == ["7", "a/b", "u", "3"]
