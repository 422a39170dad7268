"""What both book-summarization strategies share: token budgets (seed 000, appendix A), checks, regeneration.

Prompts are counted in cl100k_base with a margin for the model's tokenizer and chat template. An unusable
summary is regenerated a bounded number of times, then the best attempt is kept and an event says so.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import prompts
from prompts import Prompt
from storyjudge.core import llm
from storyjudge.core.context import Context
from storyjudge.core.records import SummaryChunk, TreeSummary
from storyjudge.core.textsplit import sentence_spans
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import Usage, merge_usage, totals

ROLE = "summarizer"
WORDS_PER_TOKEN = 0.65  # words asked for per token of budget (the official BooookScore code's)
LEVEL_RATIO = 0.65  # G_l = LEVEL_RATIO * G_(l+1), the official code's ratio
MIN_BUDGET = 64  # no level's budget goes below this many tokens (a handful of sentences)
MAX_REGENERATIONS = 3  # extra attempts for an over-budget, cut-off or empty summary
REGENERATION_TEMPERATURE = 1.0  # as the official code: the first answer was deterministic and wrong
WORD_LIMIT_SHRINK = 0.1  # each regeneration asks for this share fewer words (the official code's)
TOKENIZER_SLACK = 0.06  # the model's tokenizer may need this share more tokens than cl100k_base
CHAT_OVERHEAD = 32  # tokens of the chat template around one user message
PRIOR_CONTEXT_SHARE = 0.2  # largest share of a merge prompt's room for the prior context (official code)

_FINAL_PUNCTUATION = re.compile(r"""[.!?…]["'”’)\]»*_]*$|["'”’»)]$""")
_PREAMBLE = re.compile(
    r"^\s*(?:here\s+is|here's|sure|certainly|below\s+is|(?:the\s+)?(?:updated|condensed|edited|merged)?\s*summary)"
    r"\b[^\n]{0,160}:\s*\n",
    re.IGNORECASE,
)


def prompt_cost(text: str) -> int:
    """Tokens a prompt may take in the model's tokenizer, chat template included (an upper estimate)."""
    return cost_of_tokens(count_tokens(text))


def cost_of_tokens(tokens: int) -> int:
    """``prompt_cost`` for a prompt of ``tokens`` cl100k_base tokens."""
    return math.ceil(tokens * (1 + TOKENIZER_SLACK)) + CHAT_OVERHEAD


def fits(prompt_text: str, max_tokens: int, context_window: int) -> bool:
    """Whether a prompt plus ``max_tokens`` of output fit in the context window."""
    return prompt_cost(prompt_text) + max_tokens <= context_window


def room_for_prompt(max_tokens: int, context_window: int) -> int:
    """cl100k_base tokens a prompt may have when ``max_tokens`` of output must still fit."""
    return max(0, math.floor((context_window - CHAT_OVERHEAD - max_tokens) / (1 + TOKENIZER_SLACK)))


def word_limit(tokens: int) -> int:
    """Words to ask for in a summary whose budget is ``tokens``."""
    return max(1, round(tokens * WORDS_PER_TOKEN))


def summary_prompt(name: str, prompt_dir: str, words: int, /, **data: str) -> str:
    """The prompt ``name`` asking for ``words`` words, with each of ``data`` as a delimited data block."""
    blocks = {tag: prompts.data_block(tag, text) for tag, text in data.items()}
    return prompts.load(name, prompt_dir).render(word_limit=words, **blocks)


def ends_sentence(text: str) -> bool:
    """Whether text ends with final punctuation (optionally followed by closing quotes or brackets)."""
    return bool(_FINAL_PUNCTUATION.search(text.rstrip()))


def clean_output(text: str) -> str:
    """The summary without surrounding blank space and a chatty opening line ("Here is the summary:")."""
    text = prompts.unwrap_data(text)
    match = _PREAMBLE.match(text + "\n") if "\n" in text else None
    if match and text[match.end() :].strip():
        text = text[match.end() :].strip()
    return text.strip().strip("-").strip()


def problem_of(
    text: str, finish_reason: str | None, token_limit: int | None, tokens: int | None = None
) -> str | None:
    """Why an answer cannot be used as is: "empty", "cut_off", "over_length", or None when it can."""
    if not text.strip():
        return "empty"
    if finish_reason == "length" or not ends_sentence(text):
        return "cut_off"
    if token_limit is not None and (count_tokens(text) if tokens is None else tokens) > token_limit:
        return "over_length"
    return None


def trim_to_last_sentence(text: str) -> str:
    """Text without a dangling last sentence (unchanged when nothing complete would remain)."""
    spans = sentence_spans(text)
    while spans and not ends_sentence(text[spans[-1][0] : spans[-1][1]]):
        spans.pop()
    return text[: spans[-1][1]].rstrip() if spans else text


def chunk_info(chunk: SummaryChunk) -> dict[str, Any]:
    """A chunk without its text, for the tree (the text is in the source)."""
    return {key: value for key, value in chunk.items() if key != "text"}


def event(kind: str, **details: Any) -> dict[str, Any]:
    """An entry of the graph's ``events`` list, tagged with the stage that produced it."""
    return {"stage": "summarize", "kind": kind, **details}


@dataclass
class Written:
    """The summary a call (and its regenerations) produced, with what it cost and what went wrong."""

    text: str
    tokens: int
    attempts: int
    valid: bool
    word_limit: int
    usage: Usage
    events: list[dict[str, Any]]

    def as_summary(
        self, level: int, index: int, sources: list[int], prior: int | None, budget: int
    ) -> TreeSummary:
        """This answer as a node of the summary tree, with what it cost."""
        return TreeSummary(
            level=level,
            index=index,
            sources=sources,
            prior=prior,
            text=self.text,
            tokens=self.tokens,
            budget=budget,
            word_limit=self.word_limit,
            attempts=self.attempts,
            calls=int(totals(self.usage)["calls"]),  # attempts not answered from the LLM cache
            valid=self.valid,
        )


def write(
    ctx: Context,
    prompt: Prompt,
    render: Callable[[int], str],
    *,
    words: int,
    max_tokens: int,
    token_limit: int | None,
    where: dict[str, Any],
    temperature: float | None = None,
) -> Written:
    """Ask for a summary (``render``: the message for a word limit), regenerating unusable answers.

    Returns the first usable answer, else the best attempt (a cut-off one without its dangling sentence), with
    an event for each regeneration and for the attempt kept.
    """
    attempts: list[tuple[tuple[int, int, int], str, int, str]] = []  # rank, text, words asked, problem
    usage: Usage = {}
    events: list[dict[str, Any]] = []
    first_temperature = ctx.summarizer_temperature if temperature is None else temperature
    for attempt in range(MAX_REGENERATIONS + 1):
        asked = max(1, round(words * (1 - WORD_LIMIT_SHRINK * attempt)))
        hotter = first_temperature if attempt == 0 else max(first_temperature, REGENERATION_TEMPERATURE)
        messages: list[llm.Message] = [("user", render(asked))]
        answer = llm.ask_text(
            ctx, ROLE, prompt, messages, temperature=hotter, max_tokens=max_tokens, sample=attempt
        )
        usage = merge_usage(usage, answer.usage)
        text = clean_output(answer.text)
        tokens = count_tokens(text)
        problem = problem_of(text, answer.finish_reason, token_limit, tokens)
        if problem is None:
            return Written(text, tokens, attempt + 1, True, asked, usage, events)
        if attempt < MAX_REGENERATIONS:
            said = {"reason": problem, "tokens": tokens, "limit": token_limit}
            events.append(
                event("regenerate", **where, attempt=attempt + 1, **said, finish_reason=answer.finish_reason)
            )
        over = max(0, tokens - token_limit) if token_limit is not None else 0
        attempts.append(((int(problem == "empty"), int(problem == "cut_off"), over), text, asked, problem))
    (empty, cut, _), best, asked, _ = min(attempts, key=lambda a: a[0])
    text = trim_to_last_sentence(best) if cut and not empty else best
    tokens = count_tokens(text)
    reasons = [problem for *_, problem in attempts]
    kept = {"reasons": reasons, "tokens": tokens, "limit": token_limit, "trimmed": text != best}
    events.append(event("kept_best", **where, attempts=len(attempts), **kept))
    return Written(text, tokens, len(attempts), False, asked, usage, events)


PROMPT_NAMES = (
    "summarize_chunk",
    "merge",
    "merge_context",
    "incremental_init",
    "incremental_update",
    "compress",
    "remove_artifacts",
)  # every prompt the summarizer may use (their versions go into run records)


def tree_outline(tree: list[dict[str, Any]], events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The shape of a summarize run: chunks, levels or steps, and how often each event happened."""
    counts = dict(Counter(item["kind"] for item in events or [] if item.get("stage") == "summarize"))
    if tree and "step" in tree[0]:
        return {
            "strategy": "incremental",
            "chunks": len(tree),
            "steps": len(tree),
            "compressions": sum(1 for step in tree if step.get("compressed")),
            "events": counts,
        }
    per_level = [len(level.get("summaries", [])) for level in tree]
    return {
        "strategy": "hierarchical",
        "chunks": per_level[0] if per_level else 0,
        "levels": len(per_level),
        "summaries_per_level": per_level,
        "budgets": [level.get("budget") for level in tree],
        "events": counts,
    }
