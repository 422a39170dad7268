"""Synthetic, fully scripted workloads for the latency benchmarks: a story, summaries, and a model for them.

The story has ``chapters`` chapters about a fixed cast. The scripted model plays every role deterministically:
the extractor lists the cast members a scene names, the summarizer writes one ``sentences``-sentence book
summary (the story fits one chunk), the decomposer splits each summary sentence into its three clauses, the
judge rejects exactly the facts that say someone "steals", and the refiner repairs the first two of them per
round. So a 2-iteration refine run scores 0.933 -> 0.967 -> 1.0 and each stage's number of calls is known.
"""

from __future__ import annotations

import json
import re
from typing import Any

from storyjudge.apps.scripted_server import all_text, last_user_text, schema_name

CAST = ("Mara", "Oren", "Ilsa", "Tobin", "Vera", "Anselm", "Greta", "Piet")
PLACES = ("harbour", "lighthouse", "market", "chapel", "mill", "bridge", "orchard", "quay", "tower", "inn")
VERBS = ("meets", "helps", "warns", "follows", "thanks", "visits")
WRONG = "steals the lamp from"
RIGHT = "gives the lamp to"
FIXES_PER_ROUND = 2


def story(chapters: int = 12) -> str:
    """A narrative of ``chapters`` chapters, about 200 words each."""
    parts = []
    for c in range(chapters):
        lines = []
        for s in range(12):
            a, b = CAST[(c + s) % len(CAST)], CAST[(c + 3 * s + 1) % len(CAST)]
            place = PLACES[(c * 7 + s) % len(PLACES)]
            lines.append(f"{a} {VERBS[(c + s) % len(VERBS)]} {b} near the {place} while the tide turns.")
        parts.append(f"Chapter {c + 1}\n\n" + " ".join(lines))
    return "\n\n".join(parts) + "\n"


def summary_sentence(i: int, wrong: bool) -> str:
    """Sentence ``i`` of the book summary: three clauses, the first one false when ``wrong``."""
    a, b, c = CAST[i % len(CAST)], CAST[(i + 1) % len(CAST)], CAST[(i + 2) % len(CAST)]
    first = f"{a} {WRONG if wrong else RIGHT} {b}"
    place = PLACES[i % len(PLACES)]
    second = f"{b} {VERBS[i % len(VERBS)]} {c} at the {place}"
    return f"In part {i + 1}, {first}, and {second}, and {c} sleeps when part {i + 1} ends."


def book_summary(sentences: int = 20, wrong_every: int = 5) -> str:
    """The first summary: ``sentences`` sentences of three facts; every ``wrong_every``-th has a false one."""
    return " ".join(summary_sentence(i, i % wrong_every == 0) for i in range(sentences))


def coherence_summaries(count: int = 100, sentences: int = 20) -> list[dict[str, str]]:
    """``count`` distinct summaries of ``sentences`` sentences each, for BooookScore."""
    return [
        {
            "id": f"s{k:03d}",
            "summary": " ".join(
                f"In part {i + 1} of tale {k}, {CAST[(k + i) % len(CAST)]} repairs the lamp at the "
                f"{PLACES[(k + 2 * i) % len(PLACES)]}."
                for i in range(sentences)
            ),
        }
        for k in range(count)
    ]


def _block(text: str, tag: str) -> str:
    """The last ``tag`` data block of a prompt (prompts may show an example block first)."""
    found = re.findall(rf"<{tag}[^>]*>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return found[-1].strip() if found else ""


class BenchResponder:
    """The scripted model for every role (see the module docstring)."""

    def __init__(self, sentences: int = 20, wrong_every: int = 5) -> None:
        self.sentences = sentences
        self.wrong_every = wrong_every

    def __call__(self, body: dict[str, Any]) -> str:
        """The scripted answer to one request."""
        name = schema_name(body)
        text = last_user_text(body)
        if name == "SceneTriples":
            scene = _block(text, "scene")
            named = [person for person in CAST if person in scene]
            triples = [
                {"subject": a, "predicate": "meets", "object": b}
                for a, b in zip(named, named[1:], strict=False)
            ]
            return json.dumps({"characters": [{"name": p, "aliases": []} for p in named], "triples": triples})
        if name == "AtomicFacts":
            sentence = _block(text, "sentence").rstrip(".")
            return json.dumps({"facts": [f"{part.strip()}." for part in sentence.split(", and ")]})
        if name == "Verdict":
            fact = _block(text, "fact")
            if WRONG in fact:
                return json.dumps(
                    {
                        "rationale": "The scenes never show anyone stealing the lamp.",
                        "supported": False,
                        "feedback": f"Replace '{WRONG}' with '{RIGHT}'.",
                        "evidence": [],
                    }
                )
            return json.dumps(
                {"rationale": "The scenes state this.", "supported": True, "feedback": "", "evidence": []}
            )
        whole = all_text(body)
        if "causes any confusion" in whole:
            number = int(re.findall(r'<sentence number="(\d+)">', text)[-1])
            if number % 4 == 0:
                return f"Questions: What led to part {number}?\nTypes: causal omission"
            return "Questions: no confusion\nTypes: no confusion"
        if "You revise a summary" in whole:
            summary = _block(text, "summary")
            return summary.replace(WRONG, RIGHT, FIXES_PER_ROUND)
        if "Below is a summary of a book" in whole:  # artifact removal: the summary unchanged
            return _block(text, "summary")
        return book_summary(self.sentences, self.wrong_every)  # a chunk summary or a merge


_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]{2,})\b")
_NOT_NAMES = {
    "The",
    "And",
    "But",
    "When",
    "Then",
    "This",
    "That",
    "There",
    "What",
    "His",
    "Her",
    "They",
    "She",
}


class NamesResponder(BenchResponder):
    """For real novels: the extractor names the scene's most frequent capitalised words as characters."""

    def __call__(self, body: dict[str, Any]) -> str:
        """The scripted answer to one request."""
        if schema_name(body) != "SceneTriples":
            return super().__call__(body)
        scene = _block(last_user_text(body), "scene")
        counts: dict[str, int] = {}
        for word in _NAME.findall(scene):
            if word not in _NOT_NAMES:
                counts[word] = counts.get(word, 0) + 1
        named = sorted(counts, key=lambda w: (-counts[w], w))[:6]
        triples = [
            {"subject": a, "predicate": "appears with", "object": b}
            for a, b in zip(named, named[1:], strict=False)
        ]
        return json.dumps({"characters": [{"name": n, "aliases": []} for n in named], "triples": triples})
