"""Artifact removal (seed 000, M.3): one call removes "in this segment" phrases, guarded against losing content.

A small model may rewrite or drop sentences instead, so the edit is kept only when it loses and adds few content
words and keeps most of every sentence's; otherwise the draft stays and an event says why.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from typing import Any

from langgraph.runtime import Runtime

from nodes.summary_writer import ROLE, clean_output, event, problem_of, prompt_cost
from prompts import data_block, load
from state import SummarizeWork
from storyjudge.core import llm, progress
from storyjudge.core.context import Context, context_of
from storyjudge.core.textsplit import sentences
from storyjudge.core.tokens import count_tokens

MAX_LOST_SHARE = 0.10  # of the original's content words
MAX_ADDED_SHARE = 0.10  # new content words, relative to the original's count
MIN_SENTENCE_KEPT = 0.5  # of a sentence's distinct content words, else the sentence counts as dropped
MIN_SENTENCE_WORDS = 4  # shorter sentences are not checked one by one

_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z0-9]+)*")
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    let me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up upon very was we were what when where which
    while who whom why will with would you your yours yourself yourselves""".split()
)


def content_words(text: str) -> Counter[str]:
    """Lowercase words that carry content (stopwords and one-letter words left out), with their counts."""
    return Counter(w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1)


def edit_damage(original: str, edited: str) -> str | None:
    """Why ``edited`` is not a safe edit of ``original`` (None when it is)."""
    before, after = content_words(original), content_words(edited)
    total = max(1, sum(before.values()))
    lost = sum((before - after).values()) / total
    if lost > MAX_LOST_SHARE:
        return f"lost {lost:.0%} of the content words (more than {MAX_LOST_SHARE:.0%})"
    added = sum((after - before).values()) / total
    if added > MAX_ADDED_SHARE:
        return f"added {added:.0%} new content words (more than {MAX_ADDED_SHARE:.0%})"
    for number, sentence in enumerate(sentences(original), start=1):
        words = set(content_words(sentence))
        if len(words) >= MIN_SENTENCE_WORDS:
            kept = len(words & set(after)) / len(words)
            if kept < MIN_SENTENCE_KEPT:
                return f"dropped sentence {number} ({kept:.0%} of its content words kept): {sentence[:80]!r}"
    return None


def remove_artifacts(state: SummarizeWork, runtime: Runtime[Context]) -> dict[str, Any]:
    """Clean the draft into the final summary (or keep the draft when the edit is unsafe); close timings."""
    started = time.time()
    ctx = context_of(runtime)
    draft = state.get("draft", "").strip()
    summary, events, usage = draft, [], {}
    if ctx.artifact_removal and draft:
        prompt = load("remove_artifacts", ctx.prompt_dir)
        text = prompt.render(summary=data_block("summary", draft))
        room = state["summary_plan"]["context_window"] - prompt_cost(text)
        max_tokens = min(room, math.ceil(count_tokens(draft) * 1.2) + 64)
        if max_tokens < count_tokens(draft):
            events.append(
                event("artifact_removal_fallback", reason="the summary leaves no room for its edit")
            )
        else:
            answer = llm.ask_text(ctx, ROLE, prompt, [("user", text)], max_tokens=max_tokens)
            usage = answer.usage
            edited = clean_output(answer.text)
            problem = problem_of(edited, answer.finish_reason, None)
            reason = f"edit was {problem.replace('_', ' ')}" if problem else edit_damage(draft, edited)
            if reason:
                events.append(event("artifact_removal_fallback", reason=reason))
            elif edited != draft:
                summary = edited
                before, after = count_tokens(draft), count_tokens(edited)
                events.append(event("artifact_removal", tokens_before=before, tokens_after=after))
        progress.emit("summarize", advance=1)
    now = time.time()
    return {
        "summary": summary,
        "events": events,
        "usage": usage,
        "summary_marks": {"done": now},
        "timings": {
            "summarize.artifacts": round(now - started, 4),
            "summarize": round(now - state.get("summary_marks", {}).get("start", now), 4),
        },
    }
