"""Reference-based metrics: ROUGE by hand, multi-reference choice, set aggregation, BERTScore availability."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.metrics import BERTSCORE_MODEL_ENV, aggregate, bertscore, bertscore_status, rouge_item


def test_rouge_by_hand() -> None:
    # 4 of 6 unigrams shared ("cat", "sat", "on", "mat"): P = R = F = 2/3; bigrams "cat sat", "sat on": 2 of 5
    item = rouge_item("the cat sat on the mat", ["a cat sat on a mat"])
    assert item["rouge1"]["f1"] == pytest.approx(2 / 3)
    assert item["rouge2"]["f1"] == pytest.approx(2 / 5)
    assert item["rougeL"]["f1"] == pytest.approx(2 / 3)


def test_rouge_keeps_the_best_reference_and_the_mean() -> None:
    item = rouge_item("ann sails to the island", ["bo runs home", "ann sails to the island"])
    assert item["rouge1"]["f1"] == 1.0
    assert item["rouge1"]["f1_mean_over_refs"] == pytest.approx(0.5)
    assert item["references"] == 2
    with pytest.raises(ValueError, match="at least one non-empty reference"):
        rouge_item("x", ["  "])


def test_aggregate_counts_missing_values_apart() -> None:
    result = aggregate([0.2, None, 0.4, float("nan"), 0.6], seed=1)
    assert result["n"] == 3 and result["missing"] == 2
    assert result["mean"] == pytest.approx(0.4)
    low, high = result["ci95"]
    assert 0.2 <= low <= 0.4 <= high <= 0.6
    assert result["per_item"][1] is None
    assert aggregate([])["mean"] is None


def test_bertscore_says_why_it_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BERTSCORE_MODEL_ENV, raising=False)
    result = bertscore(["a"], [["b"]])
    assert result["available"] is False and BERTSCORE_MODEL_ENV in result["reason"]
    assert "nothing is downloaded" in result["reason"]
    monkeypatch.setenv(BERTSCORE_MODEL_ENV, str(tmp_path))
    status = bertscore_status()
    assert status["available"] is False and "no config.json" in status["reason"]
