"""Fact collection, evidence selection and scoring of the factscore graph's nodes."""

from __future__ import annotations

from typing import Any

from nodes.retrieve import select_scenes
from storyjudge.core.narrativefactscore import score_card, unique_facts
from storyjudge.core.passages import span_text


def fact(i: int, s: int, text: str, iteration: int = 0) -> Any:
    return {"id": f"i{iteration}-s{s}-f{i}", "iteration": iteration, "sentence_index": s, "text": text}


def verdict(f: Any, status: str) -> Any:
    return {
        "fact": f,
        "status": status,
        "rationale": "",
        "feedback": "",
        "raw": "",
        "evidence": {"query": "", "scenes": [], "ckg_lines": []},
    }


def test_collect_drops_blank_and_duplicate_facts_and_keeps_order() -> None:
    raw = [
        fact(0, 1, "Bob gives Alice a map."),
        fact(0, 0, "Alice meets Bob."),
        fact(1, 0, "   "),
        fact(2, 0, "alice meets bob"),
        fact(1, 1, "Bob gives Alice a map!"),
        fact(0, 0, "Old round fact.", iteration=1),
    ]
    assert [f["text"] for f in unique_facts(raw, 0)] == ["Alice meets Bob.", "Bob gives Alice a map."]


def test_score_excludes_unjudged_and_other_iterations() -> None:
    a, b, c, d = fact(0, 0, "a"), fact(1, 0, "b"), fact(0, 1, "c"), fact(0, 0, "old", iteration=1)
    verdicts = [
        verdict(a, "supported"),
        verdict(b, "unjudged"),
        verdict(c, "unsupported"),
        verdict(d, "supported"),
    ]
    card = score_card(0, ["s0", "s1"], verdicts, decompose_failures=1)
    assert card["score"] == 0.5
    assert (card["supported"], card["unsupported"], card["unjudged"], card["facts"]) == (1, 1, 1, 3)
    assert card["per_sentence"][0]["score"] == 1.0 and card["per_sentence"][0]["judged"] == 1
    assert card["per_sentence"][1]["score"] == 0.0
    assert card["decompose_failures"] == 1


def test_score_is_none_when_nothing_judged() -> None:
    card = score_card(0, ["s0"], [verdict(fact(0, 0, "a"), "unjudged")], 0)
    assert card["score"] is None and card["unjudged"] == 1


def test_select_scenes_prefers_whole_scenes_then_passages_within_budget() -> None:
    scenes = {
        "S1": {"id": "S1", "index": 0, "title": "one", "text": "word " * 50, "start": 0, "end": 1},
        "S2": {"id": "S2", "index": 1, "title": "two", "text": "word " * 500, "start": 1, "end": 2},
    }
    hits = [
        {"id": "S1", "title": "one", "passage": "word " * 10, "score": 0.9},
        {"id": "S2", "title": "two", "passage": "word " * 10, "score": 0.8},
    ]
    chosen = select_scenes(hits, scenes, budget=100)  # type: ignore[arg-type]
    assert [(s["id"], s["excerpt"]) for s in chosen] == [("S1", False), ("S2", True)]
    # each names its text by a span of its scene: the whole scene, or the passage
    texts = {sid: str(scene["text"]) for sid, scene in scenes.items()}
    assert [span_text(s, texts) for s in chosen] == ["word " * 50, "word " * 10]
    assert all("text" not in s for s in chosen)
    assert select_scenes(hits, scenes, budget=5) == []  # type: ignore[arg-type]


def test_echoed_data_tags_are_removed_from_model_output() -> None:
    import prompts

    assert (
        prompts.unwrap_data("<summary>\nMacbeth meets the witches.\n</summary>")
        == "Macbeth meets the witches."
    )
    assert prompts.unwrap_data('<scene id="S1">\nText <i>x</i>.') == "Text <i>x</i>."


def test_coverage_counts_unjudged_facts_and_undecomposed_sentences() -> None:
    facts = [fact(i, 0, f"f{i}") for i in range(4)]
    verdicts = [verdict(facts[0], "supported"), verdict(facts[1], "supported")]
    verdicts += [verdict(facts[2], "unjudged"), verdict(facts[3], "unjudged")]
    # 2 of 4 facts judged, and the second of two sentences never decomposed: coverage 0.5 * 0.5
    card = score_card(0, ["s0", "s1"], verdicts, 1, failed_sentences={1})
    assert card["score"] == 1.0
    assert card["judged"] == 2 and card["coverage"] == 0.25 and card["reliable"] is False
    assert [row["decomposed"] for row in card["per_sentence"]] == [True, False]


def test_worse_judging_cannot_raise_a_reliable_score() -> None:
    facts = [fact(i, 0, f"f{i}") for i in range(10)]
    honest = score_card(
        0, ["s"], [verdict(f, "supported" if i < 8 else "unsupported") for i, f in enumerate(facts)], 0
    )
    # the same summary with the two unsupported verdicts lost to parse failures
    broken = score_card(
        0, ["s"], [verdict(f, "supported" if i < 8 else "unjudged") for i, f in enumerate(facts)], 0
    )
    assert honest["score"] == 0.8 and honest["reliable"] is True
    assert broken["score"] == 1.0 and broken["coverage"] == 0.8 and broken["reliable"] is False


def test_coverage_floor_is_a_setting() -> None:
    facts = [fact(i, 0, f"f{i}") for i in range(10)]
    verdicts = [verdict(f, "supported" if i < 8 else "unjudged") for i, f in enumerate(facts)]
    assert score_card(0, ["s"], verdicts, 0, coverage_floor=0.8)["reliable"] is True
    assert score_card(0, ["s"], verdicts, 0, coverage_floor=0.81)["reliable"] is False


def test_a_summary_whose_sentences_all_failed_has_no_coverage() -> None:
    card = score_card(0, ["s0", "s1"], [], 2, failed_sentences={0, 1})
    assert card["score"] is None and card["coverage"] == 0.0 and card["reliable"] is False
