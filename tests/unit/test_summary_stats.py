from __future__ import annotations

import pytest

from storyjudge.core.summary_stats import summary_stats, trigrams, words
from storyjudge.core.tokens import count_tokens


def test_words_are_lowercase_runs_with_inner_apostrophes() -> None:
    assert words("Victor's DOG barks; it's 3 a.m. — don’t!") == [
        "victor's",
        "dog",
        "barks",
        "it's",
        "3",
        "a",
        "m",
        "don't",
    ]
    assert trigrams(["a", "b", "c", "d"]) == [("a", "b", "c"), ("b", "c", "d")]


def test_hand_computed_novel_and_repeated_trigrams() -> None:
    source = "The cat sat on the mat. The dog ran."
    # summary words: the cat sat on the dog -> trigrams:
    #   (the cat sat) in source, (cat sat on) in source, (sat on the) in source, (on the dog) novel
    stats = summary_stats("The cat sat on the dog.", source)
    assert stats["trigrams"] == 4
    assert stats["novel_trigrams_pct"] == 25.0
    assert stats["repeated_trigrams_pct"] == 0.0
    assert stats["length_tokens"] == count_tokens("The cat sat on the dog.")
    assert stats["words"] == 6


def test_repeated_trigrams_count_every_repeat_after_the_first() -> None:
    # a b c a b c a b c: trigrams abc bca cab abc bca cab abc -> 7 total, distinct 3, repeats 4
    stats = summary_stats("a b c a b c a b c", "x y z")
    assert stats["trigrams"] == 7
    assert stats["repeated_trigrams_pct"] == pytest.approx(100 * 4 / 7, abs=0.01)
    assert stats["novel_trigrams_pct"] == 100.0


def test_trigrams_cross_sentences_and_ignore_case_and_punctuation() -> None:
    stats = summary_stats("Ice. Cold, ICE!", "ice cold ice")
    assert stats["novel_trigrams_pct"] == 0.0


def test_short_summaries_have_no_trigram_percentages() -> None:
    stats = summary_stats("Two words", "anything")
    assert stats["trigrams"] == 0
    assert stats["novel_trigrams_pct"] is None and stats["repeated_trigrams_pct"] is None
