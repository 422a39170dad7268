"""Evidence by reference: a verdict names a scene and span; the texts are kept once per run (``passages``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from storyjudge.core.records import EvidenceScene, Scene


def scene_texts(scenes: Iterable[Scene] | Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Scene id -> text: what evidence spans are offsets into."""
    return {str(scene["id"]): str(scene["text"]) for scene in scenes}


def span_text(scene: EvidenceScene | Mapping[str, Any], passages: Mapping[str, str]) -> str:
    """The text an evidence scene names: its span of the scene's text ("" when ``passages`` lack the scene)."""
    if "text" in scene:  # written before evidence was referenced
        return str(scene["text"])
    text = passages.get(str(scene.get("id", "")), "")
    return text[int(scene.get("start", 0)) : int(scene.get("end", len(text)))]


def record_passages(
    iterations: Iterable[Mapping[str, Any]], scenes: Iterable[Scene] | Iterable[Mapping[str, Any]]
) -> dict[str, str]:
    """``result.json``'s ``passages``: the text of every scene a verdict of these rounds cites, by id, in order."""
    cards = [iteration.get("factscore") or {} for iteration in iterations]
    verdicts = [
        *(v for card in cards for v in card.get("verdicts") or []),
        *(v for card in cards for v in (card.get("judge_check") or {}).get("verdicts") or []),
    ]
    cited = {
        str(scene["id"])
        for verdict in verdicts
        for scene in (verdict.get("evidence") or {}).get("scenes") or []
        if "text" not in scene
    }
    return {sid: text for sid, text in scene_texts(scenes).items() if sid in cited}
