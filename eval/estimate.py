"""Dry run: how many LLM calls and tokens a run or an experiment would take, and its price for known models.

``estimate_range`` counts, for one narrative, the calls each graph makes at a low and a high end; an
experiment sums the high ends of its items. The assumptions are returned with it and printed.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import prompts
from eval.datasets import EvalItem
from eval.grid import Cell, ExperimentConfig, cell_context, cells
from storyjudge.core.context import Context
from storyjudge.core.models import is_local, resolve_spec
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import price, price_known


def _prompt_tokens(name: str) -> int:
    return count_tokens(prompts.load(name).text)


def _planted_calls(ctx: Context) -> int:
    """The most planted facts a round judges: every false one the check may use and half as many true ones."""
    from storyjudge.core.planted import MAX_FALSE, TRUE_SHARE

    most = min(ctx.planted_facts, MAX_FALSE)
    return most + math.ceil(most * TRUE_SHARE)


# the text and the settings fix the rest; these assumptions are printed with the range
SUMMARY_SHARE_LOW = 0.25
"""Low: the generated summary has at least this share of its length budget (max_summary_tokens)."""
FACT_TOKENS_RANGE = (40, 5)
"""Summary tokens per atomic fact: low, one fact per 40 tokens; high, one per 5 (the budget bounds the facts)."""
SENTENCE_TOKENS_RANGE = (40, 10)
"""Summary tokens per sentence (each is one decomposition call): low 40, high 10."""
ANSWER_TOKENS = {"extract": (5, 600), "decompose": (10, 150), "judge": (10, 250), "coherence": (5, 100)}
"""Output tokens of one answer, (low, high), per call kind."""
CKG_LINES_TOKENS = 800
"""High: the character-graph lines a judge prompt shows besides its scene text (at most 40 lines)."""
CALL_OVERHEAD_TOKENS = 10
"""High: chat-format tokens a server counts per call beyond the messages' text."""


_COUNTS = ("calls", "input_tokens", "output_tokens")


@dataclass
class _Range:
    """Calls and tokens per role, at the low and the high end."""

    ends: dict[str, dict[str, dict[str, int]]] = field(default_factory=lambda: {"low": {}, "high": {}})

    def add(self, end: str, role: str, calls: float, input_each: float, output_each: float) -> None:
        calls = math.ceil(calls)
        tally = self.ends[end].setdefault(role, dict.fromkeys(_COUNTS, 0))
        tally["calls"] += calls
        tally["input_tokens"] += int(calls * input_each)
        tally["output_tokens"] += int(calls * output_each)

    def summed(self, end: str, ctx: Context) -> dict[str, Any]:
        tallies = self.ends[end]
        total = {key: sum(t[key] for t in tallies.values()) for key in _COUNTS}
        specs = {role: resolve_spec(ctx, role) for role in tallies}
        known = all(price_known(spec) for spec in specs.values())
        usd = sum(price(specs[r], t["input_tokens"], t["output_tokens"]) for r, t in tallies.items())
        return {**total, "usd": round(usd, 4) if known and tallies else None}


def _score_round(
    rng: _Range,
    end: str,
    ctx: Context,
    summary_tokens: float,
    scene_tokens: list[int],
    metrics: Collection[str],
    times: int = 1,
) -> None:
    """``times`` scoring rounds of a summary of ``summary_tokens`` at one end: decompose, judge, coherence."""
    i = 0 if end == "low" else 1
    sentences = max(1, math.ceil(summary_tokens / SENTENCE_TOKENS_RANGE[i])) * times
    facts = max(1, math.ceil(summary_tokens / FACT_TOKENS_RANGE[i])) * times
    extra = 0 if end == "low" else summary_tokens + CALL_OVERHEAD_TOKENS  # the sentence, besides the summary
    if "factscore" in metrics:
        decompose_in = _prompt_tokens("decompose") + summary_tokens + extra
        rng.add(end, "decomposer", sentences, decompose_in, ANSWER_TOKENS["decompose"][i])
        if end == "low":
            judge_in = _prompt_tokens("judge") + min(scene_tokens)
        else:
            evidence = min(ctx.evidence_tokens, ctx.retrieval_k * max(scene_tokens) + 200)
            judge_in = _prompt_tokens("judge") + evidence + CKG_LINES_TOKENS + 100 + CALL_OVERHEAD_TOKENS
        rng.add(end, "judge", facts, judge_in, ANSWER_TOKENS["judge"][i])
    if "coherence" in metrics:
        coherence_in = _prompt_tokens("coherence") + summary_tokens + extra
        rng.add(end, "coherence", sentences, coherence_in, ANSWER_TOKENS["coherence"][i])


