"""Planted control items: built without a model, false or true by construction, and the judge's record on them."""

from __future__ import annotations

import random
from typing import Any

from storyjudge.core.planted import (
    annotator_check,
    build_pool,
    decide,
    error_rates,
    invented_name,
    judge_check,
    plant_sentences,
)
from storyjudge.core.records import PlantedFact, Scene


def plant_facts(scenes: list[Scene], ckg: dict[str, Any], **options: int) -> list[PlantedFact]:
    """``build_pool``'s false facts, then its true ones: the pool the plant node draws from."""
    made_false, made_true, _ = build_pool(scenes, ckg, **options)
    return [*made_false, *made_true]


SCENES = [
    Scene(id="S001", index=0, title="", text="Ann meets Ben at the mill by the river bank.", start=0, end=1),
    Scene(id="S002", index=1, title="", text="Ben gives Ann the key to the old mill house.", start=1, end=2),
    Scene(
        id="S003", index=2, title="", text="Far away, Cy rows his small boat across the lake.", start=2, end=3
    ),
]
CKG: dict[str, Any] = {
    "nodes": [
        {"id": "Ann", "aliases": [], "mentions": 3},
        {"id": "Ben", "aliases": [], "mentions": 3},
        {"id": "Cy", "aliases": [], "mentions": 1},
    ],
    "edges": [
        {"source": "Ben", "target": "Ann", "predicate": "gives key to", "key": "gives key to", "count": 2}
    ],
}


def _verdict(kind: str, status: str) -> Any:
    return {"status": status, "planted": {"kind": kind}}


def test_an_invented_name_shares_no_word_with_the_text() -> None:
    text = "Tobren and Vask and Ysolde walk by."
    taken: set[str] = set()
    names = [invented_name(text, random.Random(0), taken) for _ in range(5)]
    assert len(set(names)) == 5
    for name in names:
        assert not any(word.lower() in text.lower().split() for word in name.split())


def test_facts_are_false_or_true_by_construction_and_the_same_per_seed() -> None:
    facts = plant_facts(SCENES, CKG, false=4, true=2, seed=3, iteration=2)
    assert facts == plant_facts(SCENES, CKG, false=4, true=2, seed=3, iteration=2)
    assert [f["id"] for f in facts] == [*(f"i2-p{n}" for n in range(4)), "i2-t0", "i2-t1"]
    kinds = sorted(f["kind"] for f in facts)
    assert kinds == ["invented", "invented", "swapped", "swapped", "verbatim", "verbatim"]
    for fact in facts:
        if fact["kind"] == "swapped":  # Cy shares no scene with Ann or Ben
            assert "Cy" in fact["text"] and "no scene names both Cy" in fact["built"]
        if fact["kind"] == "verbatim":
            assert any(fact["text"] == scene["text"] for scene in SCENES)
            assert fact["expected"] == "supported"
    assert plant_facts(SCENES, CKG, false=0, true=0, seed=3, iteration=0) == []


def test_no_swapped_role_where_every_character_meets_every_other() -> None:
    together = [
        Scene(**{**SCENES[0], "text": "Ann, Ben and Cy meet at the mill by the river bank."}),
        SCENES[1],
        Scene(**{**SCENES[2], "text": "Far away, Cy rows Ann and Ben across the lake."}),
    ]
    facts = plant_facts(together, CKG, false=4, true=2, seed=0, iteration=0)
    assert "swapped" not in {f["kind"] for f in facts}
    assert sum(f["kind"] == "invented" for f in facts) == 4, "easy ones take the hard ones' places"


def _false(status: str) -> Any:
    return {"status": status, "planted": {"kind": "invented", "expected": "unsupported"}}


def test_the_judge_record_counts_unreadable_verdicts_apart_and_carries_its_decision() -> None:
    verdicts = [
        _verdict("invented", "unsupported"),
        _verdict("swapped", "supported"),
        _verdict("swapped", "unjudged"),
        _verdict("verbatim", "supported"),
    ]
    check = judge_check(verdicts, "failed")
    assert check["hard"] == {"planted": 2, "judged": 1, "accepted": 1}
    assert check["false_acceptance"] == 0.5 and check["passed"] is False and check["decision"] == "failed"
    assert check["note"].startswith("the judge accepted 1 of 2 planted false facts")
    low, high = check["false_acceptance_ci95"] or [0.0, 0.0]
    assert 0.0 < low < 0.5 < high < 1.0, "Clopper-Pearson over 2 judged false facts is wide"
    assert check["true_acceptance_ci95"] == [0.025, 1.0]
    assert (
        check["rule"]["chance_good_judge_flagged"] <= 0.05
        and check["rule"]["chance_bad_judge_passed"] <= 0.05
    )
    few = judge_check(verdicts, "undecided", max_false=24, built=2, why="2 relations")
    assert few["passed"] is False
    assert few["note"].startswith(
        "judge not checked: only 2 false facts could be built from this story (2 relations)"
    )


