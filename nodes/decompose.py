"""Atomic-fact decomposition (NarrativeFactScore stage 2): one LLM call per summary sentence, fanned out.

Each fact keeps its source sentence, so scores and feedback map back onto the summary; blank and duplicate facts
are dropped before any judge sees them.
"""

from __future__ import annotations

import re
import time
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

import prompts
from prompts.schemas import AtomicFacts
from state import DecomposeTask, FactScoreState
from storyjudge.core import progress
from storyjudge.core.context import Context, context_of
from storyjudge.core.llm import ask_structured
from storyjudge.core.records import Fact, FailedSentence
from storyjudge.core.textsplit import NO_WORDS, has_words, sentences


def split_summary(state: FactScoreState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Split the summary into sentences; an empty summary is a user error, said plainly."""
    summary = (state.get("summary") or "").strip()
    if not summary:
        raise ValueError("The summary to score is empty; give a summary with at least one sentence.")
    found = sentences(summary)
    if not any(has_words(sentence) for sentence in found):  # "!!! ???" would score 1.0 with no fact at all
        raise ValueError("The summary to score " + NO_WORDS.format(sample=summary[:40]) + ".")
    progress.emit("decompose", total=len(found))
    return {"sentences": found, "iteration": state.get("iteration", 0)}


def route_sentences(state: FactScoreState) -> list[Send] | Literal["collect_facts"]:
    """One decomposition branch per sentence."""
    found = state.get("sentences") or []
    if not found:
        return "collect_facts"
    return [
        Send(
            "decompose_sentence",
            DecomposeTask(
                summary=state["summary"],
                sentence=sentence,
                sentence_index=i,
                iteration=state.get("iteration", 0),
            ),
        )
        for i, sentence in enumerate(found)
    ]


def decompose_sentence(task: DecomposeTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Atomic facts of one sentence; a failed parse is counted and the sentence yields no facts."""
    ctx = context_of(runtime)
    started = time.perf_counter()
    prompt = prompts.load("decompose", ctx.prompt_dir)
    text = prompt.render(
        summary=prompts.data_block("summary", task["summary"]),
        sentence=prompts.data_block("sentence", task["sentence"]),
    )
    answer = ask_structured(ctx, "decomposer", prompt, [("user", text)], AtomicFacts)
    progress.emit("decompose", advance=1)
    facts = [
        Fact(
            id=f"i{task['iteration']}-s{task['sentence_index']}-f{n}",
            iteration=task["iteration"],
            sentence_index=task["sentence_index"],
            text=fact,
        )
        for n, fact in enumerate(answer.value.facts if answer.value else [])
    ]
    failed = (
        []
        if answer.ok
        else [
            FailedSentence(
                iteration=task["iteration"],
                sentence_index=task["sentence_index"],
                error=answer.error or "unparseable answer",
            )
        ]
    )
    return {
        "raw_facts": facts,
        "decompose_failures": 0 if answer.ok else 1,
        "failed_sentences": failed,
        "usage": answer.usage,
        "timings": {"decompose": time.perf_counter() - started},
    }


def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def collect_facts(state: FactScoreState, runtime: Runtime[Context]) -> dict[str, Any]:
    """This iteration's facts in summary order, without blanks or duplicates."""
    iteration = state.get("iteration", 0)
    ordered = sorted(
        (f for f in state.get("raw_facts") or [] if f["iteration"] == iteration),
        key=lambda f: (f["sentence_index"], f["id"]),
    )
    seen: set[str] = set()
    facts: list[Fact] = []
    for fact in ordered:
        key = _normal(fact["text"])
        if not key or key in seen:
            continue
        seen.add(key)
        facts.append(Fact(**{**fact, "text": fact["text"].strip()}))
    return {"facts": facts}
