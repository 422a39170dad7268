"""Sentence splitting as BooookScore needs it: one unit per real sentence of a summary."""

from __future__ import annotations

import pytest

from storyjudge.core.textsplit import sentence_spans, sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Mr. J. R. R. Tolkien wrote it... Then it was published.",
            ["Mr. J. R. R. Tolkien wrote it...", "Then it was published."],
        ),
        (
            '"I don\'t know..." he said. "Maybe." She nodded.',
            ['"I don\'t know..." he said.', '"Maybe."', "She nodded."],
        ),
        (
            "“Curly quotes,” she said. “Do they work?” They do.",
            ["“Curly quotes,” she said.", "“Do they work?”", "They do."],
        ),
        ('He asked, "Who is John?" Nobody answered.', ['He asked, "Who is John?"', "Nobody answered."]),
        (
            "Harry meets Prof. McGonagall at No. 4 Privet Drive. It is 1991.",
            ["Harry meets Prof. McGonagall at No. 4 Privet Drive.", "It is 1991."],
        ),
        (
            "It was 3 a.m. when she woke. The house was silent.",
            ["It was 3 a.m. when she woke.", "The house was silent."],
        ),
        (
            "The ship - the S.S. Minnow - sank. All survived!",
            ["The ship - the S.S. Minnow - sank.", "All survived!"],
        ),
        ("Anna—tired, hungry—sleeps. Bob?! He wakes.", ["Anna—tired, hungry—sleeps.", "Bob?!", "He wakes."]),
        ("“I know…” she whispers. He nods.", ["“I know…” she whispers.", "He nods."]),
    ],
)
def test_quotes_initials_and_ellipses(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


def test_hard_wrapped_lines_do_not_end_sentences() -> None:
    text = "Anna went to\nthe store with Mr.\nJ. Smith. She bought\nbread and left."
    assert [" ".join(s.split()) for s in sentences(text)] == [
        "Anna went to the store with Mr. J. Smith.",
        "She bought bread and left.",
    ]


def test_windows_line_endings_wrap_too() -> None:
    assert [" ".join(s.split()) for s in sentences("She walked\r\nhome. He stayed.")] == [
        "She walked home.",
        "He stayed.",
    ]


def test_paragraphs_headings_and_list_items_stay_apart() -> None:
    text = (
        "Part One\n\nThe war ends. Peace follows.\nChapter Two\nAnna returns.\n- She marries.\n1. He leaves."
    )
    assert sentences(text) == [
        "Part One",
        "The war ends.",
        "Peace follows.",
        "Chapter Two",
        "Anna returns.",
        "- She marries.",
        "1. He leaves.",
    ]


def test_spans_stay_lossless_when_lines_are_unwrapped() -> None:
    text = "Anna went to\nthe store.\r\nShe bought\nbread.\n\n- a list\n- of things\n"
    spans = sentence_spans(text)
    assert "".join(text[a:b] for a, b in spans) == text


def test_punkt_splits_as_nltk_does_and_pysbd_stays_the_default() -> None:
    text = "Part One\n\nMr. Smith went to the\nold mill. He stayed. 'Who?' she asked."
    # punkt, like nltk.sent_tokenize: line breaks are spaces, and a quoted question ends a sentence
    assert sentences(text, "punkt") == [
        "Part One\n\nMr. Smith went to the\nold mill.",
        "He stayed.",
        "'Who?'",
        "she asked.",
    ]
    assert (
        sentences(text)
        == sentences(text, "pysbd")
        == [
            "Part One",
            "Mr. Smith went to the\nold mill.",
            "He stayed.",
            "'Who?' she asked.",
        ]
    )
    assert sentences("  \n ", "punkt") == []


def test_an_unknown_splitter_is_refused() -> None:
    with pytest.raises(ValueError, match="punkt"):
        sentences("A. B.", "spacy")
