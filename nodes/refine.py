"""The refiner (NarrativeFactScore stage 3): rewrite the summary from the judge's feedback and its evidence.

The paper gives the refiner the whole narrative; a book does not fit a prompt, so it gets what the judge saw for
the flagged facts (their scenes and the CKG lines of their characters), within the context window.
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

import prompts
from state import FactVerdict, RefineState
from storyjudge.context import Context, context_of
from storyjudge.llm import ask_text
from storyjudge.progress import report
from storyjudge.tokens import count_tokens
from storyjudge.usage import merge_usage

PROMPT_OVERHEAD_TOKENS = 600


def flagged_verdicts(state: RefineState) -> list[FactVerdict]:
    """The unsupported facts of the summary being refined (the latest iteration)."""
    card = state.get("factscore")
    return [v for v in (card["verdicts"] if card else []) if v["status"] == "unsupported"]


def render_flagged(verdicts: list[FactVerdict]) -> str:
    """Flagged facts with their feedback, as one data block."""
    lines = []
    for n, v in enumerate(verdicts, 1):
        feedback = v["feedback"] or v["rationale"] or "not supported by the story"
        lines.append(f"{n}. Fact: {v['fact']['text']}\n   Feedback: {feedback}")
    return prompts.data_block("flagged_facts", "\n".join(lines))


def render_evidence(verdicts: list[FactVerdict], budget: int) -> tuple[str, list[str]]:
    """Distinct evidence scenes of the flagged facts (best first) and their CKG lines, within a token budget."""
    blocks: list[str] = []
    used_ids: list[str] = []
    lines: list[str] = []
    for verdict in verdicts:
        for line in verdict["evidence"]["ckg_lines"]:
            if line not in lines:
                lines.append(line)
    graph_block = prompts.data_block("graph", "\n".join(lines[:60]) or "(no relations)")
    left = budget - count_tokens(graph_block)
    scenes = sorted(
        (scene for verdict in verdicts for scene in verdict["evidence"]["scenes"]), key=lambda s: -s["score"]
    )
    for scene in scenes:
        if scene["id"] in used_ids:
            continue
        block = prompts.data_block("scene", scene["text"], id=scene["id"], title=scene["title"])
        cost = count_tokens(block)
        if cost > left:
            continue
        blocks.append(block)
        used_ids.append(scene["id"])
        left -= cost
    return "\n\n".join([*blocks, graph_block]), used_ids


def _unusable(text: str, finish_reason: str | None) -> str:
    """Why a revision cannot replace the summary ("empty", "cut-off"), or "" when it can."""
    if not text.strip():
        return "empty"
    return "cut-off" if finish_reason == "length" else ""


def refine(state: RefineState, runtime: Runtime[Context]) -> dict[str, Any]:
    """A revised summary that fixes the flagged facts and keeps the rest, at about the same length."""
    ctx = context_of(runtime)
    started = time.perf_counter()
    summary = state["summary"]
    flagged = flagged_verdicts(state)
    report("refine", total=1)
    words = len(summary.split())
    summary_tokens = count_tokens(summary)
    max_tokens = max(ctx.max_output_tokens, int(summary_tokens * 1.5) + 64)
    flagged_block = render_flagged(flagged)
    summary_block = prompts.data_block("summary", summary)
    budget = (
        ctx.context_window
        - max_tokens
        - count_tokens(flagged_block)
        - summary_tokens
        - PROMPT_OVERHEAD_TOKENS
    )
    evidence, scene_ids = render_evidence(flagged, max(0, budget))
    prompt = prompts.load("refine")
    text = prompt.render(
        max_words=int(words * 1.1) + 10, evidence=evidence, flagged=flagged_block, summary=summary_block
    )
    answer = ask_text(ctx, "refiner", prompt, [("user", text)], max_tokens=max_tokens)
    usage = answer.usage
    attempts = 1
    # An empty or cut-off revision would replace the summary with nothing or half of it: ask again (a new
    # sample, so neither the cache nor a deterministic server returns the same answer), then keep the summary.
    while _unusable(answer.text, answer.finish_reason) and attempts <= ctx.parse_retries:
        answer = ask_text(ctx, "refiner", prompt, [("user", text)], max_tokens=max_tokens, sample=attempts)
        usage = merge_usage(usage, answer.usage)
        attempts += 1
    revised = prompts.unwrap_data(answer.text)
    events = []
    problem = _unusable(revised, answer.finish_reason)
    if problem:
        revised = summary
        events.append(
            {
                "stage": "refine",
                "iteration": state.get("iteration", 0) + 1,
                "event": f"{problem} refinement after {attempts} attempt(s); kept summary",
            }
        )
    report("refine", advance=1)
    return {
        "summary": revised,
        "iteration": state.get("iteration", 0) + 1,
        "events": events,
        "usage": usage,
        "timings": {"refine": time.perf_counter() - started},
    }
