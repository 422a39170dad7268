"""The critical-path bound of a run: ``L`` x the fewest waves of at most ``C`` calls its dependencies allow.

Cache hits never reach the server and are not counted. The log is cut, in arrival order, into:

- **stages**: consecutive requests of one kind, each depending on all before it: ``ceil(n / C)`` waves;
- **the summarizer beside the extraction** (``SceneTriples`` needs only the scenes): the summarizer's
  ``w = sum ceil(m_i / C)`` waves leave free slots to it: ``max(w, ceil((n + sum m_i) / C))``;
- **pipelined segments** of decompositions and verdicts, each verdict waiting only for its own sentence's
  decomposition: an out-forest, scheduled exactly by Hu's algorithm (optimal for in-forests) on the reversed
  forest, whose schedule read backwards is one of the original of the same length;
- **the first round beside the extraction**: its decompositions may share the extraction's waves, its
  verdicts need the whole CKG; ``first_round_waves`` tries each wave in which the extraction could end.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache
from itertools import groupby
from typing import Any

from eval.bench.workload import block
from storyjudge.core.scripted_server import last_user_text, schema_name

DECOMPOSE = "AtomicFacts"
VERDICT = "Verdict"
PIPELINED = frozenset({DECOMPOSE, VERDICT})
"""Kinds whose requests may interleave: a verdict waits for its own sentence's decomposition only."""
EXTRACTION = "SceneTriples"
"""The extraction's kind: its calls need the scenes only, as the summarizer's do."""


def request_kind(body: dict[str, Any]) -> str:
    """What a request is: its schema name, or the first line of its first user message."""
    name = schema_name(body)
    if name:
        return name
    users = [str(m.get("content", "")).strip() for m in body.get("messages", []) if m.get("role") == "user"]
    if not users:
        return "(no user message)"
    return users[0].splitlines()[0][:60] if users[0] else "(empty prompt)"


def _segment_kind(body: dict[str, Any]) -> str:
    kind = request_kind(body)
    return "pipelined" if kind in PIPELINED else kind


def _words(text: str) -> str:
    """Lower-case words between spaces, so that containment matches whole words only."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def verdict_parents(segment: list[dict[str, Any]]) -> list[int | None]:
    """For each request of a pipelined segment, the position of the request it waits for (None: none)."""
    sentences = {
        i: _words(block(last_user_text(body), "sentence"))
        for i, body in enumerate(segment)
        if request_kind(body) == DECOMPOSE
    }
    parents: list[int | None] = []
    for body in segment:
        parent = None
        if request_kind(body) == VERDICT:
            fact = _words(block(last_user_text(body), "fact"))
            parent = next((i for i, sentence in sentences.items() if fact.strip() and fact in sentence), None)
        parents.append(parent)
    return parents


def forest_waves(parents: list[int | None], concurrency: int) -> int:
    """Fewest waves of ``concurrency`` unit tasks of an out-forest (``parents[i]`` first): Hu's, reversed."""

    @cache
    def depth(i: int) -> int:  # tasks on the path from the root, this one included
        parent = parents[i]
        return 1 if parent is None else depth(parent) + 1

    waiting = Counter(parent for parent in parents if parent is not None)  # children not yet run; ready at 0
    ready = [i for i in range(len(parents)) if not waiting[i]]
    rounds = 0
    while ready:
        ready.sort(key=lambda i: -depth(i))
        batch, ready = ready[:concurrency], ready[concurrency:]
        rounds += 1
        for i in batch:
            if (parent := parents[i]) is not None:
                waiting[parent] -= 1
                if not waiting[parent]:
                    ready.append(parent)
    return rounds


def first_round_waves(
    extraction: int, lead: list[int], segment: list[dict[str, Any]], concurrency: int
) -> int:
    """Fewest waves of the extraction, the summarizer's stages and the first pipelined segment together."""
    parents = verdict_parents(segment)
    decompositions = [i for i, body in enumerate(segment) if request_kind(body) == DECOMPOSE]
    verdicts_of = Counter(parent for parent in parents if parent is not None)
    first = sorted(decompositions, key=lambda i: (-verdicts_of[i], i))  # most verdicts waiting on it first
    chain = sum(math.ceil(calls / concurrency) for calls in lead)  # the summarizer's stages, in turn
    after_chain = max(0, extraction - (chain * concurrency - sum(lead)))  # extraction calls after the chain
    earliest = max(chain, math.ceil((extraction + sum(lead)) / concurrency))  # extraction in the free slots
    totals = []
    for end in range(earliest, earliest + math.ceil(len(decompositions) / concurrency) + 2):
        room = max(0, (end - chain) * concurrency - after_chain)  # the decompositions' slots by then
        done = set(first[:room])
        left = [i for i in range(len(segment)) if i not in done]
        position = {i: n for n, i in enumerate(left)}
        rest = [
            position[parent] if (parent := parents[i]) is not None and parent not in done else None
            for i in left
        ]
        totals.append(end + forest_waves(rest, concurrency))
    return min(totals)


def dependency_waves(bodies: list[dict[str, Any]], concurrency: int) -> int:
    """The fewest waves any schedule of these calls needs (the module docstring's bound)."""
    kinds = [request_kind(body) for body in bodies]
    first = next((i for i, kind in enumerate(kinds) if kind in PIPELINED), len(bodies))
    lead = [len(list(run)) for _, run in groupby(kind for kind in kinds[:first] if kind != EXTRACTION)]
    rest = [body for body, kind in zip(bodies[first:], kinds[first:], strict=True) if kind != EXTRACTION]
    parts = [list(run) for _, run in groupby(rest, key=_segment_kind)]  # stages and pipelined segments
    first_round = parts.pop(0) if parts and request_kind(parts[0][0]) in PIPELINED else []
    total = first_round_waves(kinds.count(EXTRACTION), lead, first_round, concurrency)
    for segment in parts:  # a stage has no verdicts: its calls are independent
        total += forest_waves(verdict_parents(segment), concurrency)
    return total
