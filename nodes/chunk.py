"""Cutting a narrative into the chunks the book summarizer reads, never losing text.

A document's chunks join back to exactly it and are never more than the official BooookScore chunker makes.
Scenes are packed greedily and split only when one alone is over the budget: a summary that reads whole scenes
loses less than one that reads halves.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import accumulate
from typing import Any, Literal

from langgraph.runtime import Runtime

from nodes.hierarchical import level_budgets, merge_overhead, merges_needed
from nodes.incremental import UPDATE_OUTPUT_FACTOR, render_compress
from nodes.summary_writer import cost_of_tokens, prompt_cost, summary_prompt, word_limit
from state import SummarizeWork, SummaryPlan
from storyjudge.core import progress
from storyjudge.core.context import ConfigError, Context, context_of
from storyjudge.core.officialchunks import official_starts, split_official
from storyjudge.core.records import Scene, SummaryChunk
from storyjudge.core.textsplit import split_by_tokens, split_filled
from storyjudge.core.tokens import count_tokens

SCENE_JOINER = "\n\n"  # between two packed scenes not contiguous in the source


def chunk_document(text: str, max_tokens: int, chunker: str = "sentences") -> list[SummaryChunk]:
    """Chunks whose texts concatenate to exactly ``text``: of at most ``max_tokens``, or the official ones.

    Chunks end at paragraph or sentence bounds, unless that would make more chunks than the official chunker:
    then a chunk runs on to a clause or word bound at or past the official chunk's end.
    """
    if chunker == "official":
        pieces = [(piece, count_tokens(piece)) for piece in split_official(text, max_tokens)]
    else:
        pieces = split_filled(text, max_tokens)
        if len(pieces) > 1:  # never more than the official chunker: where whole sentences would be, keep up
            official = official_starts(text, max_tokens)
            if len(pieces) > len(official):
                pieces = split_filled(text, max_tokens, reach=official[1:])
    bounds = [0, *accumulate(len(piece) for piece, _ in pieces)]
    return [
        SummaryChunk(index=index, text=piece, tokens=tokens, start=start, end=end, scene_ids=[])
        for index, ((piece, tokens), start, end) in enumerate(zip(pieces, bounds, bounds[1:], strict=False))
    ]


def chunk_scenes(scenes: Sequence[Scene], max_tokens: int) -> list[SummaryChunk]:
    """Chunks of whole consecutive scenes (at most ``max_tokens``); a scene over the budget alone is split."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be >= 1")
    parts: list[tuple[str, int, int, list[str]]] = []  # text, start, end, scene ids
    packing = False  # the last part is whole scenes, and may take the next one
    for scene in scenes:
        text, start, end = scene["text"], scene["start"], scene["end"]
        if not text:
            continue
        if count_tokens(text) > max_tokens:
            pieces = split_by_tokens(text, max_tokens)
            starts = accumulate((len(piece) for piece in pieces), initial=start)
            parts += [
                (piece, at, at + len(piece), [scene["id"]]) for piece, at in zip(pieces, starts, strict=False)
            ]
            packing = False
            continue
        if packing:
            group, first, last, ids = parts[-1]
            joined = group + ("" if last == start else SCENE_JOINER) + text
            if count_tokens(joined) <= max_tokens:
                parts[-1] = (joined, first, end, [*ids, scene["id"]])
                continue
        parts.append((text, start, end, [scene["id"]]))
        packing = True
    return [
        SummaryChunk(index=index, text=text, tokens=count_tokens(text), start=start, end=end, scene_ids=ids)
        for index, (text, start, end, ids) in enumerate(parts)
    ]


