"""The refiner (NarrativeFactScore stage 3): rewrite the summary from the judge's feedback and its evidence.

A book does not fit a prompt, so instead of the whole narrative the refiner gets an outline (each scene's id,
title and opening) and the flagged facts' evidence, all counted within the context window. It revises the best
accepted round, told why later attempts were rejected, so a rejected deletion never compounds.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from langgraph.runtime import Runtime

import prompts
from nodes.assess import best_of
from nodes.guards import budget_words, min_words, word_budget
from state import RefineState
from storyjudge.core import progress
from storyjudge.core.context import Context, context_of
from storyjudge.core.llm import ask_text
from storyjudge.core.passages import scene_texts, span_text
from storyjudge.core.records import FactVerdict, Iteration, Scene, ScoreCard
from storyjudge.core.summary_stats import words
from storyjudge.core.textsplit import sentences
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import Usage, merge_usage

CHAT_OVERHEAD_TOKENS = 32  # chat framing around the user message, and slack where blocks join
OUTLINE_MAX_TOKENS = 1500  # and at most a quarter of the room: the flagged facts' evidence comes first
OUTLINE_WORDS = (30, 12, 0)  # words of each scene's opening in the outline, tried until it fits


def refine_base(state: RefineState) -> tuple[str, ScoreCard | None, int]:
    """The summary to revise, its score card and its iteration: the best accepted round's (state's when none)."""
    best = best_of(state.get("iterations") or [])
    if best is None:
        return state["summary"], state.get("factscore"), state.get("iteration", 0)
    return best["summary"], best["factscore"], best["iteration"]


def earlier_attempts(iterations: list[Iteration], base: int) -> list[Iteration]:
    """Rounds that already revised iteration ``base`` (their guard record names it)."""
    return [it for it in iterations if "guard" in it and it["guard"]["revises"] == base]


def render_flagged(verdicts: list[FactVerdict]) -> str:
    """Flagged facts with their feedback, as one data block."""
    lines = []
    for n, v in enumerate(verdicts, 1):
        feedback = v["feedback"] or v["rationale"] or "not supported by the story"
        lines.append(f"{n}. Fact: {v['fact']['text']}\n   Feedback: {feedback}")
    return prompts.data_block("flagged_facts", "\n".join(lines))


def render_evidence(verdicts: list[FactVerdict], budget: int, texts: Mapping[str, str]) -> str:
    """Distinct evidence scenes of the flagged facts (best first) and their CKG lines, within a token budget."""
    blocks: dict[str, str] = {}
    lines = list(dict.fromkeys(line for verdict in verdicts for line in verdict["evidence"]["ckg_lines"]))
    graph_block = prompts.data_block("graph", "\n".join(lines[:60]) or "(no relations)")
    left = budget - count_tokens(graph_block)
    scenes = sorted(
        (scene for verdict in verdicts for scene in verdict["evidence"]["scenes"]), key=lambda s: -s["score"]
    )
    for scene in scenes:
        if scene["id"] in blocks:
            continue
        block = prompts.data_block("scene", span_text(scene, texts), id=scene["id"], title=scene["title"])
        if (cost := count_tokens(block)) <= left:
            blocks[scene["id"]] = block
            left -= cost
    return "\n\n".join([*blocks.values(), graph_block])


def _opening(scene: Scene, limit: int) -> str:
    """The scene's first sentence after its heading, cut to ``limit`` words ("" when limit is 0)."""
    if limit <= 0:
        return ""
    head = scene["text"].lstrip()[:1500].removeprefix(scene["title"].strip())
    first = next((s for s in sentences(head) if len(s.split()) > 1), "")
    cut = first.split()
    return " ".join(cut[:limit]) + (" ..." if len(cut) > limit else "")


def _outline_line(scene: Scene, limit: int) -> str:
    title = " ".join(scene["title"].split())
    opening = _opening(scene, limit if title else max(limit, 8))
    return " ".join(part for part in (scene["id"], title and f"[{title}]", opening) if part)


