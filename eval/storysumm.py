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
from storyjudge.core.textsplit import sentence_spans


def dataset_spans(sentences: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """The summary text the graph sees (sentences joined by one space) and each sentence's character span."""
    spans, cursor = [], 0
    for sentence in sentences:
        spans.append((cursor, cursor + len(sentence)))
        cursor += len(sentence) + 1
    return " ".join(sentences), spans


def _locate(text: str, pieces: Sequence[str]) -> list[tuple[int, int] | None]:
    """Character span of each piece in ``text``, searched in order; None for a piece that cannot be found."""
    found: list[tuple[int, int] | None] = []
    cursor = 0
    for piece in pieces:
        piece = piece.strip()
        at = text.find(piece, cursor) if piece else -1
        if at < 0 and piece:
            at = text.find(piece)
        if at < 0:
            found.append(None)
            continue
        found.append((at, at + len(piece)))
        cursor = at + len(piece)
    return found


def align(dataset_sentences: Sequence[str], graph_sentences: Sequence[str]) -> dict[str, Any]:
    """Map the graph's sentences onto the labelled ones by character overlap (graph indices per labelled one).

    One overlapping two labelled sentences maps to both and counts in ``split_differently``.
    """
    text, spans = dataset_spans(dataset_sentences)
    if not graph_sentences:
        graph_sentences = [text[a:b] for a, b in sentence_spans(text)]
    located = _locate(text, graph_sentences)
    mapping: list[list[int]] = [[] for _ in dataset_sentences]
    unplaced: list[int] = []
    split_differently = 0
    for g, span in enumerate(located):
        if span is None:
            unplaced.append(g)
            continue
        hits = [d for d, (a, b) in enumerate(spans) if min(b, span[1]) - max(a, span[0]) > 0]
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
    for d, graph_indices in enumerate(alignment["mapping"]):
        parts = [per_sentence[g] for g in graph_indices]
        judged = sum(int(p.get("judged") or 0) for p in parts)
        supported = sum(int(p.get("supported") or 0) for p in parts)
        unsupported = judged - supported
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
    return {
        "sentences": rows,
        "split_differently": alignment["split_differently"],
        "unplaced": alignment["unplaced"],
    }


def summary_prediction(card: Mapping[str, Any]) -> bool | None:
    """Unfaithful when any fact is unsupported; None when no fact could be judged."""
    judged = int(card.get("supported") or 0) + int(card.get("unsupported") or 0)
    if judged == 0:
        return None
    return int(card.get("unsupported") or 0) > 0


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
    scored_rows = [r for r in ok if r.get("factscore")]
    fact_rows = [r for r in scored_rows if _reliable(r["factscore"])]
    report["excluded_unreliable_nfs"] = len(scored_rows) - len(fact_rows)
    if report["excluded_unreliable_nfs"]:
        report["notes"].append(
            f"{report['excluded_unreliable_nfs']} item(s) left out of the NFS agreement figures: their score "
            "was judged on fewer facts than the coverage floor asks"
        )
    if fact_rows:
        report["summary_level"] = _summary_level(fact_rows, resamples, seed)
        report["sentence_level"] = _sentence_level(fact_rows, resamples, seed)
    annotated = [r for r in ok if (r.get("coherence") or {}).get("sentences")]
    coherence_rows = [r for r in annotated if _reliable(r["coherence"])]
    report["excluded_unreliable_coherence"] = len(annotated) - len(coherence_rows)
    if report["excluded_unreliable_coherence"]:
        report["notes"].append(
            f"{report['excluded_unreliable_coherence']} item(s) left out of the coherence agreement figures: "
            "too few of their sentences got a readable answer"
        )
    if coherence_rows and any((r.get("labels") or {}).get("coherence") for r in coherence_rows):
        report["coherence_sentence_level"] = _coherence_level(coherence_rows, resamples, seed)
    elif coherence_rows:
        report["notes"].append("coherence was scored, but the dataset has no per-sentence coherence labels")
    return report


def _reliable(scores: Mapping[str, Any]) -> bool:
    """Whether a row's score counts; rows written before coverage was recorded count as they did then."""
    return scores.get("reliable") is not False


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


def _sentence_table(
    rows: Sequence[Mapping[str, Any]], labels: str, scores: str, predicted: str, resamples: int, seed: int
) -> tuple[dict[str, Any], int, list[Mapping[str, Any]]]:
    """The labelled sentences' table (clustered by item), abstentions, and the rows whose labels line up."""
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
    return classification_table(pred, gold, groups=groups, resamples=resamples, seed=seed), abstained, used


def _sentence_level(rows: Sequence[Mapping[str, Any]], resamples: int, seed: int) -> dict[str, Any]:
    table, abstained, used = _sentence_table(
        rows, "sentences", "factscore", "predicted_unfaithful", resamples, seed
    )
    return {
        "rule": "a sentence is unfaithful if any of its atomic facts is unsupported",
        "abstained_sentences": abstained,
        "summaries_without_usable_sentence_labels": len(rows) - len(used),
        "graph_sentences_split_differently": sum(
            int(r["factscore"].get("split_differently") or 0) for r in used
        ),
        "table": table,
    }


def _coherence_level(rows: Sequence[Mapping[str, Any]], resamples: int, seed: int) -> dict[str, Any]:
    table, abstained, _ = _sentence_table(
        rows, "coherence", "coherence", "predicted_confusing", resamples, seed
    )
    return {
        "rule": "a sentence is confusing if the annotator raised any confusion about it",
        "abstained_sentences": abstained,
        "table": table,
    }


def coherence_sentence_predictions(
    dataset_sentences: Sequence[str], annotations: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Per labelled sentence: confusing (True/False) or None when its annotations could not be parsed."""
    ordered = sorted(annotations, key=lambda a: int(a.get("index", 0)))
    alignment = align(dataset_sentences, [str(a.get("sentence", "")) for a in ordered])
    rows = []
    for d, graph_indices in enumerate(alignment["mapping"]):
        verdicts = [ordered[g].get("confused") for g in graph_indices]
        known = [v for v in verdicts if v is not None]
        rows.append({"index": d, "predicted_confusing": (any(known) if known else None)})
    return {"sentences": rows, "split_differently": alignment["split_differently"]}


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _metric_cell(entry: Mapping[str, Any]) -> str:
    ci = entry.get("ci95")
    interval = f" [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else ""
    return f"{_fmt(entry.get('value'))}{interval}"


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
        section = report.get(key)
        if not section:
            continue
        table = section["table"]
        counts = f"{table['n']} ({table['positives']} / {table['predicted_positives']})"
        lines.append((level, "n (unfaithful / predicted)", counts))
        for metric in SHOWN:
            lines.append((level, metric, _metric_cell(table[metric])))
        abstained = section.get("abstained", section.get("abstained_sentences", 0))
        lines.append((level, "abstained (nothing judged)", str(abstained)))
        if key == "summary_level":
            corr = section["nfs_vs_label"]
            for name, test in (("Spearman rho", "spearman"), ("Kendall tau-b", "kendall_tau_b")):
                cell = f"{_metric_cell(corr[test])} (p={_fmt(corr[test]['p'])})"
                lines.append(("summary", f"NFS {name} (p)", cell))
            lines.append(("summary", "NFS ROC AUC", _fmt(corr.get("roc_auc"))))
    return lines
