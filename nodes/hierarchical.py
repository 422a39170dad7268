"""Hierarchical merging (seed 000, appendix A.1): summarize every chunk, then merge summaries level by level.

Level 0 summarizes each chunk on its own, concurrently (one ``Send`` per chunk). Each higher level merges as
many consecutive summaries of the level below as fit in one prompt with room for the output (W - G_l), giving
the previous merged summary *of the same level* as prior context when there is one (the seed's "merge with
prior context" prompt); merges within a level are therefore sequential. Levels repeat until one summary is
left.

Budgets: the top level gets G_n and each level below ``LEVEL_RATIO`` of the one above, for the number of
levels estimated from the chunk count; a level whose summaries all fit in one merge is the last and gets G_n.
A merge always takes at least two summaries, so every level at least halves the count and the recursion
terminates.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal, cast

from langgraph.runtime import Runtime
from langgraph.types import Send

from nodes.writer import (
    LEVEL_RATIO,
    MIN_BUDGET,
    PRIOR_CONTEXT_SHARE,
    chunk_info,
    event,
    fits,
    room_for_prompt,
    word_limit,
    write,
)
from prompts import data_block, load
from state import LeafResult, LeafTask, SummarizeWork
from storyjudge.core import progress
from storyjudge.core.context import Context, context_of
from storyjudge.core.records import TreeLevel, TreeStep, TreeSummary
from storyjudge.core.textsplit import split_by_tokens
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import Usage, merge_usage

MAX_LEVELS = 64
"""A safety stop: merging at least halves the count, so 64 levels would take 2**64 chunks."""
_BLOCK_TOKENS = 12
"""Tokens a data block's tags and separator add per summary (for estimates; real prompts are counted)."""


# ----------------------------------------------------------------------------------------------------------
# prompts


def render_leaf(chunk_text: str, words: int, prompt_dir: str = "") -> str:
    """The level-0 prompt for one chunk."""
    return load("summarize_chunk", prompt_dir).render(
        excerpt=data_block("excerpt", chunk_text), word_limit=words
    )


def render_merge(context: str, summaries: list[str], words: int, prompt_dir: str = "") -> str:
    """The merge prompt: with prior context when there is one, else the plain merge prompt."""
    block = "\n\n".join(data_block("summary", text, part=k + 1) for k, text in enumerate(summaries))
    if context:
        return load("merge_context", prompt_dir).render(
            context=data_block("context", context), summaries=block, word_limit=words
        )
    return load("merge", prompt_dir).render(summaries=block, word_limit=words)


def merge_overhead(prompt_dir: str = "") -> int:
    """Tokens of the merge prompt (with prior context) around the summaries themselves."""
    return count_tokens(render_merge("x", ["x", "x"], 9999, prompt_dir)) + _BLOCK_TOKENS


# ----------------------------------------------------------------------------------------------------------
# budgets


def _budgets(levels: int, max_summary_tokens: int) -> list[int]:
    floor = min(MIN_BUDGET, max_summary_tokens)
    return [
        max(floor, round(max_summary_tokens * LEVEL_RATIO ** (levels - level))) for level in range(levels + 1)
    ]


