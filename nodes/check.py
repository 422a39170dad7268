"""One summary sentence checked end to end: decompose it, retrieve evidence for its facts, judge them.

One ``Send`` branch per sentence, so a verdict waits only for its own sentence's decomposition; a resumed run
redoes only the sentences that had not finished. The judge gives one structured verdict per atomic fact; an
unparsed one is unjudged.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import partial, reduce
from typing import Any

from langgraph.runtime import Runtime

import prompts
from nodes.decompose import decompose
from nodes.retrieve import gather_evidence
from prompts.schemas import Verdict
from state import SentenceTask
from storyjudge.core import progress, storyref
from storyjudge.core.concurrency import in_parallel, priority
from storyjudge.core.context import Context, context_of
from storyjudge.core.llm import ask_structured
from storyjudge.core.narrativefactscore import unique_facts
from storyjudge.core.passages import scene_texts, span_text
from storyjudge.core.records import Evidence, Fact, FactVerdict, Scene
from storyjudge.core.usage import Usage, merge_usage


def render_evidence(evidence: Evidence, texts: Mapping[str, str]) -> tuple[str, str]:
    """The scenes and CKG lines as delimited data blocks (``texts``: the run's scene texts, by id)."""
    if evidence["scenes"]:
        scenes = "\n\n".join(
            prompts.data_block(
                "scene",
                span_text(scene, texts),
                id=scene["id"],
                title=scene["title"],
                **({"excerpt": "best-matching passage only"} if scene["excerpt"] else {}),
            )
            for scene in evidence["scenes"]
        )
    else:
        scenes = prompts.data_block("scene", "(no scene retrieved)", id="none")
    ckg = prompts.data_block(
        "graph", "\n".join(evidence["ckg_lines"]) or "(no relations for these characters)"
    )
    return scenes, ckg


def judge_fact(
    ctx: Context, fact: Fact, evidence: Evidence, texts: Mapping[str, str]
) -> tuple[FactVerdict, Usage]:
    """Verdict for one fact; an answer that cannot be read is an ``unjudged`` verdict with its error."""
    prompt = prompts.load("judge", ctx.prompt_dir)
    scenes, ckg = render_evidence(evidence, texts)
    text = prompt.render(scenes=scenes, ckg=ckg, fact=prompts.data_block("fact", fact["text"]))
    answer = ask_structured(ctx, "judge", prompt, [("user", text)], Verdict)
    verdict = answer.value
    record = FactVerdict(
        fact=fact,
        status="unjudged" if verdict is None else ("supported" if verdict.supported else "unsupported"),
        rationale=verdict.rationale if verdict else "",
        feedback=(verdict.feedback if verdict and not verdict.supported else ""),
        evidence=evidence,
        raw=answer.text,
    )
    if verdict is None:
        record["error"] = answer.error or "unparseable answer"
    return record, answer.usage


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