def render_outline(scenes: list[Scene], budget: int) -> str:
    """One line per scene (id, title, opening) within ``budget`` tokens, openings shortened, then scenes thinned."""
    if not scenes or budget <= 0:
        return ""
    for limit in OUTLINE_WORDS:
        lines = [_outline_line(scene, limit) for scene in scenes]
        block = prompts.data_block("outline", "\n".join(lines), scenes=len(scenes))
        if count_tokens(block) <= budget:
            return block
    keep = len(scenes)
    while keep > 1:
        keep = max(1, min(keep - 1, keep * budget // max(count_tokens(block), 1)))
        picked = [lines[i * len(lines) // keep] for i in range(keep)]  # spread evenly
        block = prompts.data_block("outline", "\n".join(picked), scenes=len(scenes), shown=keep)
        if count_tokens(block) <= budget:
            return block
    return ""


def render_rejected(attempts: list[Iteration]) -> str:
    """Why earlier revisions of the same summary were rejected, so the refiner does not repeat them ("" if none)."""
    notes = [it["note"] for it in attempts if not it["accepted"] and it["note"]]
    if not notes:
        return ""
    listed = "\n".join(f"- {note}" for note in notes)
    return f"Earlier revisions of this summary were rejected; do not repeat their mistakes:\n{listed}"


def _unusable(text: str, finish_reason: str | None) -> str:
    """Why a revision cannot replace the summary ("empty", "cut-off"), or "" when it can."""
    if not text.strip():
        return "empty"
    return "cut-off" if finish_reason == "length" else ""


def refine(state: RefineState, runtime: Runtime[Context]) -> dict[str, Any]:
    """A revised summary of the best accepted round that fixes its flagged facts and keeps the rest."""
    ctx = context_of(runtime)
    started = time.perf_counter()
    summary, card, base = refine_base(state)
    attempts_before = earlier_attempts(state.get("iterations") or [], base)
    flagged = [v for v in (card["verdicts"] if card else []) if v["status"] == "unsupported"]
    iteration = state.get("iteration", 0) + 1  # the round it writes
    progress.emit("refine", total=1, round=iteration)
    n_words = len(words(summary))
    max_tokens = max(ctx.max_output_tokens, int(count_tokens(summary) * 1.5) + 64)
    prompt = prompts.load("refine", ctx.prompt_dir)
    parts = {
        "min_words": min_words(n_words, ctx.min_length_ratio),
        "max_words": word_budget(
            n_words, ctx.max_length_ratio, budget_words(summary, ctx.max_summary_tokens)
        ),
        "flagged": render_flagged(flagged),
        "rejected": render_rejected(attempts_before),
        "summary": prompts.data_block("summary", summary),
    }
    # everything but the story context, counted as rendered (instructions, flagged facts, summary, notes)
    fixed = count_tokens(prompt.render(**parts, outline="", evidence=""))
    room = max(0, ctx.context_window - max_tokens - fixed - CHAT_OVERHEAD_TOKENS)
    outline = render_outline(state.get("scenes") or [], min(room // 4, OUTLINE_MAX_TOKENS))
    texts = scene_texts(state.get("scenes") or [])
    evidence = render_evidence(flagged, max(0, room - count_tokens(outline)), texts)
    text = prompt.render(**parts, outline=outline, evidence=evidence)
    first_sample = len(attempts_before) * (ctx.parse_retries + 1)
    usage: Usage = {}
    # an empty or cut-off revision is asked again with a new sample (fresh for each revision of one summary),
    # then the summary is kept
    for attempts in range(1, ctx.parse_retries + 2):
        sample = first_sample + attempts - 1
        answer = ask_text(ctx, "refiner", prompt, [("user", text)], max_tokens=max_tokens, sample=sample)
        usage = merge_usage(usage, answer.usage)
        if not _unusable(answer.text, answer.finish_reason):
            break
    revised = prompts.unwrap_data(answer.text)
    problem = _unusable(revised, answer.finish_reason)
    note = f"{problem} refinement after {attempts} attempt(s); kept summary"
    events = [{"stage": "refine", "iteration": iteration, "event": note}] if problem else []
    progress.emit("refine", advance=1)
    return {
        "summary": summary if problem else revised,
        "iteration": iteration,
        "refined_from": base,
        "previous_summary": summary,
        "events": events,
        "usage": usage,
        "timings": {"refine": time.perf_counter() - started},
    }
