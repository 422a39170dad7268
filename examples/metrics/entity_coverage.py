"""Entity coverage: the share of the story's characters (the CKG's) that a summary names.

A worked example of a metric added in one file. Score a summary with it:

    storyjudge score STORY.md --summary SUMMARY.txt --metric examples/metrics/entity_coverage.py:EntityCoverage

Its card lands on every round in result.json (``metrics.entity_coverage``), in the report, the web UI,
``storyjudge compare`` and an eval's summary table; no other file needs to know it. A character counts as
named when the summary uses any of the names the story gives it (its aliases too), as whole words.
"""

from __future__ import annotations

from typing import Any

from storyjudge.core.charactergraph import characters_in
from storyjudge.core.metrics import RoundView


class EntityCoverage:
    """Characters of the story's CKG that the summary names, over all its characters."""

    name = "entity_coverage"
    needs = ("summary", "ckg")

    def card(self, view: RoundView) -> dict[str, Any]:
        """The share named, with the names found and missed; no score when the CKG has no character."""
        characters = sorted(view.characters)
        named = set(characters_in(view.ckg, view.summary))
        return {
            "score": len(named) / len(characters) if characters else None,
            "characters": len(characters),
            "named": sorted(named),
            "missed": [c for c in characters if c not in named],
        }

    def headline(self, card: dict[str, Any]) -> str:
        """E.g. "0.667 (2 of 3 characters named)", or why there is no score."""
        if card["score"] is None:
            return "n/a (the CKG has no character)"
        return f"{card['score']:.3f} ({len(card['named'])} of {card['characters']} characters named)"
