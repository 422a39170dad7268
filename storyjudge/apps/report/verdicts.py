"""A round's verdicts and evidence: sentences coloured by their facts' verdicts, fact rows with their passages."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from storyjudge.core.passages import span_text


@dataclass
class SentenceView:
    """One summary sentence and the verdicts of the facts drawn from it."""

    index: int
    text: str
    status: str  # unsupported | unjudged | supported | nofacts
    verdicts: list[dict[str, Any]]


@dataclass
class Piece:
    """A run of summary text: a scored sentence, or the text between sentences."""

    text: str
    sentence: SentenceView | None = None


@dataclass
class FactRow:
    """One row of the per-fact table."""

    anchor: str
    fact_id: str
    sentence_index: int
    text: str
    status: str
    rationale: str
    feedback: str
    error: str
    evidence: list[tuple[Passage, float]]  # each passage the judge saw, with its retrieval score
    ckg_lines: list[str]
    correction: dict[str, str] | None = None  # a person's correction of the judge's verdict


@dataclass
class Passage:
    """An evidence text, shown once per iteration however many facts cite it."""

    anchor: str
    scene_id: str
    title: str
    text: str
    excerpt: bool


def sentence_status(verdicts: list[dict[str, Any]]) -> str:
    """How a sentence is marked: any unsupported fact wins, then any unjudged one."""
    statuses = {v.get("status") for v in verdicts}
    if "unsupported" in statuses:
        return "unsupported"
    if "unjudged" in statuses:
        return "unjudged"
    return "supported" if verdicts else "nofacts"


def summary_pieces(summary: str, card: dict[str, Any] | None) -> list[Piece]:
    """The summary cut into its scored sentences, keeping the text between them (paragraphs).

    If a sentence cannot be found in order (a splitter that normalised spaces), the sentences are joined by
    spaces instead, so no text is ever shown twice or lost.
    """
    per_sentence = (card or {}).get("per_sentence") or []
    if not per_sentence:
        return [Piece(summary)]
    by_sentence: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for verdict in (card or {}).get("verdicts") or []:
        by_sentence[int(verdict["fact"]["sentence_index"])].append(verdict)
    views = []
    for entry in per_sentence:
        facts = by_sentence[int(entry["index"])]
        views.append(SentenceView(int(entry["index"]), str(entry["sentence"]), sentence_status(facts), facts))
    pieces: list[Piece] = []
    cursor = 0
    for view in views:
        found = summary.find(view.text, cursor)
        if found < 0:
            joined: list[Piece] = []  # the sentences joined by spaces
            for n, other in enumerate(views):
                if n:
                    joined.append(Piece(" "))
                joined.append(Piece(other.text, other))
            return joined
        if found > cursor:
            pieces.append(Piece(summary[cursor:found]))
        pieces.append(Piece(view.text, view))
        cursor = found + len(view.text)
    if cursor < len(summary):
        pieces.append(Piece(summary[cursor:]))
    return pieces


def _fact_rows(
    key: str, card: dict[str, Any], texts: Mapping[str, str]
) -> tuple[list[FactRow], list[Passage]]:
    passages: dict[tuple[str, str], Passage] = {}
    rows: list[FactRow] = []
    for n, verdict in enumerate(card.get("verdicts") or []):
        evidence = verdict.get("evidence") or {}
        links: list[tuple[Passage, float]] = []
        for scene in evidence.get("scenes") or []:
            ident = (str(scene.get("id", "")), span_text(scene, texts))
            if ident not in passages:
                passages[ident] = Passage(
                    anchor=f"{key}-ev{len(passages)}",
                    scene_id=ident[0],
                    title=str(scene.get("title", "")),
                    text=ident[1],
                    excerpt=bool(scene.get("excerpt")),
                )
            links.append((passages[ident], float(scene.get("score") or 0.0)))
        fact = verdict.get("fact") or {}
        rows.append(
            FactRow(
                anchor=f"{key}-f{n}",
                fact_id=str(fact.get("id", "")),
                sentence_index=int(fact.get("sentence_index", -1)),
                text=str(fact.get("text", "")),
                status=str(verdict.get("status", "unjudged")),
                rationale=str(verdict.get("rationale", "")),
                feedback=str(verdict.get("feedback", "")),
                error=str(verdict.get("error", "")),
                evidence=links,
                ckg_lines=[str(line) for line in evidence.get("ckg_lines") or []],
                correction=verdict.get("correction"),
            )
        )
    return rows, list(passages.values())
