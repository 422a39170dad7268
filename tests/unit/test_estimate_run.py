"""A run's dry run: linear in rounds (the summary never grows past its budget), no overflow, a wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.estimate import estimate_run
from storyjudge.core.context import Context

STORY = (Path(__file__).resolve().parents[2] / "examples" / "macbeth-witches.md").read_text(encoding="utf-8")


def high_calls(rounds: int) -> int:
    return int(estimate_run(Context(max_iterations=rounds), "refine", STORY)["high"]["calls"])


def test_the_high_end_grows_linearly_in_rounds_and_never_overflows() -> None:
    per_round = high_calls(101) - high_calls(100)
    assert per_round > 0 and high_calls(1000) - high_calls(999) == per_round  # the summary at its cap
    assert high_calls(1000) < 1_000_000  # not 8.97e44: each round adds the same calls
    huge = estimate_run(Context(max_iterations=100_000), "refine", STORY)  # no OverflowError
    assert huge["high"]["calls"] == high_calls(1000) + 99_000 * per_round
    assert json.dumps(huge)  # every figure a finite number


def test_wall_time_from_the_calls_answered_in_the_storys_folder(tmp_path: Path) -> None:
    ctx = Context(model="openai:served", base_url="http://127.0.0.1:9/v1", max_iterations=1, concurrency=2)
    assumed = estimate_run(ctx, "refine", STORY, run_dir=tmp_path)["wall_seconds"]
    assert assumed["basis"] and all(line.startswith("assumed for openai:served") for line in assumed["basis"])
    assert 0 < assumed["low"] < assumed["high"]
    lines = [{"spec": "openai:served", "event": "sent"}] + [
        {"spec": "openai:served", "event": "answer", "in": 10, "out": 5, "s": seconds}
        for seconds in [1.0] * 9 + [10.0]
    ]
    (tmp_path / "usage.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    measured = estimate_run(ctx, "refine", STORY, run_dir=tmp_path)
    wall = measured["wall_seconds"]
    assert wall["basis"] == [f"measured: 10 answered request(s) of openai:served in {tmp_path}"]
    # each end: its calls times the 10th / 90th percentile of the measured seconds, 2 calls at once
    assert wall["low"] == pytest.approx(measured["low"]["calls"] * 1.0 / 2, abs=1)
    assert wall["high"] == pytest.approx(measured["high"]["calls"] * 10.0 / 2, abs=1)
