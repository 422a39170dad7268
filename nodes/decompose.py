"""Atomic-fact decomposition (NarrativeFactScore stage 2): one LLM call per summary sentence, fanned out.

Each fact keeps its source sentence, so scores and feedback map back onto the summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

import prompts
from prompts.schemas import AtomicFacts
from state import FactScoreState, PlantTask, SentenceTask
from storyjudge.core import heavy_imports, progress, storyref
from storyjudge.core.context import Context, context_of
from storyjudge.core.llm import ask_structured
from storyjudge.core.records import Fact, FailedSentence
from storyjudge.core.rundir import RunDir
from storyjudge.core.textsplit import NO_WORDS, has_words, sentences
from storyjudge.core.usage import Usage


def split_summary(state: FactScoreState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Split the summary into sentences, and keep the scenes and CKG its branches read by reference."""
    summary = (state.get("summary") or "").strip()
    if not summary:
        raise ValueError("The summary to score is empty; give a summary with at least one sentence.")
    found = sentences(summary)
    if not any(has_words(sentence) for sentence in found):  # "!!! ???" would score 1.0 with no fact at all
        raise ValueError("The summary to score " + NO_WORDS.format(sample=summary[:40]) + ".")
    for stage in ("decompose", "retrieve", "judge"):  # each counts sentences: one branch does all three
        progress.emit(stage, total=len(found), round=state.get("iteration", 0))
    ctx = context_of(runtime)
    # the branches search the index: Chroma and the embedder are imported before they start
    heavy_imports.load_before_branches(index=True, embedder=ctx.embedder)
    # the branches read the scenes and the CKG by reference, kept once in the run directory
    run_dir = ctx.run_dir or state.get("run_dir") or ""
    folder = RunDir(Path(run_dir)).story if run_dir else ""
    story = storyref.keep(state.get("scenes") or [], state.get("ckg"), folder)
    return {"sentences": found, "iteration": state.get("iteration", 0), "story": story}


def route_sentences(state: FactScoreState, runtime: Runtime[Context]) -> list[Send] | Literal["score_nfs"]:
    """One branch per sentence (decompose, retrieve, judge), plus one for the round's planted facts.

    A refinement round sends the refiner's new sentences first: their verdicts are new calls, not cache hits.
    """
    found = state.get("sentences") or []
    if not found:
        return "score_nfs"
    before = set(sentences(state.get("previous_summary") or ""))
    tasks = [
        SentenceTask(
            summary=state["summary"],
            sentence=sentence,
            sentence_index=i,
            iteration=state.get("iteration", 0),
            story=state["story"],
            index=state.get("index"),
            new=sentence not in before,
        )
        for i, sentence in enumerate(found)
    ]
    sends = [Send("check_sentence", task) for task in sorted(tasks, key=lambda task: not task["new"])]
    if context_of(runtime).planted_facts > 0:
        plant = PlantTask(iteration=state.get("iteration", 0), story=state["story"], index=state.get("index"))
        sends.append(Send("check_planted", plant))
    return sends


def decompose(ctx: Context, task: SentenceTask) -> tuple[list[Fact], list[FailedSentence], Usage]:
    """Atomic facts of one sentence; a failed parse is counted and the sentence yields no facts."""
    prompt = prompts.load("decompose", ctx.prompt_dir)
    text = prompt.render(
        summary=prompts.data_block("summary", task["summary"]),
        sentence=prompts.data_block("sentence", task["sentence"]),
    )
    answer = ask_structured(ctx, "decomposer", prompt, [("user", text)], AtomicFacts)
    facts = [
        Fact(
            id=f"i{task['iteration']}-s{task['sentence_index']}-f{n}",
            iteration=task["iteration"],
            sentence_index=task["sentence_index"],
            text=fact,
        )
        for n, fact in enumerate(answer.value.facts if answer.value else [])
    ]
    error = answer.error or "unparseable answer"
    failed = FailedSentence(iteration=task["iteration"], sentence_index=task["sentence_index"], error=error)
    return facts, [] if answer.ok else [failed], answer.usage
