from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodes.chunk import SCENE_JOINER, chunk_document, chunk_scenes
from storyjudge.core import officialchunks
from storyjudge.core.officialchunks import official_starts, split_official
from storyjudge.core.records import Scene
from storyjudge.core.textsplit import paragraphs, sentence_spans, split_filled
from storyjudge.core.tokens import count_tokens

WORDS = st.sampled_from(
    [
        "Victor",
        "the",
        "creature",
        "fled",
        "Geneva",
        "snow.",
        "Elizabeth!",
        "Why?",
        "\n\n",
        "\n",
        "  ",
        "—",
        "ice,",
    ]
)
TEXTS = st.lists(WORDS, min_size=0, max_size=300).map(" ".join) | st.text(max_size=1500)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, budget=st.integers(min_value=8, max_value=120))  # one character can be 4 tokens
def test_document_chunks_lose_no_text_and_respect_the_budget(text: str, budget: int) -> None:
    chunks = chunk_document(text, budget)
    assert "".join(c["text"] for c in chunks) == text
    assert all(c["tokens"] == count_tokens(c["text"]) <= budget for c in chunks)
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert text[chunk["start"] : chunk["end"]] == chunk["text"]


def _scenes(texts: list[str], contiguous: bool = True) -> list[Scene]:
    scenes, offset = [], 0
    for i, text in enumerate(texts):
        scenes.append(
            Scene(id=f"S{i + 1:03d}", index=i, title="", text=text, start=offset, end=offset + len(text))
        )
        offset += len(text) + (0 if contiguous else len(SCENE_JOINER))
    return scenes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.lists(WORDS, min_size=1, max_size=80).map(" ".join), min_size=1, max_size=12),
    budget=st.integers(min_value=4, max_value=60),
    contiguous=st.booleans(),
)
def test_scene_chunks_keep_scenes_whole_unless_over_budget(
    texts: list[str], budget: int, contiguous: bool
) -> None:
    scenes = _scenes(texts, contiguous)
    chunks = chunk_scenes(scenes, budget)
    assert all(c["tokens"] <= budget for c in chunks)
    # every scene's text is recovered: whole inside one chunk, or as consecutive parts that join back to it
    for scene in scenes:
        holding = [c for c in chunks if scene["id"] in c["scene_ids"]]
        if count_tokens(scene["text"]) <= budget:
            assert len(holding) == 1 and scene["text"] in holding[0]["text"]
        else:
            assert all(c["scene_ids"] == [scene["id"]] for c in holding)
            assert "".join(c["text"] for c in holding) == scene["text"]
    # packed chunks are their scenes joined in order, with nothing between contiguous scenes
    by_id = {s["id"]: s for s in scenes}
    for chunk in chunks:
        members = [by_id[i] for i in chunk["scene_ids"]]
        if len(members) > 1:
            joiner = "" if contiguous else SCENE_JOINER
            assert chunk["text"] == joiner.join(m["text"] for m in members)
    order = [i for c in chunks for i in dict.fromkeys(c["scene_ids"])]
    assert list(dict.fromkeys(order)) == [s["id"] for s in scenes]


def test_scenes_are_packed_greedily_and_an_oversized_scene_is_split() -> None:
    small = "Victor walks. " * 5  # ~15 tokens
    big = "The creature speaks at length about its loneliness. " * 40  # ~400 tokens
    scenes = _scenes([small, small, big, small])
    chunks = chunk_scenes(scenes, 100)
    assert chunks[0]["scene_ids"] == ["S001", "S002"]
    assert chunks[0]["text"] == small + small
    big_parts = [c for c in chunks if c["scene_ids"] == ["S003"]]
    assert len(big_parts) >= 4 and "".join(c["text"] for c in big_parts) == big
    assert chunks[-1]["scene_ids"] == ["S004"]
    assert chunks[0]["start"] == 0 and chunks[0]["end"] == 2 * len(small)


def test_blank_scenes_are_skipped_and_bad_budget_refused() -> None:
    assert chunk_scenes(_scenes(["", "Hello there."]), 50)[0]["scene_ids"] == ["S002"]
    with pytest.raises(ValueError):
        chunk_scenes(_scenes(["x"]), 0)


ROOT = Path(__file__).resolve().parents[2]
FRANKENSTEIN = ROOT / "examples" / "frankenstein.txt"  # the shared novel, byte for byte
OFFICIAL = ROOT / "tests" / "fixtures" / "frankenstein-official-chunks-2048.json"


