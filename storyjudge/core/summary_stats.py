"""Summary statistics of seed 000's table 2: length, % novel trigrams, % repeated trigrams, and the copy rate.

Words are lowercased runs of letters or digits (inner apostrophes kept); trigrams run across sentences, counted
with multiplicity. Novel: share not in the source; repeated: ``sum(count - 1) / total``; copy rate: ``1 - novel``
in 0..1. All are None with fewer than three words.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from storyjudge.core.tokens import count_tokens

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def words(text: str) -> list[str]:
    """Lowercase words of ``text`` as defined in the module docstring."""
    return _WORD.findall(text.lower().replace("’", "'"))


def trigrams(tokens: list[str]) -> list[tuple[str, str, str]]:
    """Every three consecutive words."""
    return list(zip(tokens, tokens[1:], tokens[2:], strict=False))


def source_trigrams(source: str) -> set[tuple[str, str, str]]:
    """The distinct trigrams of a source text, to measure several summaries against it."""
    return set(trigrams(words(source)))


def copy_rate(summary: str, source: str | set[tuple[str, str, str]]) -> float | None:
    """Share (0..1) of the summary's trigram occurrences found in the source (text or ``source_trigrams``)."""
    summary_trigrams = trigrams(words(summary))
    if not summary_trigrams:
        return None
    known = source_trigrams(source) if isinstance(source, str) else source
    return sum(1 for t in summary_trigrams if t in known) / len(summary_trigrams)


def summary_stats(summary: str, source: str) -> dict[str, Any]:
    """Length and trigram statistics (percentages in 0..100, two decimals) of a summary against its source."""
    summary_trigrams = trigrams(words(summary))
    total = len(summary_trigrams)
    novel: float | None = None
    repeated = novel
    if total:
        known = source_trigrams(source)
        novel = round(100 * sum(1 for t in summary_trigrams if t not in known) / total, 2)
        repeated = round(100 * sum(n - 1 for n in Counter(summary_trigrams).values()) / total, 2)
    return {
        "length_tokens": count_tokens(summary),
        "words": len(words(summary)),
        "trigrams": total,
        "novel_trigrams_pct": novel,
        "repeated_trigrams_pct": repeated,
    }
