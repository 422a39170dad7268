"""Agreement of NarrativeFactScore (and BooookScore) with human labels on STORYSUMM-format data.

A summary is predicted unfaithful when any of its facts is unsupported; one with nothing judged abstains
(counted, never guessed). NFS is also correlated with the label, and a threshold sweep is kept apart (its best
row would be tuned on the test data). The graph's own sentences are mapped onto the labelled ones by character
overlap, counting those split differently; sentence-level intervals resample whole summaries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval.agreement import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    classification_table,
    correlation_table,
    roc_auc,
    threshold_sweep,
)
from storyjudge.core.intervals import interval_text


def align(dataset_sentences: Sequence[str], graph_sentences: Sequence[str]) -> dict[str, Any]:
    """Map the graph's sentences onto the labelled ones by character overlap (graph indices per labelled one).

    The graph sees the labelled sentences joined by one space; each graph sentence is searched in order. One
    overlapping two labelled sentences maps to both and counts in ``split_differently``. No graph sentences (a
    card without ``per_sentence``) map to none: every labelled sentence then abstains.
    """
    text, spans, start = " ".join(dataset_sentences), [], 0
    for sentence in dataset_sentences:
        spans.append((start, start + len(sentence)))
        start += len(sentence) + 1
    mapping: list[list[int]] = [[] for _ in dataset_sentences]
    unplaced: list[int] = []
    split_differently = cursor = 0  # cursor: where the last graph sentence placed ends
    for g, piece in enumerate(sentence.strip() for sentence in graph_sentences):
        at = text.find(piece, cursor)
        if at < 0:
            at = text.find(piece)
        if at < 0 or not piece:
            unplaced.append(g)
            continue
        cursor = at + len(piece)
        hits = [d for d, (a, b) in enumerate(spans) if min(b, cursor) - max(a, at) > 0]  # overlapping ones
        for d in hits:
            mapping[d].append(g)
        if len(hits) > 1:
            split_differently += 1
    return {"mapping": mapping, "split_differently": split_differently, "unplaced": unplaced}


def sentence_predictions(
    dataset_sentences: Sequence[str], per_sentence: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Per labelled sentence: facts, judged, unsupported and the prediction (None when nothing was judged)."""
    graph_sentences = [str(p.get("sentence", "")) for p in per_sentence]
    alignment = align(dataset_sentences, graph_sentences)
    rows = []
    for d, graph_indices in enumerate(alignment.pop("mapping")):
        parts = [per_sentence[g] for g in graph_indices]
        judged = sum(int(p.get("judged") or 0) for p in parts)
        unsupported = judged - sum(int(p.get("supported") or 0) for p in parts)
        rows.append(
            {
                "index": d,
                "graph_sentences": graph_indices,
                "facts": sum(int(p.get("facts") or 0) for p in parts),
                "judged": judged,
                "unsupported": unsupported,
                "predicted_unfaithful": None if judged == 0 else unsupported > 0,
            }
        )
    return {"sentences": rows, **alignment}  # with split_differently and unplaced


def summary_prediction(card: Mapping[str, Any]) -> bool | None:
    """Unfaithful when any fact is unsupported; None when no fact could be judged."""
    unsupported = int(card.get("unsupported") or 0)
    return None if unsupported + int(card.get("supported") or 0) == 0 else unsupported > 0


