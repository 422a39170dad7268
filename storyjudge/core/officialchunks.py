"""Where the official BooookScore chunker (``booookscore.chunk``, 0.1.3) cuts a document, for the paper's preset.

It packs lines greedily within the budget, cutting an over-long line at its second-to-last sentence end; the
chunks here are slices of the original text (text the official code would drop is kept).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate

from storyjudge.core.tokens import count_tokens, fewest_tokens

Counter = Callable[[str], int]
_ENDS = ".?!"
_QUOTES = "\"'"


def _cut(piece: str, commas: bool) -> int | None:
    """Length the official chunker keeps of an over-budget piece: up to its second-to-last mark, if any."""
    marks = _ENDS + ("," if commas else "")
    found = [
        i
        for i, char in enumerate(piece)
        if char in marks or (char in _QUOTES and i > 0 and piece[i - 1] in _ENDS)
    ]
    return found[-2] + 1 if len(found) >= 2 else None


def _truncate(joined: str, start: int, end: int, limit: int, count: Counter) -> int:
    stop = end
    while count(joined[start:stop]) > limit:
        piece = joined[start:stop]
        keep = _cut(piece, commas=False) or _cut(piece, commas=True)
        if keep is None:
            return stop
        stop = start + keep
    return stop


def _first_overflow(
    joined: str, begin: int, ends: list[int], lo: int, hi: int, limit: int, count: Counter
) -> int:
    """The first line in ``[lo, hi)`` taking the chunk from ``begin`` over ``limit`` (``hi``: none), by galloping."""

    def over(j: int) -> bool:
        return count(joined[begin : ends[j]]) > limit

    step, fits = 1, lo - 1  # the last line known to fit
    while fits + step < hi and not over(fits + step):
        fits, step = fits + step, step * 2
    high = min(fits + step, hi)  # over the limit there, or hi
    return bisect_left(range(fits + 1, high), True, key=over) + fits + 1


class _Lines:
    """The lines' counts, summed, to guess where a chunk overflows; checked with exact counts, then searched."""

    def __init__(self, joined: str, line_at: list[int], ends: list[int], count: Counter) -> None:
        self.joined, self.line_at, self.ends, self.count = joined, line_at, ends, count
        counts = (count(joined[at : end + 1]) for at, end in zip(line_at, ends, strict=True))
        self.sums = list(accumulate(counts, initial=0))  # sums[k]: the lines before k, with their line breaks

    def first_overflow(self, begin: int, lo: int, hi: int, limit: int) -> int:
        """As ``_first_overflow``: the guess if the exact counts confirm it, else the exact search's answer."""
        joined, ends, count = self.joined, self.ends, self.count
        held = count(joined[begin : self.line_at[lo]]) if lo < len(ends) else 0  # the chunk before line lo
        # the first j whose guess, held + sums[j + 1] - sums[lo], is over the limit (hi: none)
        guess = bisect_right(self.sums, limit - held + self.sums[lo], lo + 1, hi + 1) - 1

        def over(j: int) -> bool:
            return count(joined[begin : ends[j]]) > limit

        if guess < hi and not over(guess):  # it still fits there: the overflow is later
            return _first_overflow(joined, begin, ends, guess + 1, hi, limit, count)
        if guess > lo and over(guess - 1):  # it is over already before: the overflow is earlier
            return _first_overflow(joined, begin, ends, lo, guess, limit, count)
        return guess


def official_starts(text: str, max_tokens: int, count: Counter = count_tokens) -> list[int]:
    """Offsets in ``text`` where the official chunker's chunks begin (the first is 0)."""
    lines = [(match.start(), match.group()) for match in re.finditer(r"[^\n]+", text)]  # (offset, line)
    if not lines:
        return [0]
    joined = "\n".join(line for _, line in lines)
    if len(joined.encode()) <= max_tokens:  # a token holds a byte at least
        return [0]
    if not (count is count_tokens and fewest_tokens(joined) > max_tokens) and count(joined) <= max_tokens:
        return [0]  # (a novel, which cannot fit, is not tokenized whole only to learn that)
    line_at = list(accumulate((len(line) + 1 for _, line in lines[:-1]), initial=0))  # offsets in ``joined``
    ends = [at + len(line) for at, (_, line) in zip(line_at, lines, strict=True)]
    counts = _Lines(joined, line_at, ends, count)
    # lines over the budget by themselves (a line of no more bytes than the budget never is)
    alone = [len(line.encode()) > max_tokens and count(line) > max_tokens for _, line in lines]
    next_alone = [len(lines)] * (len(lines) + 1)  # index of the next such line at or after each line
    for i in range(len(lines) - 1, -1, -1):
        next_alone[i] = i if alone[i] else next_alone[i + 1]

    starts: list[int] = []  # chunk starts in the rejoined text
    begin: int | None = None  # start of the open chunk, which runs to the end of the last line taken
    i = 0
    while i < len(lines):
        if alone[i]:  # cut back with what the chunk holds, as often as needed; the rest stays open
            first = line_at[i] if begin is None else begin
            stop = _truncate(joined, first, ends[i], max_tokens, count)
            starts.append(first)
            while stop < ends[i] and count(joined[stop : ends[i]]) > max_tokens:
                first, stop = stop, _truncate(joined, stop, ends[i], max_tokens, count)
                starts.append(first)
            begin = stop if stop < ends[i] else None
            i += 1
            continue
        if begin is None:
            begin, i = line_at[i], i + 1
        limit = next_alone[i]
        overflow = counts.first_overflow(begin, i, limit, max_tokens)
        if overflow < limit:  # that line opens the next chunk
            starts.append(begin)
            begin = None
        i = overflow
    if begin is not None:
        starts.append(begin)

    def original(position: int) -> int:
        k = bisect_right(line_at, position) - 1
        return lines[k][0] + (position - line_at[k])

    return [0, *(original(p) for p in starts[1:])]


def split_official(text: str, max_tokens: int, count: Counter = count_tokens) -> list[str]:
    """The document cut where the official chunker cuts it; the pieces join back to exactly ``text``."""
    starts = official_starts(text, max_tokens, count)
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True) if b > a]
