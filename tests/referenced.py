"""A run record written before evidence was referenced, rewritten as runs now write it (``core.passages``).

Each scene's longest cited text becomes its entry in ``passages``; every evidence scene whose text lies inside
it names it by span instead. Apps must show both forms the same.
"""

from __future__ import annotations

import copy
from typing import Any


def referenced(record: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The record with evidence by reference, and how many evidence scenes now name their text by span."""
    out = copy.deepcopy(record)
    scenes = [
        scene
        for iteration in out.get("iterations") or []
        for verdict in (iteration.get("factscore") or {}).get("verdicts") or []
        for scene in verdict["evidence"]["scenes"]
    ]
    passages: dict[str, str] = {}
    for scene in scenes:
        if len(scene["text"]) > len(passages.get(scene["id"], "")):
            passages[scene["id"]] = scene["text"]
    named = 0
    for scene in scenes:
        start = passages[scene["id"]].find(scene["text"])
        if start >= 0:
            scene.update(start=start, end=start + len(scene.pop("text")))
            named += 1
    out["passages"] = passages
    return out, named
