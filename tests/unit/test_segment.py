"""Segmentation: screenplay, play, chapter and letter headings, JSON scene lists, lossless token chunks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from storyjudge.core.segmentation import guess_title, join_scenes, normalize_scenes, segment_document
from storyjudge.core.tokens import count_tokens

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HUGE = 10**9  # a chunk size no scene reaches: one scene per heading


def assert_lossless(text: str, scenes: list) -> None:
    assert "".join(scene["text"] for scene in scenes) == text
    for position, scene in enumerate(scenes):
        assert scene["index"] == position
        assert text[scene["start"] : scene["end"]] == scene["text"]
    assert [s["end"] for s in scenes[:-1]] == [s["start"] for s in scenes[1:]]


SCREENPLAY = """FADE IN:

INT. KITCHEN - NIGHT

MARA stands at the window. Rain.

MARA
He is not coming back.

EXT. HARBOUR - CONTINUOUS

A boat pulls away. TOMAS watches from the pier.

12 INT./EXT. CAR - MOVING - DAY 12

Mara drives. The wipers beat.
"""


def test_screenplay_scene_headings() -> None:
    scenes, rule = segment_document(SCREENPLAY)
    assert rule == "screenplay"
    assert [s["title"] for s in scenes] == [
        "INT. KITCHEN - NIGHT",
        "EXT. HARBOUR - CONTINUOUS",
        "12 INT./EXT. CAR - MOVING - DAY 12",
    ]
    assert [s["id"] for s in scenes] == ["S001", "S002", "S003"]
    assert scenes[0]["text"].startswith("FADE IN:")  # a short opening joins the first scene
    assert "TOMAS watches" in scenes[1]["text"]
    assert_lossless(SCREENPLAY, scenes)


def test_macbeth_has_28_scenes_in_5_acts() -> None:
    text = (EXAMPLES / "macbeth.md").read_text(encoding="utf-8")
    scenes, rule = segment_document(text, HUGE)
    assert rule == "play"
    assert len(scenes) == 28
    acts = [re.match(r"ACT ([IVX]+), SCENE", s["title"]).group(1) for s in scenes]  # type: ignore[union-attr]
    assert sorted(set(acts), key=acts.index) == ["I", "II", "III", "IV", "V"]
    assert [acts.count(a) for a in ("I", "II", "III", "IV", "V")] == [7, 4, 6, 3, 8]
    assert scenes[1]["title"] == "ACT I, SCENE II. A camp near Forres"
    assert scenes[7]["text"].startswith("## ACT II")  # the act heading opens its first scene
    assert scenes[-1]["title"] == "ACT V, SCENE VIII. Another part of the field"
    assert_lossless(text, scenes)


def test_long_scenes_split_into_numbered_parts_within_the_chunk_size() -> None:
    text = (EXAMPLES / "macbeth.md").read_text(encoding="utf-8")
    scenes, _ = segment_document(text, 2048)
    assert all(count_tokens(s["text"]) <= 2048 for s in scenes)
    parts = [s for s in scenes if s["id"].startswith("S020")]
    assert [s["id"] for s in parts] == ["S020.1", "S020.2"]
    assert parts[0]["title"].endswith("(part 1/2)")
    assert len({s["id"].split(".")[0] for s in scenes}) == 28  # splitting never renumbers other scenes
    assert_lossless(text, scenes)


def test_frankenstein_letters_and_chapters_without_the_contents_list() -> None:
    text = (EXAMPLES / "frankenstein.txt").read_text(encoding="utf-8")
    scenes, rule = segment_document(text, HUGE)
    assert rule == "chapters"
    titles = [s["title"] for s in scenes]
    assert titles == [f"Letter {n}" for n in range(1, 5)] + [f"Chapter {n}" for n in range(1, 25)]
    assert "CONTENTS" in scenes[0]["text"]  # the contents list is not a scene of its own
    assert_lossless(text, scenes)


def test_chapter_heading_forms() -> None:
    text = "CHAPTER I. The Storm\n\nRain fell.\n\nCHAPTER II\n\nIt stopped.\n\nChapter Three: After\n\nSun.\n"
    scenes, rule = segment_document(text)
    assert rule == "chapters"
    assert [s["title"] for s in scenes] == ["Chapter I. The Storm", "Chapter II", "Chapter Three. After"]
    assert_lossless(text, scenes)


def test_play_with_acts_only() -> None:
    text = "ACT I\n\nThe king speaks.\n\nACT II\n\nThe queen answers.\n"
    scenes, rule = segment_document(text)
    assert (rule, [s["title"] for s in scenes]) == ("play", ["ACT I", "ACT II"])


def test_a_long_opening_is_a_scene_of_its_own() -> None:
    preface = "A preface about the author and the book. " * 80
    text = f"{preface}\n\nChapter 1\n\nOne.\n\nChapter 2\n\nTwo.\n"
    scenes, _ = segment_document(text)
    assert [s["title"] for s in scenes] == ["Opening", "Chapter 1", "Chapter 2"]


def test_unstructured_text_becomes_token_chunks_losing_nothing() -> None:
    sentence = "The lighthouse keeper counted the ships that passed his rock every evening. "
    paragraphs = [sentence * (3 + i % 5) for i in range(40)]
    text = "\n\n".join(paragraphs) + "\n"
    scenes, rule = segment_document(text, 100)
    assert rule == "token-chunks"
    assert len(scenes) > 10
    assert all(count_tokens(s["text"]) <= 100 for s in scenes)
    assert all(s["title"] == "" for s in scenes)
    assert all(s["text"].rstrip().endswith(".") for s in scenes)  # cut at sentence boundaries
    assert_lossless(text, scenes)


def test_a_single_heading_is_not_structure() -> None:
    text = "Chapter 1\n\nThere is only one chapter here, so it is plain text.\n"
    assert segment_document(text)[1] == "token-chunks"


def test_json_list_of_strings_and_objects() -> None:
    items = ["Alice waits.", {"title": "Harbour", "text": "Bob arrives."}, "   ", {"text": "They sail."}]
    scenes, rule = segment_document(json.dumps(items))
    assert rule == "json"
    assert [(s["id"], s["title"], s["text"]) for s in scenes] == [
        ("S001", "", "Alice waits."),
        ("S002", "Harbour", "Bob arrives."),
        ("S003", "", "They sail."),
    ]
    joined = "Alice waits.\n\nBob arrives.\n\n   \n\nThey sail."
    assert [joined[s["start"] : s["end"]] for s in scenes] == [s["text"] for s in scenes]
    assert join_scenes(scenes) == "Alice waits.\n\nBob arrives.\n\nThey sail."


def test_json_list_with_a_bad_item_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="scene 2"):
        segment_document(json.dumps(["fine", 42]))


def test_complete_scene_records_are_kept_as_given() -> None:
    given, _ = segment_document(SCREENPLAY)
    assert normalize_scenes(given) == given
    assert [s["text"] for s in normalize_scenes(["one", "two"])] == ["one", "two"]


def test_guess_title() -> None:
    assert guess_title("# Macbeth\n\n## ACT I") == "Macbeth"
    assert guess_title("\n\nFrankenstein;\n\nor, the Modern Prometheus") == "Frankenstein"
    assert guess_title("x" * 200) == "document"
