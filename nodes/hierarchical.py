"""Hierarchical merging (seed 000, appendix A.1): summarize every chunk, then merge summaries level by level.

Each merge takes as many consecutive summaries as fit beside its output, with the level's previous merge as
prior context, so merges within a level are sequential. A merge is sent as soon as its group and the merge
before it are known (``TreeRun``), yet every call reads what the level-by-level order would give it.
Budgets: G_n at the top, ``LEVEL_RATIO`` of the level above below it; a merge takes at least two summaries,
so every level at least halves the count.
"""

from __future__ import annotations

import contextvars
import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial, reduce
from itertools import islice
from typing import Any

from langgraph.runtime import Runtime

from nodes.summary_writer import (
    LEVEL_RATIO,
    MIN_BUDGET,
    PRIOR_CONTEXT_SHARE,
    ROLE,
    Written,
    chunk_info,
    event,
    fits,
    room_for_prompt,
    summary_prompt,
    word_limit,
    write,
)
from prompts import data_block, load
from state import SummarizeWork, SummaryPlan
from storyjudge.core import progress
from storyjudge.core.concurrency import branch_threads, priority, wait_any
from storyjudge.core.context import Context, context_of
from storyjudge.core.models import is_local, resolve_spec
from storyjudge.core.records import SummaryChunk, TreeLevel, TreeStep, TreeSummary
from storyjudge.core.textsplit import split_by_tokens
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import Usage, merge_usage

MAX_LEVELS = 64  # a safety stop: every level at least halves the count
_BLOCK_TOKENS = 12  # a data block's tags and separator per summary, for estimates (real prompts are counted)


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


def _budgets(levels: int, max_summary_tokens: int) -> list[int]:
    floor = min(MIN_BUDGET, max_summary_tokens)
    return [
        max(floor, round(max_summary_tokens * LEVEL_RATIO ** (levels - level))) for level in range(levels + 1)
    ]


def merges_needed(n_chunks: int, budgets: list[int], context_window: int, overhead: int) -> list[int]:
    """Estimated number of summaries at each merge level (empty when one chunk needs no merging)."""
    counts: list[int] = []
    n = n_chunks
    top = budgets[-1]
    room = room_for_prompt(top, context_window) - overhead
    while n > 1 and len(counts) < MAX_LEVELS:
        size = budgets[min(len(counts), len(budgets) - 1)] + _BLOCK_TOKENS
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
    """Token budgets G_0 .. G_L (G_L = G_n): the fewest levels L whose budgets need at most L merge levels."""
    for levels in range(MAX_LEVELS):
        budgets = _budgets(levels, max_summary_tokens)
        if len(merges_needed(n_chunks, budgets, context_window, overhead)) <= levels:
            return budgets
    return _budgets(MAX_LEVELS, max_summary_tokens)


@dataclass(frozen=True)
class MergeRoom:
    """What a merge of one level must fit: its output budget in the context window, asking for ``words``."""

    budget: int
    context_window: int
    words: int
    prompt_dir: str = ""

    def fits(self, context: str, group: list[str]) -> bool:
        """Whether the merge prompt of ``group`` (with ``context``) leaves room for the output."""
        return fits(
            render_merge(context, group, self.words, self.prompt_dir), self.budget, self.context_window
        )


