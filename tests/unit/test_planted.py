"""Planted control items: built without a model, false or true by construction, and the judge's record on them."""

from __future__ import annotations

import random
from typing import Any

from storyjudge.core.planted import annotator_check, invented_name, judge_check, plant_facts, plant_sentences
from storyjudge.core.records import Scene

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
    facts = plant_facts(SCENES, CKG, count=6, seed=3, iteration=2)
    assert facts == plant_facts(SCENES, CKG, count=6, seed=3, iteration=2)
    assert [f["id"] for f in facts] == [f"i2-p{n}" for n in range(6)]
    kinds = sorted(f["kind"] for f in facts)
    assert kinds == ["invented", "invented", "swapped", "swapped", "verbatim", "verbatim"]
    for fact in facts:
        if fact["kind"] == "swapped":  # Cy shares no scene with Ann or Ben
            assert "Cy" in fact["text"] and "no scene names both Cy" in fact["built"]
        if fact["kind"] == "verbatim":
            assert any(fact["text"] == scene["text"] for scene in SCENES)
            assert fact["expected"] == "supported"
    assert plant_facts(SCENES, CKG, count=0, seed=3, iteration=0) == []


def test_no_swapped_role_where_every_character_meets_every_other() -> None:
    together = [
        Scene(**{**SCENES[0], "text": "Ann, Ben and Cy meet at the mill by the river bank."}),
        SCENES[1],
        Scene(**{**SCENES[2], "text": "Far away, Cy rows Ann and Ben across the lake."}),
    ]
    facts = plant_facts(together, CKG, count=6, seed=0, iteration=0)
    assert "swapped" not in {f["kind"] for f in facts}
    assert sum(f["kind"] == "invented" for f in facts) == 4, "easy ones take the hard ones' places"


def test_the_judge_record_counts_unreadable_verdicts_apart_and_fails_above_the_floor() -> None:
    verdicts = [
        _verdict("invented", "unsupported"),
        _verdict("swapped", "supported"),
        _verdict("swapped", "unjudged"),
        _verdict("verbatim", "supported"),
    ]
    check = judge_check(verdicts, 0.34)
    assert check["hard"] == {"planted": 2, "judged": 1, "accepted": 1}
    assert check["false_acceptance"] == 0.5 and check["passed"] is False
    assert check["note"].startswith("the judge accepted 1 of 2 planted false facts")
    assert judge_check(verdicts, 0.5)["passed"] is True
    assert (
        judge_check([_verdict("invented", "unjudged")], 0.0)["passed"] is True
    )  # not measured: said, not failed


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
    facts = plant_facts(scenes, {"nodes": [], "edges": []}, count=3, seed=1, iteration=0)
    false = [f for f in facts if f["expected"] == "unsupported"]
    assert len(false) == 2 and all(f["kind"] == "invented" for f in false)
    assert all("replaced by" in f["built"] for f in false)
