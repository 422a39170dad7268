"""Lossless splitting of text into token-bounded pieces (paragraphs, then sentences, then words), and sentences.

Summary sentences come from ``pysbd`` or ``punkt`` (NLTK's Punkt model, which the official BooookScore code uses).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from typing import Literal

from storyjudge.core.tokens import count_tokens, fewest_tokens

Counter = Callable[[str], int]
Splitter = Literal["pysbd", "punkt"]
SPLITTERS: tuple[Splitter, ...] = ("pysbd", "punkt")
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE_SPLIT_LIMIT = 200_000  # characters; beyond this pysbd is too slow and words are used instead
_SINGLE_BREAK = re.compile(r"(?<!\n)\n(?![ \t\r]*\n)")
_BLOCK_START = re.compile(r"(?:[-*+\u2022\u00b7]\s|\d+[.)]\s|#|>|\|)")
_CLOSERS = ".!?,;:\"'\u201d\u2019)]\u2026-\u2014"
_SPACES = re.compile(r"\s*")


@cache
def _segmenter() -> object:
    import pysbd
    from pysbd.utils import TextSpan

    class LiteralSpans(pysbd.Segmenter):
        """pysbd's segmenter, placing sentences with ``str.find``: pysbd compiles a regex per sentence (slow)."""

        def sentences_with_char_spans(self, sentences: list[str]) -> list[object]:
            return [
                TextSpan(self.original_text[a:b], a, b)
                for a, b in literal_spans(self.original_text, sentences)
            ]

    return LiteralSpans(language="en", clean=False, char_span=True)


def literal_spans(text: str, sentences: Sequence[str]) -> list[tuple[int, int]]:
    """Where pysbd's ``sentences_with_char_spans`` places ``sentences`` in ``text``, found without regexes."""
    spans: list[tuple[int, int]] = []
    prior = 0
    for sentence in sentences:
        if not sentence:  # an empty pattern matches everywhere: pysbd's own search
            found = next((m.span() for m in _SPACES.finditer(text) if m.end() > prior), None)
            if found:
                spans.append(found)
                prior = found[1]
            continue
        position = text.find(sentence)
        while position != -1:
            end = position + len(sentence)
            while end < len(text) and text[end].isspace():
                end += 1
            if end > prior:
                spans.append((position, end))
                prior = end
                break
            position = text.find(sentence, end)
    return spans


@cache
def _punkt() -> object:
    import punkt

    return punkt.tokenizer_for("english", line_breaks="ignore")


def paragraphs(text: str) -> list[str]:
    """Paragraphs, each keeping the blank lines that follow it (lossless)."""
    pieces, start = [], 0
    for match in _PARAGRAPH_END.finditer(text):
        pieces.append(text[start : match.end()])
        start = match.end()
    return [piece for piece in [*pieces, text[start:]] if piece]


def _unwrap_lines(text: str) -> str:
    """The text with hard-wrap line breaks as spaces, same length (not before a list item or after a heading)."""
    chars = list(text)
    for match in _SINGLE_BREAK.finditer(text):
        at = match.start()
        line = text[text.rfind("\n", 0, at) + 1 : at].strip()
        end = text.find("\n", at + 1)
        following = text[at + 1 : end if end != -1 else len(text)].strip()
        if not line or not following or _BLOCK_START.match(following):
            continue
        if len(line.split()) <= 6 and line[-1] not in _CLOSERS and following[0].isupper():
            continue
        chars[at] = " "
        if at and chars[at - 1] == "\r":
            chars[at - 1] = " "
    return "".join(chars)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, covering the text without gaps; hard-wrap line breaks end none."""
    if len(text) <= _SENTENCE_SPLIT_LIMIT:
        return list(_segmented(text)) if text else []
    spans, start = [], 0  # too long for pysbd: windows of up to 2,000 characters, ending after a space
    while start < len(text):
        end = min(len(text), start + 2000)
        if end < len(text):
            space = text.rfind(" ", start + 1000, end)
            end = space + 1 if space > start else end
        spans.append((start, end))
        start = end
    return spans


@lru_cache(maxsize=256)
def _segmented(text: str) -> tuple[tuple[int, int], ...]:
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in _segmenter().segment(_unwrap_lines(text)):  # type: ignore[attr-defined]
        end = max(piece.end, cursor)
        if end > cursor:
            spans.append((cursor, end))
            cursor = end
    if cursor < len(text) and spans:  # the last span takes the rest
        spans[-1] = (spans[-1][0], len(text))
    elif cursor < len(text):
        spans.append((0, len(text)))
    return tuple(spans)


_WORD = re.compile(r"[^\W_]")


def has_words(text: str) -> bool:
    """Whether a text holds a word: a letter or digit of any script, not only punctuation and symbols."""
    return _WORD.search(text) is not None


# the end of the error for a summary with nothing to score: f"Summary ... {NO_WORDS}"
NO_WORDS = "has no words, only punctuation or symbols ({sample!r}); give a summary with at least one sentence of words"


def sentences(text: str, splitter: str = "pysbd") -> list[str]:
    """Sentences of a summary, stripped, blanks dropped, split by ``splitter`` (one of ``SPLITTERS``)."""
    stripped = text.strip()
    if splitter == "punkt":
        found = _punkt().tokenize(stripped)  # type: ignore[attr-defined]
        return [s for s in (piece.strip() for piece in found) if s]
    if splitter != "pysbd":
        raise ValueError(f"Unknown sentence splitter {splitter!r}; use one of {', '.join(SPLITTERS)}.")
    return [s for s in (stripped[a:b].strip() for a, b in sentence_spans(stripped)) if s]


def _longest_fit(text: str, max_tokens: int, count: Counter, before: str = "") -> int:
    """The length of the longest prefix of ``text`` that fits the budget after ``before`` (0: none), by bisection."""
    return bisect.bisect_left(
        range(1, len(text) + 1), True, key=lambda n: count(before + text[:n]) > max_tokens
    )


def _units(text: str, max_tokens: int, count: Counter) -> list[tuple[str, int]]:
    units: list[tuple[str, int]] = []
    for paragraph in paragraphs(text):
        n = count(paragraph)
        if n <= max_tokens:
            units.append((paragraph, n))
            continue
        for start, end in sentence_spans(paragraph):
            units.extend(_fitted(paragraph[start:end], max_tokens, count))
    return units


def _fitted(text: str, max_tokens: int, count: Counter) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    while text and (n := count(text)) > max_tokens:
        lo = max(1, _longest_fit(text, max_tokens, count))
        cut = text.rfind(" ", 0, lo)
        cut = cut + 1 if cut > lo // 2 else lo
        out.append((text[:cut], count(text[:cut])))
        text = text[cut:]
    return [*out, (text, n)] if text else out


def split_by_tokens(text: str, max_tokens: int, count: Counter = count_tokens) -> list[str]:
    """Pieces of at most ``max_tokens``, paragraphs packed greedily, joining back to exactly ``text``."""
    return [piece for piece, _ in split_counted(text, max_tokens, count)]


def split_counted(text: str, max_tokens: int, count: Counter = count_tokens) -> list[tuple[str, int]]:
    """``split_by_tokens`` with each piece's token count, as the final check counted it."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be >= 1")
    if not text:
        return []
    # a text that cannot fit (a novel) is not tokenized whole only to learn that: its pieces are counted below
    cannot_fit = count is count_tokens and len(text) > max_tokens and fewest_tokens(text) > max_tokens
    if not cannot_fit:
        whole = count(text)
        if whole <= max_tokens:
            return [(text, whole)]
    chunks: list[str] = []
    current, current_tokens = "", 0
    for unit, n in _units(text, max_tokens, count):
        if current and current_tokens + n > max_tokens:
            chunks.append(current)
            current, current_tokens = "", 0
        current += unit
        current_tokens += n
    if current:
        chunks.append(current)
    # token counts are not exactly additive across a join; re-check and re-split the rare offender
    return [piece for chunk in chunks for piece in _fitted(chunk, max_tokens, count)]


