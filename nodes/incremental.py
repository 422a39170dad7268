"""Incremental updating (seed 000, appendix A.2): one running summary, updated chunk by chunk, compressed.

The asked length grows with the share of the book read, as in the official code. An update over G_n tokens is
compressed (A.2.1); one still over keeps its newest sentences, with an event. One step per graph step, so a
checkpointed run resumes at the chunk it stopped at.
"""

from __future__ import annotations

import bisect
import time
from functools import cache, partial
from typing import Any, Literal

from langgraph.runtime import Runtime

from nodes.summary_writer import (
    REGENERATION_TEMPERATURE,
    Written,
    chunk_info,
    event,
    prompt_cost,
    summary_prompt,
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

MIN_STEP_WORDS = 40  # the running summary is never asked to be shorter
UPDATE_OUTPUT_FACTOR = 2  # an update may write this many times G_n tokens: compressed, not cut off


def step_words(step: int, chunks: int, max_summary_tokens: int) -> int:
    """Words the summary should have after reading chunk ``step`` of ``chunks``."""
    full = word_limit(max_summary_tokens)
    return min(full, max(MIN_STEP_WORDS, round(full * (step + 1) / chunks)))


def keep_newest(text: str, limit: int) -> str:
    """The end of ``text`` within ``limit`` tokens, cut at a sentence start where one fits.

    The oldest part goes, never the chunk just read: every later update builds on it.
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


def render_compress(summary: str, words: int, prompt_dir: str = "") -> str:
    """The compression prompt (the seed's A.2.1)."""
    return load("compress", prompt_dir).render(
        summary=data_block("summary", summary), current_words=len(summary.split()), word_limit=words
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
    if step == 0:
        name, data = "incremental_init", {"excerpt": chunk["text"]}
    else:
        name, data = "incremental_update", {"excerpt": chunk["text"], "summary": state.get("draft", "")}
    prompt = load(name, ctx.prompt_dir)
    # the allowance below and the first attempt use the same prompt
    render = cache(partial(summary_prompt, name, ctx.prompt_dir, **data))

    allowance = max(1, min(UPDATE_OUTPUT_FACTOR * top, window - prompt_cost(render(words))))
    written = write(
        ctx, prompt, render, words=words, max_tokens=allowance, token_limit=None, where={"step": step}
    )
    events, usage, text = list(written.events), written.usage, written.text
    summary = written.as_summary(step, step, [chunk["index"]], step - 1 if step else None, top)
    if written.tokens > top:
        condensed = compress(ctx, text, words, top, step)
        events.extend(condensed.events)
        usage = merge_usage(usage, condensed.usage)
        done = {"tokens_after": condensed.tokens, "attempts": condensed.attempts, "ok": condensed.valid}
        events.append(event("compress", step=step, tokens_before=written.tokens, **done))
        text = condensed.text
        if condensed.tokens > top:  # keeps every later prompt within W, and the final summary within G_n
            text = keep_newest(text, top)
            after = count_tokens(text)
            clipped = {"tokens": after, "limit": top, "tokens_dropped": condensed.tokens - after}
            events.append(event("clipped_for_budget", step=step, **clipped, kept="newest"))
        # the condensed text, and the compression's calls too
        summary.update({"text": text, "tokens": count_tokens(text), "calls": int(totals(usage)["calls"])})
    record = {
        "step": step,
        "chunk": chunk_info(chunk),
        "budget": top,
        "word_limit": words,
        "draft_tokens": written.tokens,
        "compressed": written.tokens > top,
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
