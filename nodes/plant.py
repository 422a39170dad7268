"""Planted facts (``storyjudge.core.planted``): control facts judged beside a round's own, to check the judge.

One branch per round, sent beside the sentence branches, so its verdicts are asked among theirs: the same
judge prompt and the same evidence path (retrieval by the fact's text, the CKG lines of its characters), and
nothing in a request tells a planted fact from a summary's. Its verdicts go to their own channel and never
reach the score's counts.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from nodes.check import judge_all
from nodes.retrieve import gather_evidence
from state import PlantTask
from storyjudge.core import storyref
from storyjudge.core.context import Context, context_of
from storyjudge.core.planted import plant_facts
from storyjudge.core.records import Fact, PlantedVerdict
from storyjudge.core.usage import Usage, merge_usage


def check_planted(task: PlantTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Build this round's planted facts from the story, retrieve their evidence and judge them."""
    ctx = context_of(runtime)
    scenes, ckg = storyref.scenes_of(task["story"]), storyref.ckg_of(task["story"])
    planted = plant_facts(scenes, ckg, count=ctx.planted_facts, seed=ctx.seed, iteration=task["iteration"])
    facts = [
        Fact(id=p["id"], iteration=task["iteration"], sentence_index=-1, text=p["text"]) for p in planted
    ]
    evidence = gather_evidence(ctx, facts, ckg, scenes, task["index"])
    judged = judge_all(ctx, facts, evidence, scenes)
    usage: Usage = {}
    verdicts: list[PlantedVerdict] = []
    for (verdict, cost), made in zip(judged, planted, strict=True):
        usage = merge_usage(usage, cost)
        verdicts.append(PlantedVerdict(**verdict, planted=made))
    return {"planted_verdicts": verdicts, "planted_usage": usage, "usage": usage}