def agreement_report(
    rows: Sequence[Mapping[str, Any]], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    """The agreement tables of one runner cell's scored STORYSUMM rows."""
    ok = [r for r in rows if r.get("status") == "ok" and (r.get("labels") or {}).get("summary") is not None]
    report: dict[str, Any] = {
        "items": len(rows),
        "scored": len(ok),
        "failed": len(rows) - len(ok),
        "notes": [],
    }
    kept = []
    for key, field, what, why in (
        ("nfs", "factscore", "NFS", "their score was judged on fewer facts than the coverage floor asks"),
        ("coherence", "coherence", "coherence", "too few of their sentences got a readable answer"),
    ):
        present = [r for r in ok if r.get(field) and (key == "nfs" or r[field].get("sentences"))]
        kept.append([r for r in present if r[field].get("reliable") is not False])
        report[f"excluded_unreliable_{key}"] = excluded = len(present) - len(kept[-1])
        if excluded:
            report["notes"].append(f"{excluded} item(s) left out of the {what} agreement figures: {why}")
    fact_rows, coherence_rows = kept
    if fact_rows:
        report["summary_level"] = _summary_level(fact_rows, resamples, seed)
        report["sentence_level"] = _sentence_level(
            fact_rows, "sentences", "factscore", "predicted_unfaithful", resamples, seed
        )
    if coherence_rows and any((r.get("labels") or {}).get("coherence") for r in coherence_rows):
        report["coherence_sentence_level"] = _sentence_level(
            coherence_rows, "coherence", "coherence", "predicted_confusing", resamples, seed
        )
    elif coherence_rows:
        report["notes"].append("coherence was scored, but the dataset has no per-sentence coherence labels")
    return report


def _summary_level(rows: Sequence[Mapping[str, Any]], resamples: int, seed: int) -> dict[str, Any]:
    predicted = [r for r in rows if r["factscore"].get("predicted_unfaithful") is not None]
    gold = [r["labels"]["summary"] == 0 for r in predicted]
    pred = [bool(r["factscore"]["predicted_unfaithful"]) for r in predicted]
    result: dict[str, Any] = {
        "rule": "unfaithful if any atomic fact is unsupported",
        "abstained": len(rows) - len(predicted),
        "table": classification_table(pred, gold, resamples=resamples, seed=seed),
    }
    scored = [r for r in rows if r["factscore"].get("score") is not None]
    nfs = [float(r["factscore"]["score"]) for r in scored]
    labels = [float(r["labels"]["summary"]) for r in scored]
    result["nfs_vs_label"] = correlation_table(nfs, labels, resamples=resamples, seed=seed)
    result["nfs_vs_label"]["roc_auc"] = roc_auc(nfs, [v == 0 for v in labels])
    result["nfs_vs_label"]["orientation"] = "label 1 faithful, 0 unfaithful; NFS higher = more faithful"
    result["threshold_sweep"] = {
        "rule": "unfaithful if NFS < threshold",
        "caution": "diagnostic only: choosing a threshold on this data and reporting its accuracy is "
        "tuning on it",
        "rows": threshold_sweep(nfs, [v == 0 for v in labels]),
    }
    return result


SENTENCE_RULES = {  # by the score a sentence-level table is of
    "factscore": "a sentence is unfaithful if any of its atomic facts is unsupported",
    "coherence": "a sentence is confusing if the annotator raised any confusion about it",
}


def _sentence_level(
    rows: Sequence[Mapping[str, Any]], labels: str, scores: str, predicted: str, resamples: int, seed: int
) -> dict[str, Any]:
    """The labelled sentences' table (clustered by item) and abstentions; rows whose labels do not line up are out."""
    pred: list[bool] = []
    gold: list[bool] = []
    groups: list[str] = []
    abstained = 0
    used = []
    for r in rows:
        given, sentences = r["labels"].get(labels), r[scores].get("sentences") or []
        if given is None or len(given) != len(sentences):
            continue
        used.append(r)
        for label, sentence in zip(given, sentences, strict=True):
            if sentence.get(predicted) is None:
                abstained += 1
                continue
            pred.append(bool(sentence[predicted]))
            gold.append(label == 0)
            groups.append(str(r["item"]["id"]))
    section: dict[str, Any] = {
        "rule": SENTENCE_RULES[scores],
        "abstained_sentences": abstained,
        "table": classification_table(pred, gold, groups=groups, resamples=resamples, seed=seed),
    }
    if scores == "factscore":
        section["summaries_without_usable_sentence_labels"] = len(rows) - len(used)
        split = sum(int(r["factscore"].get("split_differently") or 0) for r in used)
        section["graph_sentences_split_differently"] = split
    return section


def coherence_sentence_predictions(
    dataset_sentences: Sequence[str], annotations: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Per labelled sentence: confusing (True/False) or None when its annotations could not be parsed."""
    ordered = sorted(annotations, key=lambda a: int(a.get("index", 0)))
    alignment = align(dataset_sentences, [str(a.get("sentence", "")) for a in ordered])
    rows = []
    for d, graph_indices in enumerate(alignment["mapping"]):
        known = [ordered[g]["confused"] for g in graph_indices if ordered[g].get("confused") is not None]
        rows.append({"index": d, "predicted_confusing": (any(known) if known else None)})
    return {"sentences": rows, "split_differently": alignment["split_differently"]}


LEVELS = (
    ("summary", "summary_level"),
    ("sentence", "sentence_level"),
    ("coherence (sentence)", "coherence_sentence_level"),
)
SHOWN = ("balanced_accuracy", "cohens_kappa", "precision_unfaithful", "recall_unfaithful", "f1_unfaithful")


def table_lines(report: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(level, metric, value [95% CI]) rows for printing the agreement table."""
    lines: list[tuple[str, str, str]] = []
    for level, key in LEVELS:
        if not (section := report.get(key)):
            continue
        table = section["table"]
        counts = f"{table['n']} ({table['positives']} / {table['predicted_positives']})"
        lines.append((level, "n (unfaithful / predicted)", counts))
        for metric in SHOWN:
            lines.append((level, metric, interval_text(table[metric]["value"], table[metric]["ci95"])))
        abstained = section.get("abstained", section.get("abstained_sentences", 0))
        lines.append((level, "abstained (nothing judged)", str(abstained)))
        if key == "summary_level":
            corr = section["nfs_vs_label"]
            for name, test in (("Spearman rho", "spearman"), ("Kendall tau-b", "kendall_tau_b")):
                found = corr[test]
                cell = f"{interval_text(found['value'], found['ci95'])} (p={interval_text(found['p'], None)})"
                lines.append(("summary", f"NFS {name} (p)", cell))
            lines.append(("summary", "NFS ROC AUC", interval_text(corr.get("roc_auc"), None)))
    return lines