def _planted_items(
    rng: _Range, ctx: Context, size: tuple[float, float], scene_tokens: list[int], metrics: Collection[str]
) -> None:
    """The planted control items' calls: asked once, since every round plants the same ones (cache hits after)."""
    for i, end in enumerate(("low", "high")):
        if "factscore" in metrics:
            high = min(ctx.evidence_tokens, ctx.retrieval_k * max(scene_tokens))
            judge_in = _prompt_tokens("judge") + (min(scene_tokens) if end == "low" else high)
            rng.add(end, "judge", _planted_calls(ctx), judge_in, ANSWER_TOKENS["judge"][i])
        if "coherence" in metrics:
            coherence_in = _prompt_tokens("coherence") + size[i] + CALL_OVERHEAD_TOKENS
            rng.add(end, "coherence", ctx.planted_sentences, coherence_in, ANSWER_TOKENS["coherence"][i])


def _summarize_range(rng: _Range, ctx: Context, scenes: list[Any]) -> None:
    """The summarizer's calls: the planned chunk and merge calls, each tried up to 1 + MAX_REGENERATIONS times."""
    from nodes.chunk import chunk_scenes
    from nodes.hierarchical import level_budgets, merge_overhead, merges_needed
    from nodes.summary_writer import MAX_REGENERATIONS

    chunks = chunk_scenes(scenes, ctx.chunk_size)
    top, window, tries = ctx.max_summary_tokens, ctx.context_window, 1 + MAX_REGENERATIONS
    chunk_in = sum(chunk["tokens"] for chunk in chunks)
    if ctx.strategy == "hierarchical":
        budgets = level_budgets(len(chunks), top, window, merge_overhead(ctx.prompt_dir))
        merges = sum(merges_needed(len(chunks), budgets, window, merge_overhead(ctx.prompt_dir)))
        leaf_in = _prompt_tokens("summarize_chunk") + chunk_in / len(chunks)
        low_leaf = SUMMARY_SHARE_LOW * budgets[0]
        rng.add("low", "summarizer", len(chunks), leaf_in, low_leaf)
        rng.add("high", "summarizer", len(chunks) * tries, leaf_in + 50, budgets[0])
        rng.add("low", "summarizer", merges, _prompt_tokens("merge") + 2 * low_leaf, SUMMARY_SHARE_LOW * top)
        rng.add("high", "summarizer", merges * tries, window, top)
    else:
        update_in = _prompt_tokens("incremental_update") + chunk_in / len(chunks)
        rng.add("low", "summarizer", len(chunks), update_in, SUMMARY_SHARE_LOW * top)
        rng.add("high", "summarizer", 2 * len(chunks) * tries, update_in + top + 50, top)  # and compressions
    if ctx.artifact_removal:
        artifacts_in = _prompt_tokens("remove_artifacts")
        rng.add("low", "summarizer", 1, artifacts_in + SUMMARY_SHARE_LOW * top, SUMMARY_SHARE_LOW * top)
        rng.add("high", "summarizer", tries, artifacts_in + top + 50, top)


