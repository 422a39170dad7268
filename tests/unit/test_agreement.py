"""Agreement statistics on hand-computed cases: kappa, balanced accuracy, tau-b with ties, bootstrap."""

from __future__ import annotations

import math

import pytest

from eval.agreement import (
    balanced_accuracy,
    bootstrap_ci,
    classification_table,
    cohens_kappa,
    confusion,
    correlation_table,
    f1,
    kendall,
    precision,
    recall,
    roc_auc,
    spearman,
    threshold_sweep,
)

# tp = 3 (items 0, 4, 8), fp = 2 (1, 9), fn = 1 (5), tn = 4 (2, 3, 6, 7)
PRED = [1, 1, 0, 0, 1, 0, 0, 0, 1, 1]
GOLD = [1, 0, 0, 0, 1, 1, 0, 0, 1, 0]


def test_confusion_counts() -> None:
    assert confusion(PRED, GOLD) == {"tp": 3, "fp": 2, "fn": 1, "tn": 4}


def test_kappa_by_hand() -> None:
    # observed 0.7; chance 0.5 * 0.4 + 0.5 * 0.6 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert cohens_kappa(PRED, GOLD) == pytest.approx(0.4)


def test_kappa_edges() -> None:
    assert cohens_kappa(GOLD, GOLD) == pytest.approx(1.0)
    # always predicting "unfaithful" agrees exactly as often as chance does
    assert cohens_kappa([1] * 10, GOLD) == pytest.approx(0.0)
    # systematic disagreement is below chance
    kappa = cohens_kappa([1 - g for g in GOLD], GOLD)
    assert kappa is not None and kappa < 0
    # both raters constant and identical: 0/0
    assert cohens_kappa([0, 0, 0], [0, 0, 0]) is None


def test_balanced_accuracy_by_hand() -> None:
    # recall on unfaithful 3/4, on faithful 4/6
    assert balanced_accuracy(PRED, GOLD) == pytest.approx((3 / 4 + 4 / 6) / 2)
    # a constant predictor is at chance whatever the class balance
    assert balanced_accuracy([1] * 10, GOLD) == pytest.approx(0.5)
    assert balanced_accuracy([0, 1], [1, 1]) is None  # one class only: undefined, not plain accuracy


def test_precision_recall_f1_on_unfaithful_class() -> None:
    assert precision(PRED, GOLD) == pytest.approx(3 / 5)
    assert recall(PRED, GOLD) == pytest.approx(3 / 4)
    assert f1(PRED, GOLD) == pytest.approx(2 * 0.6 * 0.75 / 1.35)
    assert precision([0, 0], [1, 0]) is None
    assert recall([1, 0], [0, 0]) is None


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        cohens_kappa([1, 0], [1])


def test_kendall_tau_b_with_ties() -> None:
    # 6 pairs: 3 concordant, 0 discordant, 1 tied in x, 2 tied in y -> tau-b = 3 / sqrt(5 * 4)
    # (tau-a, which ignores ties, would be 3 / 6)
    result = kendall([1, 2, 2, 3], [1, 1, 2, 2])
    assert result["tau"] == pytest.approx(3 / math.sqrt(20))
    assert result["p"] is not None and 0 < result["p"] <= 1


def test_spearman_with_a_tie_by_hand() -> None:
    # ranks of y: [1, 2, 3.5, 5, 3.5]; Pearson of ranks = 8 / sqrt(10 * 9.5)
    result = spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7])
    assert result["rho"] == pytest.approx(8 / math.sqrt(95))
    assert result["p"] is not None


def test_correlations_undefined_on_constant_input() -> None:
    assert spearman([0.5, 0.5, 0.5], [1, 0, 1]) == {"rho": None, "p": None}
    assert kendall([1, 0, 1], [1, 1, 1]) == {"tau": None, "p": None}


def test_bootstrap_is_reproducible_with_a_seed() -> None:
    values = [0.1, 0.4, 0.35, 0.8, 0.9, 0.2, 0.65, 0.5]

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    first = bootstrap_ci(mean, values, seed=7)
    again = bootstrap_ci(mean, values, seed=7)
    other = bootstrap_ci(mean, values, seed=8)
    assert first["ci95"] == again["ci95"]
    assert first["ci95"] != other["ci95"]
    low, high = first["ci95"]
    assert low < mean(values) < high
    assert min(values) <= low and high <= max(values)


def test_bootstrap_counts_undefined_resamples() -> None:
    # with one unfaithful item among 6, many resamples lack it and balanced accuracy is undefined there
    pred, gold = [1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]
    result = bootstrap_ci(balanced_accuracy, pred, gold, resamples=200, seed=0)
    assert result["undefined"] > 0
    assert result["ci95"] == [1.0, 1.0]


def test_cluster_bootstrap_resamples_groups() -> None:
    # two groups: one all-correct, one all-wrong; resampling groups gives accuracy 0, 0.5 or 1 only
    pred = [1, 1, 1, 0, 0, 0]
    gold = [1, 1, 1, 1, 1, 1]
    seen = set()

    def share(p: list[int], g: list[int]) -> float:
        value = sum(a == b for a, b in zip(p, g, strict=True)) / len(p)
        seen.add(value)
        return value

    result = bootstrap_ci(share, pred, gold, groups=["a", "a", "a", "b", "b", "b"], resamples=100, seed=1)
    assert seen <= {0.0, 0.5, 1.0}
    assert result["unit"] == "group"


def test_classification_table_holds_values_and_intervals() -> None:
    table = classification_table(PRED, GOLD, resamples=300, seed=3)
    assert table["n"] == 10 and table["positives"] == 4 and table["predicted_positives"] == 5
    assert table["cohens_kappa"]["value"] == pytest.approx(0.4)
    low, high = table["balanced_accuracy"]["ci95"]
    assert low <= table["balanced_accuracy"]["value"] <= high
    assert table == classification_table(PRED, GOLD, resamples=300, seed=3)


def test_correlation_table_reports_p_values() -> None:
    table = correlation_table([0.2, 0.4, 0.9, 0.8, 0.1, 0.95], [0, 0, 1, 1, 0, 1], resamples=200)
    assert table["spearman"]["value"] > 0.8
    assert table["kendall_tau_b"]["p"] < 0.05
    assert table["spearman"]["ci95"] is not None


def test_threshold_sweep_and_auc() -> None:
    rows = threshold_sweep([0.2, 0.5, 0.9], [True, True, False])
    best = max(rows, key=lambda r: r["balanced_accuracy"] or 0)
    assert best["balanced_accuracy"] == 1.0 and 0.5 < best["threshold"] < 0.9
    assert rows[0]["predicted_unfaithful"] == 0 and rows[-1]["predicted_unfaithful"] == 3
    assert roc_auc([0.2, 0.5, 0.9], [True, True, False]) == 1.0
    assert roc_auc([0.5, 0.5], [True, False]) == 0.5
    assert roc_auc([0.5, 0.6], [True, True]) is None
