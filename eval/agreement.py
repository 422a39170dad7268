"""Agreement between a metric and human labels: classification, rank correlation, bootstrap intervals.

The unfaithful (or confusing) class is the positive one: it is what a judge exists to find. A statistic
undefined on the data is None, never a number that looks meaningful. Bootstrap intervals are seeded and,
given ``groups``, resample whole clusters (the sentences of one summary are not independent).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
from scipy import stats

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0

Labels = Sequence[bool] | Sequence[int]


def _as_bool(values: Labels) -> np.ndarray:
    return np.asarray([bool(v) for v in values], dtype=bool)


def _check_pair(pred: Labels, gold: Labels) -> tuple[np.ndarray, np.ndarray]:
    if len(pred) != len(gold):
        raise ValueError(f"predictions ({len(pred)}) and labels ({len(gold)}) differ in length")
    return _as_bool(pred), _as_bool(gold)


def confusion(pred: Labels, gold: Labels) -> dict[str, int]:
    """Counts of true/false positives/negatives, positive meaning the unfaithful class."""
    p, g = _check_pair(pred, gold)
    return {
        "tp": int(np.sum(p & g)),
        "fp": int(np.sum(p & ~g)),
        "fn": int(np.sum(~p & g)),
        "tn": int(np.sum(~p & ~g)),
    }


def balanced_accuracy(pred: Labels, gold: Labels) -> float | None:
    """Mean of the recall of each class; None unless both classes occur (else it is plain accuracy)."""
    c = confusion(pred, gold)
    positives, negatives = c["tp"] + c["fn"], c["tn"] + c["fp"]
    return (c["tp"] / positives + c["tn"] / negatives) / 2 if positives and negatives else None


def accuracy(pred: Labels, gold: Labels) -> float | None:
    """Share of items where prediction and label agree (None on no items)."""
    p, g = _check_pair(pred, gold)
    return float(np.mean(p == g)) if p.size else None


def cohens_kappa(pred: Labels, gold: Labels) -> float | None:
    """Cohen's kappa: agreement beyond chance; None when chance agreement is already perfect (0/0)."""
    c = confusion(pred, gold)
    n = sum(c.values())
    if n == 0:
        return None
    observed = (c["tp"] + c["tn"]) / n
    pred_pos, gold_pos = (c["tp"] + c["fp"]) / n, (c["tp"] + c["fn"]) / n
    expected = pred_pos * gold_pos + (1 - pred_pos) * (1 - gold_pos)
    if math.isclose(expected, 1.0):
        return None
    return round((observed - expected) / (1 - expected), 12) + 0.0  # no -8e-17 (or -0.0) for "no agreement"


def precision(pred: Labels, gold: Labels) -> float | None:
    """Precision on the unfaithful class (None when nothing was predicted unfaithful)."""
    c = confusion(pred, gold)
    return c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else None


def recall(pred: Labels, gold: Labels) -> float | None:
    """Recall on the unfaithful class (None when no item is labelled unfaithful)."""
    c = confusion(pred, gold)
    return c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else None


def f1(pred: Labels, gold: Labels) -> float | None:
    """F1 on the unfaithful class (None when precision or recall is undefined, or both are 0)."""
    p, r = precision(pred, gold), recall(pred, gold)
    return 2 * p * r / (p + r) if p is not None and r is not None and p + r > 0 else None


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _correlation(
    test: Callable[..., Any], name: str, x: Sequence[float], y: Sequence[float]
) -> dict[str, float | None]:
    if len(x) != len(y):
        raise ValueError(f"score lists differ in length ({len(x)} vs {len(y)})")
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return {name: None, "p": None}
    result = test(x, y)
    return {name: _finite(result.statistic), "p": _finite(result.pvalue)}


def spearman(x: Sequence[float], y: Sequence[float]) -> dict[str, float | None]:
    """Spearman's rho with its two-sided p-value; both None when either side is constant or n < 3."""
    return _correlation(stats.spearmanr, "rho", x, y)


def kendall(x: Sequence[float], y: Sequence[float]) -> dict[str, float | None]:
    """Kendall's tau-b (corrects for ties, which a binary label is full of) with its two-sided p-value."""
    return _correlation(partial(stats.kendalltau, variant="b"), "tau", x, y)


def _settings(groups: Sequence[Any] | None, resamples: int, seed: int) -> dict[str, Any]:
    return {"resamples": resamples, "seed": seed, "unit": "item" if groups is None else "group"}