def merges_needed(n_chunks: int, budgets: list[int], context_window: int, overhead: int) -> list[int]:
    """Estimated number of summaries at each merge level (empty when one chunk needs no merging)."""
    counts: list[int] = []
    n = n_chunks
    while n > 1 and len(counts) < MAX_LEVELS:
        size = budgets[min(len(counts), len(budgets) - 1)] + _BLOCK_TOKENS
        top = budgets[-1]
        room = room_for_prompt(top, context_window) - overhead
        if n * size <= room:  # everything fits in one merge: the last level
            n = 1
        else:
            out = budgets[len(counts) + 1] if len(counts) + 1 < len(budgets) else top
            prior = min(out, int(PRIOR_CONTEXT_SHARE * room))
            per_merge = max(2, (room_for_prompt(out, context_window) - overhead - prior) // size)
            n = math.ceil(n / per_merge)
        counts.append(n)
    return counts


def level_budgets(n_chunks: int, max_summary_tokens: int, context_window: int, overhead: int) -> list[int]:
    """Token budgets G_0 .. G_L, the top one G_n, for the number of merge levels ``n_chunks`` needs.

    The levels needed depend on the budgets (smaller summaries merge more at a time) and the budgets on the
    number of levels, so this takes the fewest levels L whose budgets need no more than L merge levels.
    """
    for levels in range(MAX_LEVELS):
        budgets = _budgets(levels, max_summary_tokens)
        if len(merges_needed(n_chunks, budgets, context_window, overhead)) <= levels:
            return budgets
    return _budgets(MAX_LEVELS, max_summary_tokens)


# ----------------------------------------------------------------------------------------------------------
# level 0


def fan_out_leaves(state: SummarizeWork) -> list[Send]:
    """One ``Send`` per chunk: level-0 summaries are independent, so they run concurrently."""
    plan = state["summary_plan"]
    return [Send("summarize_leaf", LeafTask(chunk=chunk, plan=plan)) for chunk in state["chunks"]]


def summarize_leaf(task: LeafTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Summarize one chunk within the level-0 budget G_0."""
    ctx = context_of(runtime)
    chunk, plan = task["chunk"], task["plan"]
    budget = plan["budgets"][0]
    written = write(
        ctx,
        load("summarize_chunk", ctx.prompt_dir),
        lambda words: render_leaf(chunk["text"], words, ctx.prompt_dir),
        words=word_limit(budget),
        max_tokens=budget,
        token_limit=budget,
        where={"level": 0, "index": chunk["index"]},
    )
    progress.emit("summarize", advance=1)
    leaf = TreeSummary(
        level=0,
        index=chunk["index"],
        sources=[chunk["index"]],
        prior=None,
        text=written.text,
        tokens=written.tokens,
        budget=budget,
        word_limit=written.word_limit,
        attempts=written.attempts,
        calls=written.calls,
        valid=written.valid,
    )
    result = LeafResult(run=plan["run"], summary=leaf)
    return {"summary_leaves": [result], "events": written.events, "usage": written.usage}


def gather_leaves(state: SummarizeWork) -> dict[str, Any]:
    """Order the level-0 summaries of this run and start the tree."""
    plan = state["summary_plan"]
    leaves = sorted(
        (result["summary"] for result in state.get("summary_leaves", []) if result["run"] == plan["run"]),
        key=lambda leaf: leaf["index"],
    )
    budget = plan["budgets"][0]
    now = time.time()
    marks = state.get("summary_marks", {})
    update: dict[str, Any] = {
        "tree": [
            {
                "level": 0,
                "budget": budget,
                "word_limit": word_limit(budget),
                "chunks": [chunk_info(chunk) for chunk in state["chunks"]],
                "summaries": leaves,
            }
        ],
        "summary_level": leaves,
        "summary_marks": {"leaves": now},
        "timings": {"summarize.level0": round(now - marks.get("chunked", now), 4)},
    }
    if len(leaves) == 1:
        update["draft"] = leaves[0]["text"]
    return update


# ----------------------------------------------------------------------------------------------------------
# merging


def take_group(
    texts: list[str],
    start: int,
    prior: str,
    budget: int,
    context_window: int,
    words: int,
    where: dict[str, Any],
    prompt_dir: str = "",
) -> tuple[int, str, list[str], list[dict[str, Any]]]:
    """The next merge group from ``start``: as many summaries as fit with the prior context and the output.

    Returns (end, context, group texts, events). The prior context is cut to ``PRIOR_CONTEXT_SHARE`` of the
    room at a paragraph or sentence boundary. A group takes at least two summaries when two are left; if even
    two do not fit (only possible when kept over-budget summaries are far too long), the prior context is
    dropped, then each member is cut to an equal share of the room, and events say so.
    """
    notes: list[dict[str, Any]] = []
    room = room_for_prompt(budget, context_window)
    context = prior
    if prior:
        limit = max(1, int(PRIOR_CONTEXT_SHARE * room))
        if count_tokens(prior) > limit:
            context = split_by_tokens(prior, limit)[0]
            notes.append(event("prior_context_truncated", **where, tokens=count_tokens(context), limit=limit))
    end = start + 1
    while end < len(texts) and fits(
        render_merge(context, texts[start : end + 1], words, prompt_dir), budget, context_window
    ):
        end += 1
    if end == start + 1 and end < len(texts):
        end += 1  # progress: a merge of one summary alone would never shrink the level
    group = texts[start:end]
    if not fits(render_merge(context, group, words, prompt_dir), budget, context_window):
        if context:
            context = ""
            notes.append(event("prior_context_dropped", **where))
        if not fits(render_merge(context, group, words, prompt_dir), budget, context_window):
            base = count_tokens(render_merge("", [""] * len(group), words, prompt_dir))
            share = max(1, (room - base) // len(group) - 4)
            group = [
                split_by_tokens(text, share)[0] if count_tokens(text) > share else text for text in group
            ]
            notes.append(event("clipped_for_budget", **where, members=len(group), tokens_each=share))
    return end, context, group, notes


def merge_level(state: SummarizeWork, runtime: Runtime[Context]) -> dict[str, Any]:
    """Merge the current level into the next one, group by group, each with the previous merge as context."""
    started = time.time()
    ctx = context_of(runtime)
    plan = state["summary_plan"]
    items = state["summary_level"]
    level = items[0]["level"] + 1
    if level > MAX_LEVELS:
        raise RuntimeError(f"hierarchical merging did not converge in {MAX_LEVELS} levels")
    window, top = plan["context_window"], plan["max_summary_tokens"]
    texts = [item["text"] for item in items]
    last = fits(render_merge("", texts, word_limit(top), ctx.prompt_dir), top, window)
    budget = top if last or level >= len(plan["budgets"]) - 1 else plan["budgets"][level]
    words = word_limit(budget)
    outputs: list[TreeSummary] = []
    events: list[dict[str, Any]] = []
    usage: Usage = {}
    start = 0
    while start < len(items):
        index = len(outputs)
        where = {"level": level, "index": index}
        prior = outputs[-1]["text"] if outputs else ""
        end, context, group, notes = take_group(
            texts, start, prior, budget, window, words, where, ctx.prompt_dir
        )
        events.extend(notes)
        name = "merge_context" if context else "merge"
        written = write(
            ctx,
            load(name, ctx.prompt_dir),
            lambda asked, context=context, group=group: render_merge(  # type: ignore[misc]
                context, group, asked, ctx.prompt_dir
            ),
            words=words,
            max_tokens=budget,
            token_limit=budget,
            where=where,
        )
        events.extend(written.events)
        usage = merge_usage(usage, written.usage)
        outputs.append(
            TreeSummary(
                level=level,
                index=index,
                sources=[items[k]["index"] for k in range(start, end)],
                prior=index - 1 if context else None,
                text=written.text,
                tokens=written.tokens,
                budget=budget,
                word_limit=written.word_limit,
                attempts=written.attempts,
                calls=written.calls,
                valid=written.valid,
            )
        )
        progress.emit("summarize", advance=1)
        start = end
    tree: list[TreeLevel | TreeStep] = [
        *state.get("tree", []),
        TreeLevel(level=level, budget=budget, word_limit=words, summaries=outputs),
    ]
    if len(outputs) > 1:
        done = sum(len(cast(TreeLevel, entry).get("summaries", [])) for entry in tree)
        ahead = merges_needed(
            len(outputs), plan["budgets"][level:] or [top], window, merge_overhead(ctx.prompt_dir)
        )
        progress.emit("summarize", total=done + sum(ahead) + (1 if ctx.artifact_removal else 0))
    update: dict[str, Any] = {
        "tree": tree,
        "summary_level": outputs,
        "events": events,
        "usage": usage,
        "timings": {"summarize.merge": round(time.time() - started, 4)},
    }
    if len(outputs) == 1:
        update["draft"] = outputs[0]["text"]
    return update


def route_level(state: SummarizeWork) -> Literal["merge_level", "remove_artifacts"]:
    """Merge again while more than one summary is left."""
    return "merge_level" if len(state.get("summary_level", [])) > 1 else "remove_artifacts"