def estimate_range(
    ctx: Context, task: str, document: str, summary: str = "", *, metrics: Collection[str] = ()
) -> dict[str, Any]:
    """The fewest and the most LLM calls and tokens one ``refine`` or ``score`` run takes (no retries counted).

    Low: the first round, a short summary, few facts, short answers. High: every round up to
    ``max_iterations`` at the length budget, every verdict anew, full evidence, every summary regenerated.
    ``metrics``: what is scored; NarrativeFactScore too when none is or the task refines, BooookScore with
    ``coherence_guard``.
    """
    from nodes.extract import extraction_tasks
    from storyjudge.core.segmentation import segment_document

    asked = set(metrics)
    if not asked or task == "refine":
        asked.add("factscore")
    if ctx.coherence_guard:
        asked.add("coherence")
    scenes, _ = segment_document(document, ctx.chunk_size)
    scene_tokens = [count_tokens(scene["text"]) for scene in scenes] or [count_tokens(document)]
    rng = _Range()
    extract_in = _prompt_tokens("extract_triples")
    # the extraction's own tasks (scene parts times samples); the index serves factscore and refinement alone
    for job in extraction_tasks(list(scenes), ctx) if "factscore" in asked else []:
        tokens = count_tokens(job["scene"]["text"])
        for i, end in enumerate(("low", "high")):
            rng.add(end, "extractor", 1, extract_in + tokens, ANSWER_TOKENS["extract"][i])
    given = count_tokens(summary) if summary.strip() else 0
    size: tuple[float, float] = (given, given)
    if task == "refine" and not given:  # the summary is written first, at most at its length budget
        _summarize_range(rng, ctx, list(scenes))
        size = (SUMMARY_SHARE_LOW * ctx.max_summary_tokens, ctx.max_summary_tokens)
    _score_round(rng, "low", ctx, size[0], scene_tokens, asked)
    _score_round(rng, "high", ctx, size[1], scene_tokens, asked)
    planted = _Range()
    for target in (rng, planted):
        _planted_items(target, ctx, size, scene_tokens, asked)
    if task == "refine":
        # a refinement grows by max_length_ratio's tenth and WORD_SLACK's words, but never past the summary's
        # budget (nodes.guards.word_budget): once there, every further round is the same, counted at once
        length: float = size[1]
        longest = max(size[1], ctx.max_summary_tokens)
        left = ctx.max_iterations
        while left > 0:
            cap = max(ctx.max_output_tokens, int(length * 1.5) + 64)  # the refiner's max_tokens
            grown = min(length * ctx.max_length_ratio + 20, longest)
            times = left if grown == length else 1
            rng.add("high", "refiner", (1 + ctx.parse_retries) * times, ctx.context_window, min(cap, grown))
            _score_round(rng, "high", ctx, grown, scene_tokens, asked, times)
            length, left = grown, left - times
    return {
        "scenes": len(scene_tokens),
        "low": rng.summed("low", ctx),
        "high": rng.summed("high", ctx),
        "planted": planted.summed("high", ctx),
        "roles": rng.ends,  # per role and end, for the wall time
    }


LOCAL_PROMPT_TOKENS_PER_SECOND = 165.0
LOCAL_OUTPUT_TOKENS_PER_SECOND = (77.0, 42.0)
"""The embedded model on 2 CPU cores, measured (prompt; generation fastest, slowest): one call at a time."""
SERVER_FIRST_TOKEN_SECONDS = (0.2, 1.0)
SERVER_OUTPUT_TOKENS_PER_SECOND = (150.0, 30.0)
"""A served model's call, assumed when none was measured here: time to the first token, then generation speed
(fastest, slowest)."""
MEASURED_CALLS = 3
"""Answered requests of a model in the story's folder from which their measured seconds are used."""