def split_filled(
    text: str, max_tokens: int, count: Counter = count_tokens, reach: Sequence[int] = ()
) -> list[tuple[str, int]]:
    """Pieces of at most ``max_tokens`` (with counts) joining back to ``text``, filled greedily by sentences.

    ``reach[k]``: an offset piece ``k`` must reach (another chunker's end), so it makes no more pieces than that.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be >= 1")
    if not text:
        return []
    pieces: list[tuple[str, int]] = []
    current, used, done = "", 0, 0  # done: characters in the closed pieces
    counted = -1  # len(current) while ``used`` is its exact count, not a sum

    def close() -> None:
        nonlocal current, used, done, counted
        if current:
            pieces.append((current, used if counted == len(current) else count(current)))
            done += len(current)
        current, used, counted = "", 0, -1

    def fits(unit: str, n: int) -> int:
        """The tokens of ``current + unit`` if within the budget, else 0: a sum first (it overcounts), then counted."""
        nonlocal counted
        if used + n <= max_tokens:
            return used + n
        exact = count(current + unit) if current else max_tokens + 1
        if exact > max_tokens:
            return 0
        counted = len(current) + len(unit)
        return exact

    for paragraph in paragraphs(text):
        n = count(paragraph)
        if total := fits(paragraph, n):
            current, used = current + paragraph, total
            continue
        spans = [] if n > max_tokens else sentence_spans(paragraph)
        units = [(paragraph[a:b], count(paragraph[a:b])) for a, b in spans]
        for sentence, m in units or _units(paragraph, max_tokens, count):
            if total := fits(sentence, m):
                current, used = current + sentence, total
                continue
            k = len(pieces)
            if k < len(reach) and done + len(current) < reach[k]:  # short of where piece k must end
                cut = _reach_into(current, sentence, reach[k] - done - len(current), max_tokens, count)
                if cut:
                    current, sentence = current + sentence[:cut], sentence[cut:]
                    m = count(sentence)
            close()
            current, used, counted = sentence, m, len(sentence)
    close()
    # counts are not exactly additive across a join; re-split the rare piece that the sum let through
    fixed: list[tuple[str, int]] = []
    for piece, n in pieces:
        fixed.extend([(piece, n)] if n <= max_tokens else split_counted(piece, max_tokens, count))
    return fixed


_CLAUSE_END = ",;:\u2014\u2013-)"


def _reach_into(current: str, unit: str, needed: int, max_tokens: int, count: Counter) -> int:
    """How much of ``unit`` to add to ``current`` to end at or past ``needed`` (a clause, else word bound)."""
    lo = _longest_fit(unit, max_tokens, count, current)
    if lo == len(unit):  # all of it fits after all (counts are not exactly additive)
        return lo
    words = [i for i in range(1, lo + 1) if unit[i - 1].isspace() and not unit[i].isspace()]
    enough = [i for i in words if i >= needed]
    clauses = [i for i in enough if unit[:i].rstrip()[-1:] in _CLAUSE_END]
    return (clauses or enough or words or [0])[-1]