def prior_context(prior: str, room: MergeRoom, where: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The previous merge as context for the next, cut to ``PRIOR_CONTEXT_SHARE`` of the room when longer."""
    limit = max(1, int(PRIOR_CONTEXT_SHARE * room_for_prompt(room.budget, room.context_window)))
    if not prior or count_tokens(prior) <= limit:
        return prior, []
    context = split_by_tokens(prior, limit)[0]
    return context, [event("prior_context_truncated", **where, tokens=count_tokens(context), limit=limit)]


def grow_group(texts: list[str], start: int, end: int, context: str, room: MergeRoom) -> int:
    """The new end of the group ``texts[start:end]``, grown while the next summary still fits beside it."""
    while end < len(texts) and room.fits(context, texts[start : end + 1]):
        end += 1
    return end


def close_group(
    texts: list[str], start: int, end: int, context: str, room: MergeRoom, where: dict[str, Any]
) -> tuple[int, str, list[str], list[dict[str, Any]]]:
    """(end, context, group, events) of a mergeable group: at least two summaries, within the room.

    If two do not fit, the prior context is dropped, then each member is cut to an equal share, with events.
    """
    notes: list[dict[str, Any]] = []
    if end == start + 1 and end < len(texts):
        end += 1
    group = texts[start:end]
    if not room.fits(context, group):
        if context:
            context = ""
            notes.append(event("prior_context_dropped", **where))
        if not room.fits(context, group):
            space = room_for_prompt(room.budget, room.context_window)
            base = count_tokens(render_merge("", [""] * len(group), room.words, room.prompt_dir))
            share = max(1, (space - base) // len(group) - 4)
            group = [
                split_by_tokens(text, share)[0] if count_tokens(text) > share else text for text in group
            ]
            notes.append(event("clipped_for_budget", **where, members=len(group), tokens_each=share))
    return end, context, group, notes


@dataclass
class TreeJob:
    """One call of the tree, decided: a chunk's summary (level 0) or a merge of ``group`` after ``context``."""

    level: int
    index: int
    sources: list[int]
    context: str
    group: list[str]
    budget: int
    notes: list[dict[str, Any]] = field(default_factory=list)  # events deciding it raised


@dataclass
class MergeLevel:
    """One merge level, fed the summaries of the level below in order, as they are written.

    Whether the level is the last and where a group ends depend only on a prefix of its inputs.
    """

    number: int
    inputs: list[TreeSummary] = field(default_factory=list)
    complete: bool = False  # every summary of the level below has arrived
    outputs: list[TreeSummary] = field(default_factory=list)
    budget: int | None = None
    start: int = 0  # the first input not yet merged
    end: int = 0  # inputs[start:end] fit in the next merge so far
    context: str | None = None  # the next merge's prior context, once chosen
    notes: list[dict[str, Any]] = field(default_factory=list)
    busy: bool = False  # one of its merges is being written (merges of a level are sequential)
    closed: bool = False  # done, and the level above was told
    checked: tuple[int, bool] = (0, False)  # the inputs the budget was last looked at with, undecided

    def _decide_budget(self, plan: SummaryPlan, prompt_dir: str) -> bool:
        if self.budget is None and self.checked != (len(self.inputs), self.complete):
            self.checked = (len(self.inputs), self.complete)
            top, window = plan["max_summary_tokens"], plan["context_window"]
            if self.number >= len(plan["budgets"]) - 1:
                self.budget = top
            elif not fits(render_merge("", self._texts(), word_limit(top), prompt_dir), top, window):
                self.budget = plan["budgets"][self.number]  # a prefix overflows one merge: not the last level
            elif self.complete:
                self.budget = top  # everything fits one merge: the last level
        return self.budget is not None

    def _texts(self) -> list[str]:
        return [item["text"] for item in self.inputs]

    def next_merge(self, plan: SummaryPlan, prompt_dir: str = "") -> TreeJob | None:
        """The next merge once the summaries so far decide it, else None (and it waits for more)."""
        if self.busy or self.start >= len(self.inputs) or not self._decide_budget(plan, prompt_dir):
            return None
        assert self.budget is not None
        room = MergeRoom(self.budget, plan["context_window"], word_limit(self.budget), prompt_dir)
        texts = self._texts()
        where = {"level": self.number, "index": len(self.outputs)}
        if self.context is None:
            prior = self.outputs[-1]["text"] if self.outputs else ""
            self.context, self.notes = prior_context(prior, room, where)
            self.end = self.start + 1
        self.end = grow_group(texts, self.start, self.end, self.context, room)
        if self.end >= len(texts) and not self.complete:
            return None  # the next summary may still fit: wait for it
        end, context, group, notes = close_group(texts, self.start, self.end, self.context, room, where)
        sources = [item["index"] for item in self.inputs[self.start : end]]
        job = TreeJob(
            self.number, len(self.outputs), sources, context, group, self.budget, self.notes + notes
        )
        self.start, self.context, self.notes, self.busy = end, None, [], True
        return job


def write_job(ctx: Context, job: TreeJob) -> tuple[TreeSummary, Written]:
    """Write one summary of the tree within its budget; merges go first for a slot, then chunks in order."""
    if job.level == 0:
        name = "summarize_chunk"
        render = partial(summary_prompt, name, ctx.prompt_dir, excerpt=job.group[0])
    else:
        name = "merge_context" if job.context else "merge"
        render = partial(render_merge, job.context, job.group, prompt_dir=ctx.prompt_dir)
    with priority(1 if job.level else -1 - job.index):  # the tree waits on merges, the first on early chunks
        written = write(
            ctx,
            load(name, ctx.prompt_dir),
            render,
            words=word_limit(job.budget),
            max_tokens=job.budget,
            token_limit=job.budget,
            where={"level": job.level, "index": job.index},
        )
    prior = job.index - 1 if job.context else None
    return written.as_summary(job.level, job.index, job.sources, prior, job.budget), written


class TreeRun:
    """Runs one tree's calls: chunk summaries up to the run's width at once, each merge once it is decided.

    Only this thread decides what starts next, and the update is assembled in tree order.
    """

    def __init__(self, ctx: Context, plan: SummaryPlan, chunks: list[SummaryChunk]) -> None:
        self.ctx, self.plan, self.chunks = ctx, plan, chunks
        self.leaves: dict[int, TreeSummary] = {}
        self.writings: list[tuple[TreeJob, Written]] = []
        self.levels: list[MergeLevel] = [MergeLevel(1)] if len(chunks) > 1 else []
        self.fed = 0  # chunk summaries passed on to level 1, in chunk order
        self.final: TreeSummary | None = None
        self.leaves_done_at: float | None = None
        self._running: dict[Future[tuple[TreeSummary, Written]], TreeJob] = {}
        # twice the LLM slots: no slot waits while a chunk reads its answer and decides to regenerate
        self.width = branch_threads(ctx, local=is_local(resolve_spec(ctx, ROLE)))
        self._pool = ThreadPoolExecutor(self.width + MAX_LEVELS, thread_name_prefix="storyjudge-tree")

    def run(self) -> None:
        """Write the whole tree; the first failed call's error is raised (calls in flight end on their own)."""
        waiting = iter(self.chunks)
        try:
            while self.final is None:
                leaves_running = sum(job.level == 0 for job in self._running.values())
                for chunk in islice(waiting, self.width - leaves_running):
                    index = chunk["index"]
                    self._start(TreeJob(0, index, [index], "", [chunk["text"]], self.plan["budgets"][0]))
                for level in self.levels:
                    job = level.next_merge(self.plan, self.ctx.prompt_dir)
                    if job is not None:
                        self._start(job)
                for future in wait_any(self._running):
                    job = self._running.pop(future)
                    done, written = future.result()  # the first failed call's error is raised here
                    self.writings.append((job, written))
                    if job.level == 0:
                        self._leaf_done(done)
                    else:
                        self._merge_done(job, done)
                    progress.emit("summarize", advance=1)
                self._close_levels()
        finally:
            self._pool.shutdown(wait=False)

    def _start(self, job: TreeJob) -> None:
        self._running[self._pool.submit(contextvars.copy_context().run, write_job, self.ctx, job)] = job

    def _leaf_done(self, leaf: TreeSummary) -> None:
        self.leaves[leaf["index"]] = leaf
        if len(self.chunks) == 1:
            self.final = leaf
        while self.levels and self.fed < len(self.chunks) and self.chunks[self.fed]["index"] in self.leaves:
            self.levels[0].inputs.append(self.leaves[self.chunks[self.fed]["index"]])
            self.fed += 1
            self.levels[0].complete = self.fed == len(self.chunks)
        if len(self.leaves) == len(self.chunks):
            self.leaves_done_at = time.time()

    def _merge_done(self, job: TreeJob, merged: TreeSummary) -> None:
        level = self.levels[job.level - 1]
        level.outputs.append(merged)
        level.busy = False
        if len(level.outputs) == 2 and len(self.levels) == job.level:
            if job.level + 1 > MAX_LEVELS:
                raise RuntimeError(f"hierarchical merging did not converge in {MAX_LEVELS} levels")
            self.levels.append(MergeLevel(job.level + 1, inputs=list(level.outputs)))
        elif len(level.outputs) > 2:
            self.levels[job.level].inputs.append(merged)

    def _close_levels(self) -> None:
        for level in self.levels:
            if level.closed or level.busy or not level.complete or level.start < len(level.inputs):
                continue  # open, or inputs still to come or to merge
            level.closed = True
            if len(level.outputs) == 1:
                self.final = level.outputs[0]
                return
            self.levels[level.number].complete = True
            written = len(self.leaves) + sum(len(lower.outputs) for lower in self.levels[: level.number])
            ahead = merges_needed(
                len(level.outputs),
                self.plan["budgets"][level.number :] or [self.plan["max_summary_tokens"]],
                self.plan["context_window"],
                merge_overhead(self.ctx.prompt_dir),
            )
            progress.emit("summarize", total=written + sum(ahead) + (1 if self.ctx.artifact_removal else 0))

    def tree(self) -> list[TreeLevel | TreeStep]:
        """The tree's record: the chunk summaries (with their chunks), then each merge level, in order."""
        budget = self.plan["budgets"][0]
        chunks, leaves = [chunk_info(c) for c in self.chunks], [self.leaves[c["index"]] for c in self.chunks]
        tree: list[TreeLevel | TreeStep] = [
            TreeLevel(level=0, budget=budget, word_limit=word_limit(budget), chunks=chunks, summaries=leaves)
        ]
        for level in self.levels:
            if level.outputs:
                budget = level.budget or self.plan["max_summary_tokens"]
                words = word_limit(budget)
                tree.append(
                    TreeLevel(level=level.number, budget=budget, word_limit=words, summaries=level.outputs)
                )
        return tree

    def events_and_usage(self) -> tuple[list[dict[str, Any]], Usage]:
        """Every event and the usage of every call, chunks first, then merges by level and index."""
        writings = sorted(self.writings, key=lambda item: (item[0].level, item[0].index))
        events = [item for job, written in writings for item in (*job.notes, *written.events)]
        return events, reduce(merge_usage, (written.usage for _, written in writings), Usage())


def summarize_tree(state: SummarizeWork, runtime: Runtime[Context]) -> dict[str, Any]:
    """Summarize every chunk and merge the summaries level by level, each call sent once its inputs exist.

    One node, not ``Send`` branches: a LangGraph step waits for all its branches, so no merge could start
    before the slowest chunk. A run stopped midway still redoes no call on resume: each answer is in the LLM
    cache as soon as it arrives.
    """
    ctx = context_of(runtime)
    run = TreeRun(ctx, state["summary_plan"], state["chunks"])
    run.run()
    assert run.final is not None
    now = time.time()
    leaves_done = run.leaves_done_at or now
    chunked = state.get("summary_marks", {}).get("chunked", now)
    events, usage = run.events_and_usage()
    return {
        "tree": run.tree(),
        "draft": run.final["text"],
        "events": events,
        "usage": usage,
        "summary_marks": {"leaves": leaves_done},
        "timings": {
            "summarize.level0": round(leaves_done - chunked, 4),
            "summarize.merge": round(now - leaves_done, 4),
        },
    }