def bootstrap_ci(
    statistic: Callable[..., float | None],
    *columns: Sequence[Any],
    groups: Sequence[Any] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Percentile 95% interval of ``statistic(*columns)`` over resampled items (whole clusters with ``groups``).

    ``undefined`` counts the resamples where the statistic was None; ``ci95`` is None when most were.
    """
    n = len(columns[0]) if columns else 0
    if any(len(c) != n for c in columns):
        raise ValueError("bootstrap columns differ in length")
    if groups is not None and len(groups) != n:
        raise ValueError("groups must give one cluster id per item")
    result: dict[str, Any] = {"ci95": None, "undefined": 0, **_settings(groups, resamples, seed)}
    if n < 2:
        result["note"] = "needs at least two items"
        return result
    by_group: dict[Any, list[int]] = {}
    for i, g in enumerate(range(n) if groups is None else groups):
        by_group.setdefault(g, []).append(i)
    clusters = list(by_group.values())
    rng = np.random.default_rng(seed)
    values: list[float] = []
    for _ in range(resamples):
        picks = rng.integers(0, len(clusters), size=len(clusters))
        index = [i for c in picks for i in clusters[c]]
        value = statistic(*[[col[i] for i in index] for col in columns])
        if value is None or not math.isfinite(value):
            result["undefined"] += 1
        else:
            values.append(float(value))
    if len(values) >= resamples / 2:
        result["ci95"] = [float(end) for end in np.percentile(values, [2.5, 97.5])]
    else:
        result["note"] = "the statistic was undefined on most resamples"
    return result


def _with_ci(
    value: float | None, statistic: Callable[..., float | None], *columns: Sequence[Any], **settings: Any
) -> dict[str, Any]:
    ci = bootstrap_ci(statistic, *columns, **settings)
    return {"value": value, "ci95": ci["ci95"], "undefined_resamples": ci["undefined"]}


CLASSIFICATION: dict[str, Callable[..., float | None]] = {
    "balanced_accuracy": balanced_accuracy,
    "cohens_kappa": cohens_kappa,
    "precision_unfaithful": precision,
    "recall_unfaithful": recall,
    "f1_unfaithful": f1,
    "accuracy": accuracy,
}


def classification_table(
    pred: Labels,
    gold: Labels,
    *,
    groups: Sequence[Any] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Balanced accuracy, kappa, precision/recall/F1 on the unfaithful class (True), each with a bootstrap 95% CI."""
    p, g = (array.tolist() for array in _check_pair(pred, gold))
    table: dict[str, Any] = {
        "n": len(p),
        "positives": int(sum(g)),
        "predicted_positives": int(sum(p)),
        "confusion": confusion(p, g),
        "bootstrap": _settings(groups, resamples, seed),
    }
    for name, fn in CLASSIFICATION.items():
        table[name] = _with_ci(fn(p, g), fn, p, g, groups=groups, resamples=resamples, seed=seed)
    return table


def correlation_table(
    scores: Sequence[float],
    labels: Sequence[float],
    *,
    groups: Sequence[Any] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Spearman's rho and Kendall's tau-b of a score against a label (same orientation), p-values and 95% CIs."""
    x, y = [float(s) for s in scores], [float(v) for v in labels]
    table: dict[str, Any] = {"n": len(x)}
    for name, test, key in (("spearman", spearman, "rho"), ("kendall_tau_b", kendall, "tau")):
        found = test(x, y)
        value = partial(_statistic, test, key)
        ci = _with_ci(found[key], value, x, y, groups=groups, resamples=resamples, seed=seed)
        table[name] = {**ci, "p": found["p"]}
    table["bootstrap"] = _settings(groups, resamples, seed)
    return table


def _statistic(
    test: Callable[..., dict[str, float | None]], key: str, *columns: Sequence[float]
) -> float | None:
    return test(*columns)[key]


def threshold_sweep(scores: Sequence[float], gold_unfaithful: Labels) -> list[dict[str, Any]]:
    """Predict unfaithful when score < t, for every cut point: a diagnostic, never a tuned result to report."""
    values = sorted({float(s) for s in scores})
    if not values:
        return []
    cuts = [values[0]] + [(a + b) / 2 for a, b in zip(values, values[1:], strict=False)] + [values[-1] + 1e-9]
    gold = list(_as_bool(gold_unfaithful))
    rows = []
    for t in cuts:
        pred = [s < t for s in scores]
        row: dict[str, Any] = {"threshold": round(t, 6), "predicted_unfaithful": int(sum(pred))}
        for name in ("balanced_accuracy", "cohens_kappa", "precision_unfaithful", "recall_unfaithful"):
            row[name] = CLASSIFICATION[name](pred, gold)
        rows.append(row)
    return rows


def roc_auc(scores: Sequence[float], gold_unfaithful: Labels) -> float | None:
    """P(an unfaithful item scores lower than a faithful one), ties counting half; None on one class."""
    gold = _as_bool(gold_unfaithful)
    s = np.asarray(scores, dtype=float)
    bad, good = s[gold], s[~gold]
    if bad.size == 0 or good.size == 0:
        return None
    wins = (bad[:, None] < good[None, :]).sum() + 0.5 * (bad[:, None] == good[None, :]).sum()
    return float(wins / (bad.size * good.size))
