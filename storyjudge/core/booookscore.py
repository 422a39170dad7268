"""BooookScore (equation 1 of the paper): the share of a summary's sentences that cause no confusion.

Unparsed sentences are left out of the denominator and reported, never counted as clean. A summary below the
coverage floor, or whose annotator passed too many planted confusing sentences, is unreliable and left out of the
system score (the mean over summaries, with appendix G's bootstrap).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from storyjudge.core.confusion import ERROR_TYPES
from storyjudge.core.coverage import DEFAULT_FLOOR, is_reliable, share
from storyjudge.core.intervals import mean_interval, over, percentiles, resampled_means
from storyjudge.core.planted import annotator_check

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0


def summary_score(
    summary_id: str,
    n_sentences: int,
    annotations: Iterable[Mapping[str, Any]],
    coverage_floor: float = DEFAULT_FLOOR,
) -> dict[str, Any]:
    """Score one summary from its sentences' annotations (``confused`` True, False or None, and ``types``).

    ``score`` is None when no sentence could be scored; ``missing`` counts sentences with no annotation.
    """
    records = list(annotations)
    answers = Counter(a.get("confused") for a in records)  # True, False or None (unparsed)
    confused, clean, unparsed = answers[True], answers[False], answers[None]
    scored = confused + clean
    named = Counter(name for a in records if a.get("confused") is True for name in a.get("types") or [])
    per_type = {name: named[name] for name in ERROR_TYPES}
    value = clean / scored if scored else None
    coverage = share(scored, n_sentences)
    return {
        "id": summary_id,
        "score": value,
        "coverage": round(coverage, 6),
        "reliable": is_reliable(value, coverage, coverage_floor),
        "sentences": n_sentences,
        "scored": scored,
        "clean": clean,
        "confused": confused,
        "unparsed": unparsed,
        "missing": max(0, n_sentences - len(records)),
        "per_type": per_type,
        "per_type_rates": {name: (count / scored if scored else None) for name, count in per_type.items()},
    }


def system_score(scores: Iterable[float | None]) -> float | None:
    """Mean BooookScore over the summaries that have one (None when none has)."""
    import numpy as np  # imported where used: a refine run needs it only once its summaries are scored

    values = [s for s in scores if s is not None]
    return float(np.mean(values)) if values else None


def bootstrap(
    scores: Sequence[float | None], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    """Appendix G: the std and 95% interval of the mean over resampled summaries (None with fewer than two)."""
    values = [float(s) for s in scores if s is not None]
    result: dict[str, Any] = {
        "std": None,
        "ci95": None,
        "resamples": resamples,
        "seed": seed,
        "n": len(values),
    }
    if len(values) < 2:
        result["note"] = "needs at least two scored summaries"
        return result
    means = resampled_means(values, resamples, seed)
    result["std"] = float(means.std(ddof=1))
    result["ci95"] = percentiles(means)
    return result


def per_type_rates(summaries: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Appendix H: each type's count over all summaries divided by all scored sentences."""
    scored = sum(int(s["scored"]) for s in summaries)
    return {
        name: (sum(int(s["per_type"][name]) for s in summaries) / scored if scored else None)
        for name in ERROR_TYPES
    }


def coherence_report(
    sentences: Mapping[str, Sequence[str]],
    annotations: Iterable[Mapping[str, Any]],
    *,
    mode: str,
    order: Sequence[str] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    coverage_floor: float = DEFAULT_FLOOR,
    planted: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    planted_annotations: Iterable[Mapping[str, Any]] = (),
    max_false_acceptance: float = 1.0,
) -> dict[str, Any]:
    """Everything the metric reports for a set of summaries (``mode``: "per-sentence" or "batched").

    ``score`` is the single summary's, else the mean over reliable summaries (``excluded_summaries`` counts
    the others). ``planted`` and ``planted_annotations`` check the annotator, never counted in a score.
    """
    by_summary: dict[str, list[Mapping[str, Any]]] = {sid: [] for sid in sentences}
    for record in annotations:
        by_summary.setdefault(str(record["summary_id"]), []).append(record)
    ids = list(order) if order is not None else list(sentences)
    summaries = [
        summary_score(sid, len(sentences.get(sid, [])), by_summary.get(sid, []), coverage_floor)
        for sid in ids
    ]
    checked = list(planted_annotations)
    for card in summaries:
        items = (planted or {}).get(card["id"])
        if items:
            mine = [a for a in checked if str(a.get("summary_id")) == card["id"]]
            card["annotator_check"] = annotator_check(items, mine, max_false_acceptance)
            card["reliable"] = bool(card["reliable"] and card["annotator_check"]["passed"])
        card["ci95"] = mean_interval([1.0] * card["clean"] + [0.0] * card["confused"], seed=seed)["ci95"]
        card["ci95_over"] = over(card["scored"], "sentence")  # a summary's interval resamples its sentences
    kept = [s["score"] for s in summaries if s["reliable"]]
    system = system_score(kept)
    total = sum(s["sentences"] for s in summaries)
    scored = sum(s["scored"] for s in summaries)
    coverage = share(scored, total)
    if len(summaries) == 1:
        score, reliable = summaries[0]["score"], bool(summaries[0]["reliable"])
    else:
        score, reliable = system, is_reliable(system, coverage, coverage_floor)
    return {
        "mode": mode,
        "score": score,
        "coverage": round(coverage, 6),
        "reliable": reliable,
        "coverage_floor": coverage_floor,
        "system_score": system,
        "excluded_summaries": len(summaries) - len(kept),
        "summaries": summaries,
        "bootstrap": {
            **bootstrap(kept, resamples, seed),
            "over": f"{len(kept)} summar{'y' if len(kept) == 1 else 'ies'}",
        },
        "per_type_rates": per_type_rates(summaries),
        "sentences": total,
        "scored": scored,
        "unparsed": sum(s["unparsed"] + s["missing"] for s in summaries),
    }
