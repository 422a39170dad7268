"""One summary sentence checked end to end: decompose it, retrieve evidence for its facts, judge them.

One ``Send`` branch per sentence, so a verdict waits only for its own sentence's decomposition; a resumed run
redoes only the sentences that had not finished.
"""

from __future__ import annotations

import time
from functools import partial, reduce
from typing import Any

from langgraph.runtime import Runtime

from nodes.decompose import decompose
from nodes.judge import judge_fact
from nodes.retrieve import gather_evidence
from state import SentenceTask
from storyjudge.core import progress, storyref
from storyjudge.core.concurrency import in_parallel, priority
from storyjudge.core.context import Context, context_of
from storyjudge.core.narrativefactscore import unique_facts
from storyjudge.core.passages import scene_texts
from storyjudge.core.records import Evidence, Fact, FactVerdict, Scene
from storyjudge.core.usage import Usage, merge_usage


def judge_all(
    ctx: Context, facts: list[Fact], evidence: dict[str, Evidence], scenes: list[Scene]
) -> list[tuple[FactVerdict, Usage]]:
    """Verdicts of ``facts``, asked at once (in fact order), on the process's worker threads."""
    texts = scene_texts(scenes)
    return in_parallel([partial(judge_fact, ctx, fact, evidence[fact["id"]], texts) for fact in facts])


def check_sentence(task: SentenceTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Facts, evidence and verdicts of one sentence."""
    ctx = context_of(runtime)
    started = time.perf_counter()
    # a decomposition (verdicts wait on it) goes before verdicts for a slot, a new sentence's first of all
    with priority(2 if task.get("new", True) else 1):
        raw, failed, usage = decompose(ctx, task)
    decomposed = time.perf_counter()
    progress.emit("decompose", advance=1)
    facts = unique_facts(raw, task["iteration"])  # the same rule the score applies across sentences
    scenes = storyref.scenes_of(task["story"])
    evidence = gather_evidence(ctx, facts, storyref.ckg_of(task["story"]), scenes, task["index"])
    retrieved = time.perf_counter()
    progress.emit("retrieve", advance=1)
    judged = judge_all(ctx, facts, evidence, scenes)
    progress.emit("judge", advance=1)
    usage = reduce(merge_usage, (cost for _, cost in judged), usage)
    return {
        "raw_facts": raw,
        "failed_sentences": failed,
        "verdicts": [verdict for verdict, _ in judged],
        "usage": usage,
        "timings": {
            "decompose": decomposed - started,
            "retrieve": retrieved - decomposed,
            "judge": time.perf_counter() - retrieved,
        },
    }