def _call_seconds(
    ctx: Context, spec: str, end: int, input_each: float, output_each: float, run_dir: str | Path | None
) -> tuple[float, str]:
    """Seconds one call takes at one end (0 low, 1 high), and why: measured in ``run_dir`` when enough were."""
    from storyjudge.core.usage import measured_seconds

    measured = sorted(measured_seconds(run_dir, spec)) if run_dir else []
    if len(measured) >= MEASURED_CALLS:  # the 10th or the 90th percentile
        each = measured[len(measured) // 10] if end == 0 else measured[(len(measured) * 9) // 10]
        return each, f"measured: {len(measured)} answered request(s) of {spec} in {run_dir}"
    if is_local(spec):
        each = input_each / LOCAL_PROMPT_TOKENS_PER_SECOND + output_each / LOCAL_OUTPUT_TOKENS_PER_SECOND[end]
        return each, f"assumed for {spec}: the embedded model's measured speed on 2 cores, one call at a time"
    each = SERVER_FIRST_TOKEN_SECONDS[end] + output_each / SERVER_OUTPUT_TOKENS_PER_SECOND[end]
    return each, (
        f"assumed for {spec}: {SERVER_FIRST_TOKEN_SECONDS[0]}-{SERVER_FIRST_TOKEN_SECONDS[1]} s to the first token, "
        f"{SERVER_OUTPUT_TOKENS_PER_SECOND[1]:.0f}-{SERVER_OUTPUT_TOKENS_PER_SECOND[0]:.0f} tokens/s, "
        f"{ctx.concurrency} calls at once"
    )


def wall_time(ctx: Context, ranged: dict[str, Any], run_dir: str | Path | None) -> dict[str, Any]:
    """A wall-time range: each role's calls times its seconds per call, measured in ``run_dir`` or assumed."""
    totals = {"low": 0.0, "high": 0.0}
    bases: set[str] = set()
    for end_index, end in enumerate(("low", "high")):
        for role, tally in ranged["roles"][end].items():
            spec, calls = resolve_spec(ctx, role), tally["calls"]
            if not calls:
                continue
            input_each, output_each = tally["input_tokens"] / calls, tally["output_tokens"] / calls
            each, basis = _call_seconds(ctx, spec, end_index, input_each, output_each, run_dir)
            bases.add(basis)
            totals[end] += calls * each / (1 if is_local(spec) else max(1, ctx.concurrency))
    return {"low": round(totals["low"]), "high": round(totals["high"]), "basis": sorted(bases)}


def estimate_run(
    ctx: Context, task: str, document: str, summary: str = "", *, run_dir: str | Path | None = None
) -> dict[str, Any]:
    """What one ``storyjudge refine`` or ``score`` run would take: the high end's counts and USD, both ends, time."""
    ranged = estimate_range(ctx, task, document, summary)
    return {
        "task": task,
        "resolved_model": resolve_spec(ctx, "judge"),
        "scenes": ranged["scenes"],
        **ranged["high"],
        **{end: ranged[end] for end in ("low", "high", "planted")},
        "wall_seconds": wall_time(ctx, ranged, run_dir),
        "assumptions": [
            f"both ends count the planted control items once, all of them: {_planted_calls(ctx)} fact(s) judged "
            "at most (the judge check stops after its first batch when the decision is clear), "
            f"{ctx.planted_sentences} sentence(s) per coherence score (later rounds answer them from the cache)",
            "low: the first round only, a summary of at least "
            f"{SUMMARY_SHARE_LOW:.0%} of max_summary_tokens ({ctx.max_summary_tokens}), one fact per "
            f"{FACT_TOKENS_RANGE[0]} summary tokens, short answers"
            if task == "refine"
            else "low: one fact per 40 summary tokens, short answers",
            f"high: every round up to max_iterations ({ctx.max_iterations}) with every verdict asked anew, "
            "the summary at its budget (each refinement up to a tenth longer, never past "
            f"max_summary_tokens), one fact per {FACT_TOKENS_RANGE[1]} summary tokens, every summary "
            "regenerated to the limit"
            if task == "refine"
            else f"high: one fact per {FACT_TOKENS_RANGE[1]} summary tokens, full evidence",
            "neither end counts retries of failed calls; the run shows them",
            "USD at each role's list price for OpenAI models with a known one (storyjudge.core.usage.PRICES_PER_MTOK)",
        ],
    }


def estimate_item(
    config: ExperimentConfig, cell: Cell, item: EvalItem, *, indexed: bool = False
) -> dict[str, Any]:
    """The high end of one item's range, and its USD (``indexed``: its story's index is already built)."""
    ctx = cell_context(config, cell, config.out_dir)
    summary = item.summary if cell.task == "score" else ""
    ranged = _Range(estimate_range(ctx, cell.task, item.document, summary, metrics=config.metrics)["roles"])
    if indexed:
        ranged.ends["high"].pop("extractor", None)
    return ranged.summed("high", ctx)


def estimate(config: ExperimentConfig, *, max_cells: int | None = None) -> dict[str, Any]:
    """Per cell and in total: the most LLM calls and tokens, and USD for models with a known price (else None)."""
    loaded = {spec: spec.load() for spec in {cell.dataset for cell in cells(config)}}
    rows = []
    for cell in cells(config)[:max_cells]:
        items, groups, each = loaded[cell.dataset].items, set(), []
        for item in items:
            each.append(
                estimate_item(config, cell, item, indexed=cell.task == "score" and item.group in groups)
            )
            groups.add(item.group)
        usd = [one["usd"] for one in each]
        rows.append(
            {
                "cell": cell.id,
                **cell.params,
                "resolved_model": resolve_spec(cell_context(config, cell, config.out_dir), "judge"),
                "items": len(items),
                **{key: sum(one[key] for one in each) for key in _COUNTS},
                "usd": round(sum(usd), 4) if usd and None not in usd else None,
            }
        )
    priced = [r["usd"] for r in rows if r["usd"] is not None]
    return {
        "cells": rows,
        "total": {
            **{key: sum(r[key] for r in rows) for key in _COUNTS},
            "usd": round(sum(priced), 4) if priced else None,
            "usd_covers_cells": f"{len(priced)} of {len(rows)}",
        },
        "assumptions": [
            "the high end of each item's range (`storyjudge refine --dry-run`), before cache hits (cells sharing "
            "a model reuse each other's cached calls) and without parse retries; each story's index counted once",
            f"one fact per {FACT_TOKENS_RANGE[1]} summary tokens, one sentence per {SENTENCE_TOKENS_RANGE[1]}",
            "refine: every round up to max_iterations runs, every summary at max_summary_tokens",
            "USD at each role's list price for OpenAI models with a known one (storyjudge.core.usage.PRICES_PER_MTOK)",
        ],
    }
