"""The judge (NarrativeFactScore stage 2): one structured verdict per atomic fact, all facts in parallel.

A verdict that cannot be parsed after retries is *unjudged*: reported, and left out of the score's denominator,
never counted as supported.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

import prompts
from prompts.schemas import Verdict
from state import FactScoreState, JudgeTask
from storyjudge.core import progress
from storyjudge.core.context import Context, context_of
from storyjudge.core.llm import ask_structured
from storyjudge.core.records import Evidence, FactVerdict


def route_facts(state: FactScoreState) -> list[Send] | Literal["score"]:
    """One judge branch per fact (the fan-out width equals the fact count)."""
    facts = state.get("facts") or []
    evidence = state.get("evidence") or {}
    if not facts:
        return "score"
    progress.emit("judge", total=len(facts))
    empty = Evidence(query="", scenes=[], ckg_lines=[])
    return [Send("judge", JudgeTask(fact=fact, evidence=evidence.get(fact["id"], empty))) for fact in facts]


def render_evidence(evidence: Evidence) -> tuple[str, str]:
    """The scenes and CKG lines as delimited data blocks."""
    if evidence["scenes"]:
        scenes = "\n\n".join(
            prompts.data_block(
                "scene",
                scene["text"],
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


def judge(task: JudgeTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Verdict for one fact."""
    ctx = context_of(runtime)
    started = time.perf_counter()
    prompt = prompts.load("judge", ctx.prompt_dir)
    scenes, ckg = render_evidence(task["evidence"])
    text = prompt.render(scenes=scenes, ckg=ckg, fact=prompts.data_block("fact", task["fact"]["text"]))
    answer = ask_structured(ctx, "judge", prompt, [("user", text)], Verdict)
    progress.emit("judge", advance=1)
    verdict = answer.value
    record = FactVerdict(
        fact=task["fact"],
        status="unjudged" if verdict is None else ("supported" if verdict.supported else "unsupported"),
        rationale=verdict.rationale if verdict else "",
        feedback=(verdict.feedback if verdict and not verdict.supported else ""),
        evidence=task["evidence"],
        raw=answer.text,
    )
    if verdict is None:
        record["error"] = answer.error or "unparseable answer"
    return {"verdicts": [record], "usage": answer.usage, "timings": {"judge": time.perf_counter() - started}}
