"""BooookScore arithmetic: equation 1, the system score, appendix G's bootstrap and appendix H's rates."""

from __future__ import annotations

import math

import pytest

from storyjudge.core.booookscore import (
    bootstrap,
    coherence_report,
    per_type_rates,
    summary_score,
    system_score,
)


def ann(summary_id: str, index: int, confused: bool | None, *types: str) -> dict[str, object]:
    return {"summary_id": summary_id, "index": index, "confused": confused, "types": list(types)}


def test_score_is_share_of_clean_sentences_excluding_unparsed() -> None:
    records = [ann("s", i, False) for i in range(6)]
    records += [ann("s", 6, True, "entity omission"), ann("s", 7, True, "entity omission", "salience")]
    records += [ann("s", 8, True, "discontinuity"), ann("s", 9, None)]
    card = summary_score("s", 10, records)
    assert card["score"] == pytest.approx(6 / 9)
    assert (card["scored"], card["clean"], card["confused"], card["unparsed"], card["missing"]) == (
        9,
        6,
        3,
        1,
        0,
    )
    # a sentence counts once, however many types it has
    assert card["per_type"]["entity omission"] == 2
    assert card["per_type"]["salience"] == 1
    assert card["per_type_rates"]["entity omission"] == pytest.approx(2 / 9)


def test_score_is_none_when_nothing_could_be_scored() -> None:
    card = summary_score("s", 2, [ann("s", 0, None), ann("s", 1, None)])
    assert card["score"] is None
    assert card["per_type_rates"]["salience"] is None


def test_missing_annotations_are_counted() -> None:
    card = summary_score("s", 5, [ann("s", 0, False), ann("s", 1, True)])
    assert card["missing"] == 3
    assert card["score"] == 0.5


def test_system_score_is_the_mean_of_scored_summaries() -> None:
    assert system_score([1.0, 0.5, None]) == pytest.approx(0.75)
    assert system_score([None]) is None


def test_bootstrap_of_identical_scores_has_no_spread() -> None:
    result = bootstrap([0.8, 0.8, 0.8, 0.8])
    assert result["std"] == pytest.approx(0.0, abs=1e-12)
    assert result["ci95"] == [pytest.approx(0.8), pytest.approx(0.8)]
    assert result["resamples"] == 1000


def test_bootstrap_of_two_extremes_matches_the_binomial() -> None:
    # resampled mean of {0, 1} with n=2 is 0, 0.5 or 1 with p = 1/4, 1/2, 1/4: std sqrt(1/8)
    result = bootstrap([0.0, 1.0], resamples=1000, seed=3)
    assert result["std"] == pytest.approx(math.sqrt(1 / 8), abs=0.02)
    assert result["ci95"] == [0.0, 1.0]


def test_bootstrap_is_reproducible_from_its_seed() -> None:
    scores = [0.9, 0.7, 0.85, 0.6, 0.95, 0.8]
    assert bootstrap(scores, seed=1) == bootstrap(scores, seed=1)
    assert bootstrap(scores, seed=1)["std"] != bootstrap(scores, seed=2)["std"]
    low, high = bootstrap(scores, seed=1)["ci95"]
    assert min(scores) <= low < sum(scores) / len(scores) < high <= max(scores)


def test_bootstrap_needs_two_summaries() -> None:
    result = bootstrap([0.9, None])
    assert result["std"] is None and result["ci95"] is None and result["n"] == 1
    assert "two" in result["note"]


def test_per_type_rates_pool_counts_over_all_scored_sentences() -> None:
    first = summary_score("a", 4, [ann("a", 0, True, "salience"), *[ann("a", i, False) for i in range(1, 4)]])
    second = summary_score(
        "b",
        6,
        [
            *[ann("b", i, True, "salience", "language") for i in range(2)],
            *[ann("b", i, False) for i in range(2, 6)],
        ],
    )
    rates = per_type_rates([first, second])
    assert rates["salience"] == pytest.approx(3 / 10)
    assert rates["language"] == pytest.approx(2 / 10)
    assert rates["duplication"] == 0.0


def test_report_for_one_summary_puts_its_score_on_top() -> None:
    report = coherence_report(
        {"x": ["a.", "b.", "c.", "d."]}, [ann("x", i, i == 0) for i in range(4)], mode="per-sentence"
    )
    assert report["score"] == 0.75
    assert report["summaries"][0]["score"] == 0.75
    assert report["mode"] == "per-sentence"
    assert report["coverage"] == 1.0 and report["reliable"] is True
    assert report["bootstrap"]["std"] is None


def test_report_for_many_summaries_keeps_input_order() -> None:
    sentences = {"b": ["x."], "a": ["y.", "z."]}
    records = [ann("a", 0, False), ann("a", 1, True, "event omission"), ann("b", 0, False)]
    report = coherence_report(sentences, records, mode="batched", order=["b", "a"])
    assert [s["id"] for s in report["summaries"]] == ["b", "a"]
    assert report["system_score"] == pytest.approx(0.75)
    assert report["score"] == report["system_score"]
    assert report["excluded_summaries"] == 0
    assert report["bootstrap"]["std"] is not None


def test_summary_below_the_coverage_floor_is_not_reliable_and_left_out_of_the_system_score() -> None:
    # a: 1 of 4 sentences readable (coverage 25%); b: all 2 readable
    records = [
        ann("a", 0, False),
        *[ann("a", i, None) for i in range(1, 4)],
        ann("b", 0, False),
        ann("b", 1, True),
    ]
    report = coherence_report(
        {"a": list("wxyz"), "b": ["p.", "q."]}, records, mode="per-sentence", order=["a", "b"]
    )
    a, b = report["summaries"]
    assert a["score"] == 1.0 and a["coverage"] == 0.25 and a["reliable"] is False
    assert b["coverage"] == 1.0 and b["reliable"] is True
    assert report["system_score"] == 0.5  # b alone: a's 1.0 from one sentence does not count
    assert report["excluded_summaries"] == 1
    assert report["coverage"] == pytest.approx(3 / 6)
    assert report["reliable"] is False  # half the sentences unread: the set's score is not reliable either


def test_nothing_readable_gives_no_score() -> None:
    report = coherence_report(
        {"a": ["x.", "y."]}, [ann("a", 0, None), ann("a", 1, None)], mode="per-sentence"
    )
    assert report["score"] is None and report["coverage"] == 0.0 and report["reliable"] is False


def test_coverage_floor_is_a_setting() -> None:
    records = [ann("a", 0, False), ann("a", 1, None)]
    strict = coherence_report({"a": ["x.", "y."]}, records, mode="per-sentence")
    lenient = coherence_report({"a": ["x.", "y."]}, records, mode="per-sentence", coverage_floor=0.5)
    assert strict["reliable"] is False and lenient["reliable"] is True
