"""Text splitting: token-bounded pieces that join back to exactly the input, and sentence splitting."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storyjudge.core.textsplit import (
    _segmenter,
    literal_spans,
    paragraphs,
    sentence_spans,
    sentences,
    split_by_tokens,
    split_counted,
)
from storyjudge.core.tokens import count_tokens, fewest_tokens

WORD = st.text(alphabet=st.characters(categories=["L", "N", "P", "S"]), min_size=1, max_size=12)
SEPARATOR = st.sampled_from([" ", " ", " ", "\n", "\n\n", "\n \n\t", ". ", "! ", "... ", "\u3002", "\t"])
PROSE = st.lists(st.tuples(WORD, SEPARATOR), max_size=120).map(lambda pairs: "".join(a + b for a, b in pairs))
NO_WHITESPACE = st.text(
    alphabet=st.characters(categories=["L", "N", "P", "S", "M"]), min_size=1, max_size=600
)
LONG_LINE = st.builds(lambda word, n: (word + " ") * n, WORD, st.integers(1, 200))
ANY_TEXT = st.text(max_size=800)
TEXT = st.one_of(PROSE, NO_WHITESPACE, LONG_LINE, ANY_TEXT, st.lists(PROSE, max_size=4).map("\n\n".join))
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(text=TEXT, max_tokens=st.integers(min_value=4, max_value=96))
def test_split_by_tokens_is_lossless_and_within_budget(text: str, max_tokens: int) -> None:
    pieces = split_by_tokens(text, max_tokens)
    assert "".join(pieces) == text
    assert all(piece for piece in pieces)
    assert all(count_tokens(piece) <= max_tokens for piece in pieces)


@SETTINGS
@given(
    text=st.one_of(
        TEXT,
        st.builds(
            lambda run, n: run * n, st.sampled_from([" ", "-", "=", "\n", "\u3002"]), st.integers(1, 3000)
        ),
    )
)
def test_fewest_tokens_is_a_lower_bound_of_the_count(text: str) -> None:
    assert fewest_tokens(text) <= count_tokens(text)


@SETTINGS
@given(text=st.lists(PROSE, min_size=2, max_size=6).map("\n\n".join), max_tokens=st.integers(1, 40))
def test_a_text_that_cannot_fit_splits_as_when_counted_whole(text: str, max_tokens: int) -> None:
    """Skipping the whole text's count changes nothing: the same pieces with the same counts."""
    counted_whole = split_counted(text, max_tokens, lambda piece: count_tokens(piece))
    assert split_counted(text, max_tokens) == counted_whole


def test_a_novel_splits_the_same_whether_or_not_it_is_counted_whole() -> None:
    text = "\n\n".join(f"Chapter {i}. The creature wandered on. It was cold and dark." for i in range(400))
    assert fewest_tokens(text) > 64  # so the whole text is never counted
    counted: list[str] = []

    def spy(piece: str) -> int:
        counted.append(piece)
        return count_tokens(piece)

    assert split_counted(text, 64) == split_counted(text, 64, spy)
    assert text in counted  # the custom counter has no lower bound: it counts the whole text first


@SETTINGS
@given(text=TEXT)
def test_sentence_spans_cover_the_text_without_gaps(text: str) -> None:
    spans = sentence_spans(text)
    assert "".join(text[a:b] for a, b in spans) == text
    assert all(a < b for a, b in spans)


@SETTINGS
@given(text=TEXT)
def test_paragraphs_are_lossless(text: str) -> None:
    assert "".join(paragraphs(text)) == text


def test_short_text_is_one_piece_and_empty_text_none() -> None:
    assert split_by_tokens("A short scene.", 64) == ["A short scene."]
    assert split_by_tokens("", 64) == []
    with pytest.raises(ValueError):
        split_by_tokens("text", 0)


def test_paragraph_boundaries_are_preferred() -> None:
    para = "Macbeth meets the witches on the heath. They greet him as king. " * 3
    text = "\n\n".join([para.strip()] * 4)
    budget = count_tokens(para) + 5
    pieces = split_by_tokens(text, budget)
    assert "".join(pieces) == text
    assert len(pieces) == 4
    assert all(p.rstrip().endswith("king.") for p in pieces)


def test_long_paragraph_is_cut_at_sentence_boundaries() -> None:
    text = " ".join(f"Sentence number {i} tells of the thane." for i in range(60))
    pieces = split_by_tokens(text, 50)
    assert "".join(pieces) == text
    assert len(pieces) > 1
    assert all(p.rstrip().endswith("thane.") for p in pieces)


def test_text_without_boundaries_is_still_split() -> None:
    text = "x" * 5000 + "é" * 300 + "\U0001f600" * 50
    pieces = split_by_tokens(text, 16)
    assert "".join(pieces) == text
    assert max(count_tokens(p) for p in pieces) <= 16


def test_custom_counter() -> None:
    pieces = split_by_tokens("one two three four five six", 2, count=lambda s: len(s.split()))
    assert "".join(pieces) == "one two three four five six"
    assert all(len(p.split()) <= 2 for p in pieces)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '"Stop!" cried Banquo. "Who goes there?" The porter did not answer.',
            ['"Stop!" cried Banquo.', '"Who goes there?"', "The porter did not answer."],
        ),
        (
            "J. R. R. Tolkien wrote it. George R. R. Martin did not.",
            ["J. R. R. Tolkien wrote it.", "George R. R. Martin did not."],
        ),
        ("Wait... what? He left.", ["Wait... what?", "He left."]),
        (
            "Mr. Smith met Dr. Jones at 5 p.m. on Main Street. They talked until dawn.",
            ["Mr. Smith met Dr. Jones at 5 p.m. on Main Street.", "They talked until dawn."],
        ),
        (
            "It cost $3.50, i.e. too much. She paid anyway.",
            ["It cost $3.50, i.e. too much.", "She paid anyway."],
        ),
        ("The U.S. army arrived. Everyone cheered.", ["The U.S. army arrived.", "Everyone cheered."]),
        (
            "He whispered: 'Is this a dagger?' Then silence.",
            ["He whispered: 'Is this a dagger?'", "Then silence."],
        ),
        ("  Leading and trailing space.  \n\n", ["Leading and trailing space."]),
        ("", []),
    ],
)
def test_sentences_on_tricky_text(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(
        TEXT,
        st.lists(
            st.sampled_from(["He left.", "He left. ", "Dr. Who?", "\u2003", "No!", "\n"]), max_size=40
        ).map("".join),
    )
)
def test_sentences_are_placed_where_pysbd_itself_places_them(text: str) -> None:
    """Found by ``str.find`` rather than one regex per sentence: the same spans, repeated sentences included."""
    import pysbd

    own = pysbd.Segmenter(language="en", clean=False, char_span=True)
    ours = _segmenter()
    assert [(s.sent, s.start, s.end) for s in ours.segment(text)] == [  # type: ignore[attr-defined]
        (s.sent, s.start, s.end) for s in own.segment(text)
    ]
    sentences_found = own.processor(text).process() if text else []
    assert literal_spans(text, sentences_found) == [
        (s.start, s.end) for s in own.sentences_with_char_spans(sentences_found)
    ]
