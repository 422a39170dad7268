"""From score cards to STORYSUMM predictions: sentence alignment, abstentions, and the agreement report."""

from __future__ import annotations

from typing import Any

from eval.storysumm import (
    agreement_report,
    align,
    coherence_sentence_predictions,
    sentence_predictions,
    summary_prediction,
    table_lines,
)


def test_align_when_the_graph_splits_finer() -> None:
    result = align(["Ann sails. She waves.", "Bo runs."], ["Ann sails.", "She waves.", "Bo runs."])
    assert result["mapping"] == [[0, 1], [2]]
    assert result["split_differently"] == 0 and result["unplaced"] == []


def test_align_when_the_graph_merges_two_labelled_sentences() -> None:
    result = align(["It was late.", "Ann left."], ["It was late. Ann left."])
    assert result["mapping"] == [[0], [0]]
    assert result["split_differently"] == 1


def test_align_reports_sentences_it_cannot_place() -> None:
    result = align(["Ann sails."], ["Ann sails.", "Something the summary never said."])
    assert result["mapping"] == [[0]] and result["unplaced"] == [1]


def test_sentence_predictions_and_abstentions() -> None:
    per_sentence = [
        {"index": 0, "sentence": "Ann sails.", "facts": 2, "supported": 2, "judged": 2},
        {"index": 1, "sentence": "She waves.", "facts": 1, "supported": 0, "judged": 1},
        {"index": 2, "sentence": "Bo runs.", "facts": 1, "supported": 0, "judged": 0},  # unjudged
    ]
    result = sentence_predictions(["Ann sails.", "She waves.", "Bo runs."], per_sentence)
    assert [s["predicted_unfaithful"] for s in result["sentences"]] == [False, True, None]
    merged = sentence_predictions(["Ann sails. She waves.", "Bo runs."], per_sentence)
    assert merged["sentences"][0]["predicted_unfaithful"] is True
    assert merged["sentences"][0]["facts"] == 3


def test_summary_prediction() -> None:
    assert summary_prediction({"supported": 3, "unsupported": 1}) is True
    assert summary_prediction({"supported": 3, "unsupported": 0}) is False
    assert summary_prediction({"supported": 0, "unsupported": 0, "unjudged": 4}) is None


def row(
    item: str, label: int, sentence_labels: list[int], predicted: list[bool | None], score: float | None
) -> Any:
    return {
        "status": "ok",
        "item": {"id": item},
        "labels": {"summary": label, "sentences": sentence_labels, "coherence": [1] * len(sentence_labels)},
        "factscore": {
            "score": score,
            "supported": 1,
            "unsupported": int(any(predicted)),
            "predicted_unfaithful": any(p for p in predicted if p is not None),
            "sentences": [{"predicted_unfaithful": p} for p in predicted],
        },
        "coherence": {"score": 1.0, "sentences": [{"predicted_confusing": False} for _ in predicted]},
    }


def test_agreement_report_levels_and_table() -> None:
    rows = [
        row("a", 0, [1, 0], [False, True], 0.5),
        row("b", 1, [1, 1], [False, False], 1.0),
        row("c", 0, [0, 1], [False, None], 0.9),  # the flagged sentence was missed, the other unjudged
        row("d", 1, [1, 1, 1], [False, True, False], 0.8),
        {"status": "error", "item": {"id": "e"}, "labels": {"summary": 0}},
    ]
    report = agreement_report(rows, resamples=100)
    assert report["items"] == 5 and report["scored"] == 4 and report["failed"] == 1
    summary = report["summary_level"]["table"]
    assert summary["confusion"] == {"tp": 1, "fp": 1, "fn": 1, "tn": 1}
    assert summary["balanced_accuracy"]["value"] == 0.5
    sentences = report["sentence_level"]
    assert sentences["abstained_sentences"] == 1 and sentences["table"]["n"] == 8
    assert report["summary_level"]["nfs_vs_label"]["roc_auc"] == 0.75
    assert report["coherence_sentence_level"]["table"]["n"] == 9
    lines = table_lines(report)
    assert ("summary", "balanced_accuracy") in {(level, metric) for level, metric, _ in lines}
    assert any(level == "coherence (sentence)" for level, _, _ in lines)


def test_coherence_predictions_from_annotations() -> None:
    annotations = [
        {"index": 1, "sentence": "She waves.", "confused": True},
        {"index": 0, "sentence": "Ann sails.", "confused": False},
        {"index": 2, "sentence": "Bo runs.", "confused": None},
    ]
    result = coherence_sentence_predictions(["Ann sails.", "She waves.", "Bo runs."], annotations)
    assert [s["predicted_confusing"] for s in result["sentences"]] == [False, True, None]


def test_unreliable_scores_are_left_out_of_agreement_with_a_count() -> None:
    rows = [
        row("a", 0, [1, 0], [False, True], 0.5),
        row("b", 1, [1, 1], [False, False], 1.0),
        row("c", 0, [0, 1], [False, False], 1.0),
        row("d", 1, [1, 1, 1], [False, True, False], 0.8),
    ]
    full = agreement_report(rows, resamples=50)
    rows[2]["factscore"]["reliable"] = False  # c's "faithful" verdict rests on too few judged facts
    rows[3]["coherence"]["reliable"] = False
    report = agreement_report(rows, resamples=50)
    assert full["excluded_unreliable_nfs"] == 0 and report["excluded_unreliable_nfs"] == 1
    assert report["summary_level"]["table"]["n"] == full["summary_level"]["table"]["n"] - 1
    assert report["excluded_unreliable_coherence"] == 1
    assert (
        report["coherence_sentence_level"]["table"]["n"] == full["coherence_sentence_level"]["table"]["n"] - 3
    )
    assert any("1 item(s) left out of the NFS agreement" in note for note in report["notes"])
