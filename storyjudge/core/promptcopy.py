"""Whether a model's answer copies the fixed text of its prompt (instructions, definitions, examples).

It does when it shares ``SPAN_WORDS`` consecutive words with the template's fixed text that the request's data
does not also hold: an answer may quote its scene or summary, not the instructions around them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache

SPAN_WORDS = 12
"""Consecutive words an answer must share with the fixed prompt text to count as copying it."""

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_PLACEHOLDER = re.compile(r"\{\{\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\}\}")


def words(text: str) -> list[str]:
    """Lower-case words of a text, punctuation and markup dropped."""
    return _WORD.findall(text.lower())


def _grams(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def fixed_parts(template: str) -> list[str]:
    """The literal pieces of a ``{{placeholder}}`` template."""
    return [part for part in _PLACEHOLDER.split(template) if part.strip()]


@cache
def _fixed_grams(fixed: tuple[str, ...], n: int) -> frozenset[tuple[str, ...]]:
    return frozenset().union(*(_grams(words(part), n) for part in fixed))


def copied_span(
    answer: str, fixed: Iterable[str], data: Iterable[str] = (), *, span: int = SPAN_WORDS
) -> str | None:
    """The first run of ``span`` words the answer shares with the ``fixed`` texts and not with ``data``."""
    source = _fixed_grams(tuple(part for text in fixed for part in fixed_parts(text)), span)
    tokens = words(answer)
    grams = (tuple(tokens[i : i + span]) for i in range(len(tokens) - span + 1))
    hits = [gram for gram in grams if gram in source]
    if not hits:  # the data's grams are counted only for an answer that shares some with the prompt
        return None
    quoted = set().union(*(_grams(words(text), span) for text in data))
    return next((" ".join(gram) for gram in hits if gram not in quoted), None)


def request_data(messages: Iterable[str], fixed: Iterable[str]) -> list[str]:
    """What the rendered messages hold besides the fixed texts: the data a template was filled with."""
    pieces = sorted({part for text in fixed for part in fixed_parts(text)}, key=len, reverse=True)
    out: list[str] = []
    for message in messages:
        for part in pieces:
            message = message.replace(part, "\n")
        out.append(message)
    return out
