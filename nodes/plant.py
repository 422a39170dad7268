"""Planted facts (``storyjudge.core.planted``): control facts judged beside a round's own, to check the judge.

One branch per round beside the sentence branches, with the same prompt and evidence path, so nothing tells a
planted fact from a summary's. Facts are judged in batches up to the check's next look (``planted.rule``) until
the decision is clear; the check goes to its own channel and never reaches the score's counts.
"""

from __future__ import annotations

import math
from typing import Any

from langgraph.runtime import Runtime

from nodes.check import judge_all
from nodes.retrieve import gather_evidence
from state import PlantTask
from storyjudge.core import planted, storyref
from storyjudge.core.context import Context, context_of
from storyjudge.core.records import Fact, PlantedVerdict
from storyjudge.core.usage import Usage, merge_usage, totals


def check_planted(task: PlantTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Plant this round's control facts batch by batch until the judge check decides; record the check."""
    ctx = context_of(runtime)
    iteration = task["iteration"]
    scenes, ckg = storyref.scenes_of(task["story"]), storyref.ckg_of(task["story"])
    most = min(ctx.planted_facts, planted.MAX_FALSE)
    false_pool, true_pool, why = planted.build_pool(
        scenes, ckg, false=most, true=math.ceil(most * planted.TRUE_SHARE), seed=ctx.seed, iteration=iteration
    )
    usage: Usage = {}
    verdicts: list[PlantedVerdict] = []
    planted_false = planted_true = 0
    while (
        decision := planted.decide(
            planted.false_outcomes(verdicts), most, final=planted_false >= len(false_pool)
        )
    ) is None:
        judged = len(planted.false_outcomes(verdicts))
        look = next(n for n, _, _ in planted.rule(most) if n > judged)
        batch = [
            *false_pool[planted_false : planted_false + look - judged],
            *true_pool[planted_true : math.ceil(look * planted.TRUE_SHARE)],
        ]
        planted_false += sum(p["expected"] == "unsupported" for p in batch)
        planted_true += sum(p["expected"] == "supported" for p in batch)
        facts = [Fact(id=p["id"], iteration=iteration, sentence_index=-1, text=p["text"]) for p in batch]
        evidence = gather_evidence(ctx, facts, ckg, scenes, task["index"])
        for (verdict, cost), made in zip(judge_all(ctx, facts, evidence, scenes), batch, strict=True):
            usage = merge_usage(usage, cost)
            verdicts.append(PlantedVerdict(**verdict, planted=made))
    check = planted.judge_check(
        verdicts, decision, max_false=most, built=len(false_pool), why=why, usage=totals(usage)
    )
    return {"planted_checks": [{"iteration": iteration, "check": check}], "usage": usage}
