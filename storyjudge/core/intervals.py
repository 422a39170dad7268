"""Seeded percentile bootstrap intervals of means, ratios and their differences (compare, eval, score cards).

A paired difference resamples shared units together, so what they share cancels out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
_NO_DIFFERENCE = {"difference": None, "ci95": None, "excludes_zero": False}


def _clean(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None]


def mean_interval(
    values: Sequence[float | None], *, resamples: int = RESAMPLES, seed: int = SEED
) -> dict[str, Any]:
    """The mean of ``values`` (None left out) and its 95% interval: ``{mean, ci95, n}``."""
    import numpy as np  # imported where used: only a comparison or an experiment's summary needs it

    kept = _clean(values)
    ci95 = percentiles(resampled_means(kept, resamples, seed)) if len(kept) >= 2 else None
    return {"mean": float(np.mean(kept)) if kept else None, "ci95": ci95, "n": len(kept)}


def difference_interval(
    a: Sequence[float | None],
    b: Sequence[float | None],
    *,
    paired: bool,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, Any]:
    """mean(b) - mean(a), its 95% interval, whether it excludes 0: ``{difference, ci95, excludes_zero, paired, n}``.

    ``paired``: ``a[i]`` and ``b[i]`` measure the same unit and are resampled together.
    """
    if not paired:  # a mean is a ratio over units of denominator 1
        left, right = _clean(a), _clean(b)
        sides = (left, [1.0] * len(left)), (right, [1.0] * len(right))
        return ratio_difference_interval(*sides, resamples=resamples, seed=seed)
    if len(a) != len(b):
        raise ValueError(f"paired values differ in number ({len(a)} and {len(b)})")
    diffs = [float(y) - float(x) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    found = mean_interval(diffs, resamples=resamples, seed=seed)
    out: dict[str, Any] = {**_NO_DIFFERENCE, "difference": found["mean"], "paired": True, "n": found["n"]}
    if found["ci95"]:
        _set_interval(out, found["ci95"])
    return out


def aligned_difference_interval(
    units: Sequence[tuple[float | None, float | None]], *, resamples: int = RESAMPLES, seed: int = SEED
) -> dict[str, Any]:
    """mean(second) - mean(first) over aligned units, each a pair or one side alone, resampled as units.

    For two summaries' aligned facts: a fact and its counterpart are one unit, so what they share cancels out.
    """
    import numpy as np

    first = np.array([np.nan if x is None else float(x) for x, _ in units], dtype=float)
    second = np.array([np.nan if y is None else float(y) for _, y in units], dtype=float)
    kept = ~(np.isnan(first) & np.isnan(second))
    first, second = first[kept], second[kept]
    pairs = int((~np.isnan(first) & ~np.isnan(second)).sum())
    out: dict[str, Any] = {**_NO_DIFFERENCE, "paired": True, "n": int(first.size), "pairs": pairs}
    if np.isnan(first).all() or np.isnan(second).all():
        return out
    out["difference"] = float(np.nanmean(second) - np.nanmean(first))
    if first.size >= 2:
        picks = np.random.default_rng(seed).integers(0, first.size, size=(resamples, first.size))
        with np.errstate(invalid="ignore", divide="ignore"):
            a, b = first[picks], second[picks]
            means_a = np.nansum(a, axis=1) / (~np.isnan(a)).sum(axis=1)
            means_b = np.nansum(b, axis=1) / (~np.isnan(b)).sum(axis=1)
        diffs = means_b - means_a
        diffs = diffs[np.isfinite(diffs)]  # a resample that drew no value on one side has no difference
        if diffs.size >= resamples // 2:
            _set_interval(out, percentiles(diffs))
    return out


def over(n: int, unit: str) -> str:
    """What an interval resampled, as every surface prints it: "12 sentences" ("95% CI over 12 sentences")."""
    return f"{n} {unit if n == 1 else unit + 's'}"


def ratio_interval(
    numerators: Sequence[float],
    denominators: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> list[float] | None:
    """95% interval of sum(numerators) / sum(denominators), resampling units (a sentence's facts together)."""
    import numpy as np

    num, den = _units(np, numerators, denominators)
    if num.size < 2:
        return None
    picks = np.random.default_rng(seed).integers(0, num.size, size=(resamples, num.size))
    return percentiles(num[picks].sum(axis=1) / den[picks].sum(axis=1))


def ratio_difference_interval(
    a: tuple[Sequence[float], Sequence[float]],
    b: tuple[Sequence[float], Sequence[float]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, Any]:
    """ratio(b) - ratio(a) of two ``ratio_interval`` scores, each side resampled on its own."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sides = [_units(np, *side) for side in (a, b)]
    out: dict[str, Any] = {**_NO_DIFFERENCE, "paired": False, "n": [int(num.size) for num, _ in sides]}
    if not all(num.size for num, _ in sides):
        return out
    (na, da), (nb, db) = sides
    out["difference"] = float(nb.sum() / db.sum() - na.sum() / da.sum())
    if na.size >= 2 and nb.size >= 2:
        pa = rng.integers(0, na.size, size=(resamples, na.size))
        pb = rng.integers(0, nb.size, size=(resamples, nb.size))
        diffs = nb[pb].sum(axis=1) / db[pb].sum(axis=1) - na[pa].sum(axis=1) / da[pa].sum(axis=1)
        _set_interval(out, percentiles(diffs))
    return out


def rogan_gladen(observed: float, false_acceptance: float, true_acceptance: float) -> float:
    """The share truly supported behind an observed share, under a judge with these acceptance rates, in [0, 1]."""
    return min(1.0, max(0.0, (observed - false_acceptance) / (true_acceptance - false_acceptance)))


def corrected_interval(
    numerators: Sequence[float],
    denominators: Sequence[float],
    false_accepted: Sequence[bool],
    true_accepted: Sequence[bool],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> list[float] | None:
    """95% interval of the Rogan-Gladen share: units and planted false and true items resampled together.

    A resample whose judge does not tell true from false is left out; None with fewer than two units, no
    planted item of a kind, or fewer than half the resamples defined.
    """
    import numpy as np

    num, den = _units(np, numerators, denominators)
    false, true = np.asarray(false_accepted, dtype=float), np.asarray(true_accepted, dtype=float)
    if num.size < 2 or not false.size or not true.size:
        return None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, num.size, size=(resamples, num.size))
    observed = num[picks].sum(axis=1) / den[picks].sum(axis=1)
    # the acceptance rates are drawn from their Jeffreys posteriors, a smoothed resample of the planted items: a
    # plain resample of 8 items all rejected never varies, and would claim the judge's rate is known exactly
    far = rng.beta(false.sum() + 0.5, false.size - false.sum() + 0.5, size=resamples)
    tar = rng.beta(true.sum() + 0.5, true.size - true.sum() + 0.5, size=resamples)
    gap = tar - far
    defined = gap > 0
    if defined.sum() < resamples // 2:
        return None
    values = np.clip((observed[defined] - far[defined]) / gap[defined], 0.0, 1.0)
    return percentiles(values)


def percentiles(values: Any) -> list[float]:
    """The central 95% of resampled values: ``[low, high]``."""
    import numpy as np

    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return [float(low), float(high)]


def _set_interval(out: dict[str, Any], ci95: list[float]) -> None:
    """A difference's interval, and whether it leaves out 0."""
    out["ci95"] = ci95
    out["excludes_zero"] = ci95[0] > 0 or ci95[1] < 0


def resampled_means(values: Sequence[float], resamples: int, seed: int) -> Any:
    """The means of ``resamples`` resamples of ``values`` (drawn with replacement), as a numpy array."""
    import numpy as np

    kept = np.asarray(values, dtype=float)
    return kept[np.random.default_rng(seed).integers(0, kept.size, size=(resamples, kept.size))].mean(axis=1)


def _units(np: Any, numerators: Sequence[float], denominators: Sequence[float]) -> tuple[Any, Any]:
    """Numerators and denominators of the units that have a denominator."""
    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    return num[den > 0], den[den > 0]


def interval_text(value: float | None, ci95: Sequence[float] | None, digits: int = 3, sign: str = "") -> str:
    """``0.450 [0.300, 0.600]``: a value with its interval, as tables print it; ``-`` for no value."""
    if value is None:
        return "-"
    text = f"{value:{sign}.{digits}f}"
    if ci95:
        text += f" [{ci95[0]:{sign}.{digits}f}, {ci95[1]:{sign}.{digits}f}]"
    return text


def signed_text(value: float | None, ci95: Sequence[float] | None, digits: int = 3) -> str:
    """``+0.050 [-0.020, +0.120]``: a difference with its interval, signs shown."""
    return interval_text(value, ci95, digits, sign="+")