def official_chunks() -> list[dict[str, str]]:
    """The official chunker's 49 Frankenstein chunks (whitespace-normalised: head, tail, length, hash)."""
    rows: list[dict[str, str]] = json.loads(OFFICIAL.read_text(encoding="utf-8"))["chunks"]
    return rows


def fingerprint(text: str) -> dict[str, object]:
    flat = " ".join(text.split())
    digest = hashlib.sha256(flat.encode()).hexdigest()[:16]
    return {"head": flat[:40], "tail": flat[-40:], "chars": len(flat), "sha256": digest}


def test_official_chunker_cuts_frankenstein_where_the_official_code_does() -> None:
    text = FRANKENSTEIN.read_text(encoding="utf-8")
    chunks = chunk_document(text, 2048, chunker="official")
    assert "".join(c["text"] for c in chunks) == text
    assert [fingerprint(c["text"]) for c in chunks] == official_chunks()  # 49, the same boundaries


def test_default_chunks_of_frankenstein_are_no_more_than_the_official_and_end_at_sentences() -> None:
    text = FRANKENSTEIN.read_text(encoding="utf-8")
    chunks = chunk_document(text, 2048)
    assert "".join(c["text"] for c in chunks) == text
    assert len(chunks) <= len(official_chunks()) == 49
    assert all(c["tokens"] <= 2048 for c in chunks)
    ends, offset = {c["end"] for c in chunks}, 0
    for paragraph in paragraphs(text):  # a chunk ends with a paragraph or with one of its sentences
        inside = {end - offset for end in ends if offset < end < offset + len(paragraph)}
        if inside:
            assert inside <= {end for _, end in sentence_spans(paragraph)}
        offset += len(paragraph)


def test_official_chunker_cuts_an_overlong_line_at_its_second_to_last_sentence_end() -> None:
    line = "One sat. Two sat. Three sat. Four sat."
    pieces = split_official("Intro line\n\n" + line + "\n" + "Coda.", 8)
    assert "".join(pieces) == "Intro line\n\n" + line + "\nCoda."
    # the line is over budget: with the intro it is cut back sentence by sentence until it fits
    assert all(count_tokens(" ".join(p.split())) <= 8 for p in pieces[:-1])
    assert pieces[0].startswith("Intro line") and pieces[0].rstrip().endswith(".")
    assert split_official("Short.\nAlso short.", 50) == ["Short.\nAlso short."]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, budget=st.integers(min_value=8, max_value=120))
def test_official_chunks_lose_no_text(text: str, budget: int) -> None:
    assert "".join(c["text"] for c in chunk_document(text, budget, chunker="official")) == text


def test_default_chunks_keep_up_with_the_official_chunker_where_sentences_alone_would_not() -> None:
    text = FRANKENSTEIN.read_text(encoding="utf-8")[:60_000]
    official = len(split_official(text, 512))
    sentences_only = split_filled(text, 512)
    assert len(sentences_only) > official  # whole sentences at 512 tokens would need more chunks
    chunks = chunk_document(text, 512)
    assert len(chunks) <= official and "".join(c["text"] for c in chunks) == text
    assert all(c["tokens"] <= 512 for c in chunks)


def exact_search_only(self: officialchunks._Lines, begin: int, lo: int, hi: int, limit: int) -> int:
    """The official chunker's search with no guess: counts chunks line by line, galloping."""
    return officialchunks._first_overflow(self.joined, begin, self.ends, lo, hi, limit, self.count)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, budget=st.integers(min_value=8, max_value=120))
def test_the_guessed_overflow_cuts_where_the_exact_search_alone_cuts(text: str, budget: int) -> None:
    """Line sums only guess where a chunk overflows; checked by exact counts, the cuts are the exact search's."""
    guessed = official_starts(text, budget)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(officialchunks._Lines, "first_overflow", exact_search_only)
        assert official_starts(text, budget) == guessed


def test_a_wrong_guess_falls_back_to_the_exact_search() -> None:
    """A counter whose lone lines count a third more or less than in a chunk misleads every guess, both ways."""
    text = FRANKENSTEIN.read_text(encoding="utf-8")[:40_000]

    def skewed(piece: str) -> int:
        n = count_tokens(piece)
        return n if "\n" in piece else (n * 4 // 3 if len(piece) % 2 else n * 2 // 3)

    guessed = official_starts(text, 300, count=skewed)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(officialchunks._Lines, "first_overflow", exact_search_only)
        assert official_starts(text, 300, count=skewed) == guessed
    assert len(guessed) > 10
