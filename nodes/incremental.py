"""Incremental updating (seed 000, appendix A.2): one running summary, updated chunk by chunk, compressed.

Step 0 summarizes the first chunk; every later step gives the model the next chunk and the running summary and
asks for the updated summary. The prompts ask for a length that grows with the share of the book read
(``word_limit(G_n) * (step + 1) / chunks``, as in the official code), so every chunk gets an equal share of the
final summary. When an updated summary is longer than G_n tokens, the compression prompt (A.2.1) condenses it
to that step's target, at temperature 1 as in the seed, with bounded retries: compression happens exactly
then. A summary still over G_n after compression keeps its newest sentences (``keep_newest``): the oldest
part goes, never the chunk just read, and a ``clipped_for_budget`` event says how much went.
One step per graph step, so a checkpointed run resumes at the chunk it stopped at.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from functools import cache, partial
from typing import Any, Literal

from langgraph.runtime import Runtime

from nodes.summary_writer import (
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
from state import SummarizeWork
from storyjudge.core import progress
from storyjudge.core.context import Context, context_of
from storyjudge.core.textsplit import sentence_spans
from storyjudge.core.tokens import count_tokens, decode, encode
from storyjudge.core.usage import merge_usage, totals

MIN_STEP_WORDS = 40
"""The running summary is never asked to be shorter than this (a 2% share of 585 words would be 11)."""
UPDATE_OUTPUT_FACTOR = 2
"""An update may write up to this many times G_n tokens: an answer over G_n is compressed, not cut off."""


def step_words(step: int, chunks: int, max_summary_tokens: int) -> int:
    """Words the summary should have after reading chunk ``step`` of ``chunks``."""
    full = word_limit(max_summary_tokens)
    return min(full, max(MIN_STEP_WORDS, round(full * (step + 1) / chunks)))


def keep_newest(text: str, limit: int) -> str:
    """The end of ``text`` within ``limit`` tokens, cut at a sentence start where one fits.

    A running summary that is still over G_n after compression loses its oldest part, never the chunk just
    read: what the book said last is what every later update builds on. A last sentence longer than the whole
    limit keeps its last ``limit`` tokens.
    """
    if count_tokens(text) <= limit:
        return text
    spans = sentence_spans(text)
    # the first sentence whose suffix fits, by bisection (the suffix shrinks as the index grows)
    lo = bisect.bisect_left(
        range(len(spans)), True, key=lambda i: count_tokens(text[spans[i][0] :].strip()) <= limit
    )
    if lo < len(spans):
        return text[spans[lo][0] :].strip()
    tokens = encode(text)[-limit:]
    tail = decode(tokens).lstrip("\ufffd")  # a character cut in two decodes to a replacement mark
    while tail and count_tokens(tail.strip()) > limit:  # a multi-byte character may decode to more tokens
        tail = tail[1:]
    return tail.strip()


def render_init(chunk_text: str, words: int, prompt_dir: str = "") -> str:
    """The prompt for the first chunk."""
    return load("incremental_init", prompt_dir).render(
        excerpt=data_block("excerpt", chunk_text), word_limit=words
    )


def render_update(chunk_text: str, summary: str, words: int, prompt_dir: str = "") -> str:
    """The prompt that updates the running summary with the next chunk."""
    return load("incremental_update", prompt_dir).render(
        excerpt=data_block("excerpt", chunk_text), summary=data_block("summary", summary), word_limit=words
    )


def render_compress(summary: str, words: int, prompt_dir: str = "") -> str:
    """The compression prompt (the seed's A.2.1)."""
    return load("compress", prompt_dir).render(
        summary=data_block("summary", summary), current_words=count_words(summary), word_limit=words
    )


def compress(ctx: Context, text: str, words: int, max_summary_tokens: int, step: int) -> Written:
    """Condense a running summary to fewer than ``words`` words and at most G_n tokens (bounded retries)."""
    return write(
        ctx,
        load("compress", ctx.prompt_dir),
        lambda asked: render_compress(text, asked, ctx.prompt_dir),
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
    build: Callable[[int], str]
    if step == 0:
        prompt = load("incremental_init", ctx.prompt_dir)
        build = partial(render_init, chunk["text"], prompt_dir=ctx.prompt_dir)
    else:
        prompt = load("incremental_update", ctx.prompt_dir)
        build = partial(render_update, chunk["text"], running, prompt_dir=ctx.prompt_dir)
    render = cache(build)  # the allowance below and the first attempt use the same prompt

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
        done = {"tokens_after": condensed.tokens, "attempts": condensed.attempts, "ok": condensed.valid}
        events.append(event("compress", step=step, tokens_before=tokens, **done))
        text, compressed = condensed.text, True
        if count_tokens(text) > top:  # keeps every later prompt within W, and the final summary within G_n
            before = count_tokens(text)
            text = keep_newest(text, top)
            after = count_tokens(text)
            clipped = {"tokens": after, "limit": top, "tokens_dropped": before - after, "kept": "newest"}
            events.append(event("clipped_for_budget", step=step, **clipped))
    summary = written.as_summary(step, step, [chunk["index"]], step - 1 if step else None, top)
    if compressed:  # the condensed text, and the compression's calls too
        summary.update({"text": text, "tokens": count_tokens(text), "calls": int(totals(usage)["calls"])})
    record = {
        "step": step,
        "chunk": chunk_info(chunk),
        "budget": top,
        "word_limit": words,
        "draft_tokens": tokens,
        "compressed": compressed,
    }
    progress.emit("summarize", advance=1)
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