def _settings(state: SummarizeWork, ctx: Context) -> tuple[Literal["hierarchical", "incremental"], int, int]:
    strategy = state.get("strategy") or ctx.strategy
    chunk_size = state.get("chunk_size") or ctx.chunk_size
    top = state.get("max_summary_tokens") or ctx.max_summary_tokens
    if strategy not in ("hierarchical", "incremental"):
        raise ConfigError(f"strategy must be 'hierarchical' or 'incremental', not {strategy!r}.")
    if not isinstance(chunk_size, int) or chunk_size < 64:
        raise ConfigError(f"chunk_size must be an integer >= 64 tokens, not {chunk_size!r}.")
    if not isinstance(top, int) or top < 16:
        raise ConfigError(f"max_summary_tokens must be an integer >= 16 tokens, not {top!r}.")
    return strategy, chunk_size, top


def check_budgets(
    strategy: str, chunks: list[SummaryChunk], budgets: list[int], window: int, prompt_dir: str = ""
) -> None:
    """Refuse settings under which some prompt plus its output could not fit in the context window."""
    top, grown = budgets[-1], UPDATE_OUTPUT_FACTOR * budgets[-1]
    biggest = max(chunks, key=lambda chunk: chunk["tokens"])
    size = biggest["tokens"]
    needs: dict[str, int] = {}  # what must fit -> the tokens of its prompt and output
    if strategy == "hierarchical":
        leaf = summary_prompt("summarize_chunk", prompt_dir, word_limit(budgets[0]), excerpt=biggest["text"])
        needs[f"a {size}-token chunk and its summary"] = prompt_cost(leaf) + budgets[0]
        if len(chunks) > 1:
            needs[f"merging two {top}-token summaries"] = (
                cost_of_tokens(2 * top + merge_overhead(prompt_dir)) + top
            )
    else:
        update = count_tokens(summary_prompt("incremental_update", prompt_dir, 9999, excerpt="", summary=""))
        needs[f"a {size}-token chunk, a {top}-token summary and its update"] = (
            cost_of_tokens(size + top + update) + top
        )
        squeeze = count_tokens(render_compress("", 9999, prompt_dir))
        needs[f"compressing a {grown}-token summary"] = cost_of_tokens(grown + squeeze) + top
    for what, tokens in needs.items():
        if tokens > window:
            raise ConfigError(
                f"The context window ({window} tokens) is too small for {what}; lower --chunk-size or "
                "--max-summary-tokens, or raise context_window if the model has a larger one."
            )


def plan_summary(state: SummarizeWork, runtime: Runtime[Context]) -> dict[str, Any]:
    """Chunk the narrative, fix the strategy and the per-level budgets, and reset this run's channels."""
    started = time.time()
    ctx = context_of(runtime)
    strategy, chunk_size, top = _settings(state, ctx)
    document = state.get("document") or ""
    if state.get("scenes"):
        chunks = chunk_scenes(state["scenes"], chunk_size)
    else:
        chunks = chunk_document(document, chunk_size, ctx.chunker) if document.strip() else []
    if not chunks:
        raise ValueError("Nothing to summarize: give a non-empty 'document' or a list of 'scenes' with text.")
    window = ctx.context_window
    if strategy == "hierarchical":
        overhead = merge_overhead(ctx.prompt_dir)
        budgets = level_budgets(len(chunks), top, window, overhead)
        calls = len(chunks) + sum(merges_needed(len(chunks), budgets, window, overhead))
    else:
        budgets, calls = [top], len(chunks)
    check_budgets(strategy, chunks, budgets, window, ctx.prompt_dir)
    progress.emit("summarize", total=calls + (1 if ctx.artifact_removal else 0))
    plan = SummaryPlan(strategy=strategy, max_summary_tokens=top, context_window=window, budgets=budgets)
    now = time.time()
    return {
        "chunks": chunks,
        "summary_plan": plan,
        "summary_step": 0,
        "tree": [],
        "draft": "",
        "summary_marks": {"start": started, "chunked": now},
        "timings": {"summarize.chunk": round(now - started, 4)},
    }


def route_strategy(state: SummarizeWork) -> Literal["summarize_tree", "incremental_step"]:
    """Hierarchical: the tree of chunk summaries and merges; incremental: the first update step."""
    return "summarize_tree" if state["summary_plan"]["strategy"] == "hierarchical" else "incremental_step"