def test_the_rule_decides_early_when_clear_and_keeps_its_error_rates() -> None:
    assert decide([True] * 4) == "failed", "4 of the first 8 accepted already shows a rate above 10%"
    assert decide([False] * 8) == "passed"
    assert decide([False] * 7) is None, "plant up to the next look"
    assert decide([True, False, False, False, False, False, False, False]) is None
    assert decide([True] + [False] * 15) == "passed"
    two = [True] + [False] * 7 + [True] + [False] * 7  # 2 of 16: neither yet
    assert decide(two) is None
    assert (
        decide([*two, *[True] * 3, *[False] * 5]) == "passed"
        and decide([*two, *[True] * 4, *[False] * 4]) == "failed"
    )
    assert decide([True] * 4, final=True) == "failed", "4 of 4 is decisive on its own"
    assert decide([False] * 4, final=True) == "undecided", "0 of 4 cannot show a rate below 40%"
    assert decide([], final=True) == "undecided"
    rates = error_rates()
    assert rates["good_flagged"] <= 0.05 and rates["bad_passed"] <= 0.05
    assert rates["good_expected_items"] < 24 and rates["bad_expected_items"] < 24
    for most in range(1, 25):  # truncated rules flag more (undecided) but never pass a bad judge more often
        assert error_rates(most)["bad_passed"] <= 0.05


def test_planted_sentences_sit_in_their_own_copy_of_the_summary_and_are_scored_apart() -> None:
    sentences = ["Ann meets Ben.", "Ben gives Ann a key."]
    planted = plant_sentences(sentences, count=3, seed=0, summary_id="a")
    assert len(planted) == 3 and planted == plant_sentences(sentences, count=3, seed=0, summary_id="a")
    for item in planted:
        assert item["summary"].count(item["sentence"]) == 1 and 1 <= item["position"] <= 2
    answers = [{"sentence": planted[0]["sentence"], "confused": True}, {"sentence": planted[1]["sentence"]}]
    check = annotator_check(planted, answers, 0.34)
    assert (check["judged"], check["flagged"], check["passed"]) == (1, 1, True)
    lenient = [{"sentence": item["sentence"], "confused": False} for item in planted]
    assert annotator_check(planted, lenient, 0.34)["note"] == (
        "the annotator flagged 0 of 3 planted confusing sentences"
    )


def test_without_characters_in_the_graph_the_story_s_own_names_are_replaced() -> None:
    scenes = [
        Scene(
            id="S001",
            index=0,
            title="",
            text="At dawn Ben meets Ann at the mill by the river.",
            start=0,
            end=1,
        ),
        Scene(
            id="S002",
            index=1,
            title="",
            text="Later that day Ben gives Ann the key to the mill.",
            start=1,
            end=2,
        ),
    ]
    facts = plant_facts(scenes, {"nodes": [], "edges": []}, false=2, true=1, seed=1, iteration=0)
    false = [f for f in facts if f["expected"] == "unsupported"]
    assert len(false) == 2 and all(f["kind"] == "invented" for f in false)
    assert all("replaced by" in f["built"] for f in false)


def test_a_judge_check_recorded_before_the_rule_still_reads() -> None:
    from storyjudge.apps.cli.refine import _judge_line
    from storyjudge.core.coverage import reliability_text

    tally = {"planted": 2, "judged": 2, "accepted": 1}
    old = {
        **{"planted": 6, "easy": tally, "hard": tally, "true": tally, "false_acceptance": 0.5},
        **{"true_acceptance": 0.5, "max_false_acceptance": 0.34, "passed": False, "verdicts": []},
        "note": "the judge accepted 2 of 4 planted false facts",
    }
    line = _judge_line(0, {"judge_check": old})
    assert "at most 34% may be accepted" in line and line.endswith("the score is not reliable")
    card = {"score": 0.5, "coverage": 1.0, "coverage_floor": 0.9, "reliable": False, "judge_check": old}
    assert reliability_text(card) == "not reliable: the judge accepted 2 of 4 planted false facts"
