"""Incremental updating (seed 000, appendix A.2): one running summary, updated chunk by chunk, compressed.

Step 0 summarizes the first chunk; every later step gives the model the next chunk and the running summary and
asks for the updated summary. The prompts ask for a length that grows with the share of the book read
(``word_limit(G_n) * (step + 1) / chunks``, as in the seed's code), so every chunk gets an equal share of the
final summary. When an updated summary is longer than G_n tokens, the compression prompt (A.2.1) condenses it
to that step's target, at temperature 1 as in the seed, with bounded retries: compression happens exactly
then.
One step per graph step, so a checkpointed run resumes at the chunk it stopped at.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from langgraph.runtime import Runtime

from nodes.summarize import (
    REGENERATION_TEMPERATURE,
    Written,
    chunk_info,
    count_words,
    event,
    prompt_cost,
    word_limit,
    write,
)
from prompts import data_block, load
from state import SummarizeWork, TreeSummary
from storyjudge.context import Context, context_of
from storyjudge.progress import report
from storyjudge.textsplit import split_by_tokens
from storyjudge.tokens import count_tokens
from storyjudge.usage import merge_usage

MIN_STEP_WORDS = 40
"""The running summary is never asked to be shorter than this (a 2% share of 585 words would be 11)."""
UPDATE_OUTPUT_FACTOR = 2
"""An update may write up to this many times G_n tokens: an answer over G_n is compressed, not cut off."""


def step_words(step: int, chunks: int, max_summary_tokens: int) -> int:
    """Words the summary should have after reading chunk ``step`` of ``chunks``."""
    full = word_limit(max_summary_tokens)
    return min(full, max(MIN_STEP_WORDS, round(full * (step + 1) / chunks)))


def render_init(chunk_text: str, words: int) -> str:
    """The prompt for the first chunk."""
    return load("incremental_init").render(excerpt=data_block("excerpt", chunk_text), word_limit=words)


def render_update(chunk_text: str, summary: str, words: int) -> str:
    """The prompt that updates the running summary with the next chunk."""
    return load("incremental_update").render(
        excerpt=data_block("excerpt", chunk_text), summary=data_block("summary", summary), word_limit=words
    )


def render_compress(summary: str, words: int) -> str:
    """The compression prompt (the seed's A.2.1)."""
    return load("compress").render(
        summary=data_block("summary", summary), current_words=count_words(summary), word_limit=words
    )


def compress(ctx: Context, text: str, words: int, max_summary_tokens: int, step: int) -> Written:
    """Condense a running summary to fewer than ``words`` words and at most G_n tokens (bounded retries)."""
    return write(
        ctx,
        load("compress"),
        lambda asked: render_compress(text, asked),
        words=words,
        max_tokens=max_summary_tokens,
        token_limit=max_summary_tokens,
        where={"step": step, "call": "compress"},
        temperature=REGENERATION_TEMPERATURE,
    )


def incremental_step(state: SummarizeWork, runtime: Runtime[Context]) -> dict[str, Any]:
    """Read the next chunk into the running summary; compress the result when it is over G_n."""
    started = time.time()
    ctx = context_of(runtime)
    plan = state["summary_plan"]
    step = state.get("summary_step", 0)
    chunk = state["chunks"][step]
    window, top = plan["context_window"], plan["max_summary_tokens"]
    words = step_words(step, len(state["chunks"]), top)
    running = state.get("draft", "") if step else ""
    if step == 0:
        prompt = load("incremental_init")

        def render(asked: int) -> str:
            return render_init(chunk["text"], asked)
    else:
        prompt = load("incremental_update")

        def render(asked: int) -> str:
            return render_update(chunk["text"], running, asked)

    allowance = max(1, min(UPDATE_OUTPUT_FACTOR * top, window - prompt_cost(render(words))))
    written = write(
        ctx, prompt, render, words=words, max_tokens=allowance, token_limit=None, where={"step": step}
    )
    events, usage = list(written.events), written.usage
    text, tokens, compressed = written.text, written.tokens, False
    if tokens > top:
        condensed = compress(ctx, text, words, top, step)
        events.extend(condensed.events)
        usage = merge_usage(usage, condensed.usage)
        events.append(
            event(
                "compress",
                step=step,
                tokens_before=tokens,
                tokens_after=condensed.tokens,
                attempts=condensed.attempts,
                ok=condensed.valid,
            )
        )
        text, compressed = condensed.text, True
        if count_tokens(text) > top:  # keeps every later prompt within W, and the final summary within G_n
            text = split_by_tokens(text, top)[0].rstrip()
            events.append(event("clipped_for_budget", step=step, tokens=count_tokens(text), limit=top))
    summary = TreeSummary(
        level=step,
        index=step,
        sources=[chunk["index"]],
        prior=step - 1 if step else None,
        text=text,
        tokens=count_tokens(text),
        budget=top,
        word_limit=written.word_limit,
        attempts=written.attempts,
        valid=written.valid,
    )
    record = {
        "step": step,
        "chunk": chunk_info(chunk),
        "budget": top,
        "word_limit": words,
        "draft_tokens": tokens,
        "compressed": compressed,
    }
    report("summarize", advance=1)
    return {
        "draft": text,
        "summary_step": step + 1,
        "tree": [*state.get("tree", []), {**record, "summary": summary}],
        "events": events,
        "usage": usage,
        "timings": {"summarize.incremental": round(time.time() - started, 4)},
    }


def route_step(state: SummarizeWork) -> Literal["incremental_step", "remove_artifacts"]:
    """Read the next chunk until none is left."""
    return "incremental_step" if state.get("summary_step", 0) < len(state["chunks"]) else "remove_artifacts"
