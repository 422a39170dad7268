"""Dry run: how many LLM calls and tokens an experiment would take, and its price for known OpenAI models.

The estimate walks the same grid as the runner and counts, per item, the calls each graph makes: CKG
extraction per scene and sample (once per story), decomposition per summary sentence, a judge call per atomic
fact, a coherence call per sentence, the summarizer's chunk and merge calls, and one refine call plus a new
scoring round per refinement iteration. The assumptions it rests on are returned with it and printed.
"""

from __future__ import annotations

import math
from typing import Any

import prompts
from eval.datasets import EvalItem
from eval.grid import Cell, ExperimentConfig, cell_context, cells
from storyjudge.core.context import Context
from storyjudge.core.models import resolve_spec
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import price, price_known

# Assumptions of the estimate, printed with it. Output lengths are typical answers of each call kind.
FACTS_PER_SENTENCE = 2.5
TOKENS_PER_SENTENCE = 25
OUTPUT_TOKENS = {"extract": 250, "decompose": 60, "judge": 120, "coherence": 40}
CKG_EVIDENCE_TOKENS = 150


def _prompt_tokens(name: str) -> int:
    try:
        return count_tokens(prompts.load(name).text)
    except FileNotFoundError:
        return 400


class _Tally:
    def __init__(self) -> None:
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def add(self, calls: float, input_each: float, output_each: float) -> None:
        calls = math.ceil(calls)
        self.calls += calls
        self.input_tokens += int(calls * input_each)
        self.output_tokens += int(calls * output_each)


def _scenes_of(item: EvalItem, chunk_size: int) -> list[int]:
    from storyjudge.core.segmentation import scenes_from_list, segment_document

    if item.dataset == "storysumm":
        scenes = scenes_from_list([item.document], chunk_size)
    else:
        scenes, _ = segment_document(item.document, chunk_size)
    return [count_tokens(s["text"]) for s in scenes] or [count_tokens(item.document)]


def _estimate_factscore(
    tally: _Tally, summary_tokens: int, scene_tokens: list[int], ctx: Context, planted: _Tally | None = None
) -> None:
    """A scoring round's calls, its planted control facts' judge calls included (also added to ``planted``)."""
    sentences = max(1, math.ceil(summary_tokens / TOKENS_PER_SENTENCE))
    tally.add(sentences, _prompt_tokens("decompose") + summary_tokens * 1.1, OUTPUT_TOKENS["decompose"])
    evidence = min(ctx.retrieval_k, len(scene_tokens)) * (sum(scene_tokens) / len(scene_tokens))
    evidence = min(evidence, ctx.evidence_tokens)  # the judge's scene-text budget
    judge_in = _prompt_tokens("judge") + evidence + CKG_EVIDENCE_TOKENS + 40
    tally.add(sentences * FACTS_PER_SENTENCE, judge_in, OUTPUT_TOKENS["judge"])
    for target in (tally, planted) if planted is not None else (tally,):
        target.add(ctx.planted_facts, judge_in, OUTPUT_TOKENS["judge"])


def _estimate_coherence(
    tally: _Tally, summary_tokens: int, ctx: Context | None = None, planted: _Tally | None = None
) -> None:
    """A summary's coherence calls, its planted confusing sentences' included (also added to ``planted``)."""
    sentences = max(1, math.ceil(summary_tokens / TOKENS_PER_SENTENCE))
    each = _prompt_tokens("coherence") + summary_tokens * 1.1
    tally.add(sentences, each, OUTPUT_TOKENS["coherence"])
    extra = ctx.planted_sentences if ctx is not None else 0
    for target in (tally, planted) if planted is not None else (tally,):
        target.add(extra, each + TOKENS_PER_SENTENCE, OUTPUT_TOKENS["coherence"])


def estimate_item(config: ExperimentConfig, cell: Cell, item: EvalItem, *, indexed: bool = False) -> _Tally:
    """Calls and tokens one item of one cell would take, before cache hits and parse retries.

    ``indexed``: another item of the same story already built the index (it is reused, not rebuilt).
    """
    ctx = cell_context(config, cell, config.out_dir)
    scene_tokens = _scenes_of(item, cell.chunk_size)
    needs_index = cell.task == "refine" or "factscore" in config.metrics
    summary_tokens = count_tokens(item.summary) if cell.task == "score" else 0
    return _tally(
        ctx, cell.task, scene_tokens, summary_tokens, config.metrics, index=needs_index and not indexed
    )


def _tally(
    ctx: Context,
    task: str,
    scene_tokens: list[int],
    summary_tokens: int,
    metrics: Any,
    *,
    index: bool,
    planted: _Tally | None = None,
) -> _Tally:
    """Calls and tokens of one narrative: its index when ``index``, then scoring its summary or refining one.

    ``planted`` also gets the planted control items' share of them.
    """
    tally = _Tally()
    if index:
        for tokens in scene_tokens:
            tally.add(ctx.ckg_samples, _prompt_tokens("extract_triples") + tokens, OUTPUT_TOKENS["extract"])
    if task == "score":
        if "factscore" in metrics:
            _estimate_factscore(tally, summary_tokens, scene_tokens, ctx, planted)
        if "coherence" in metrics:
            _estimate_coherence(tally, summary_tokens, ctx, planted)
        return tally
    doc_tokens = sum(scene_tokens)
    summary_tokens = min(ctx.max_summary_tokens, max(50, doc_tokens // 4))
    chunks = max(1, math.ceil(doc_tokens / ctx.chunk_size))
    if ctx.strategy == "hierarchical":
        tally.add(
            chunks, _prompt_tokens("summarize_chunk") + min(doc_tokens, ctx.chunk_size), summary_tokens / 2
        )
        tally.add(max(0, chunks - 1), _prompt_tokens("merge") + 2 * summary_tokens, summary_tokens)
    else:
        each = _prompt_tokens("incremental_update") + min(doc_tokens, ctx.chunk_size) + summary_tokens
        tally.add(chunks, each, summary_tokens)
    if ctx.artifact_removal:
        tally.add(1, _prompt_tokens("remove_artifacts") + summary_tokens, summary_tokens)
    rounds = 1 + ctx.max_iterations  # worst case: every refinement round runs
    for round_number in range(rounds):
        _estimate_factscore(tally, summary_tokens, scene_tokens, ctx, planted)
        if "coherence" in metrics or ctx.coherence_guard:
            _estimate_coherence(tally, summary_tokens, ctx, planted)
        if round_number < rounds - 1:
            evidence = min(ctx.context_window // 2, ctx.retrieval_k * (doc_tokens / len(scene_tokens)))
            tally.add(1, _prompt_tokens("refine") + summary_tokens * 2 + evidence, summary_tokens)
    return tally


def estimate_run(ctx: Context, task: str, document: str, summary: str = "") -> dict[str, Any]:
    """What one ``storyjudge refine`` (task "refine") or ``score`` ("score") of a narrative would take.

    Calls and tokens as for an experiment's item (the narrative indexed, every refinement round run), and USD
    at the judge model's list price (None when it has none).
    """
    from storyjudge.core.segmentation import segment_document

    scenes, _ = segment_document(document, ctx.chunk_size)
    scene_tokens = [count_tokens(s["text"]) for s in scenes] or [count_tokens(document)]
    planted = _Tally()
    tally = _tally(
        ctx, task, scene_tokens, count_tokens(summary), ("factscore",), index=True, planted=planted
    )
    spec = resolve_spec(ctx, "judge")
    usd = price(spec, tally.input_tokens, tally.output_tokens)
    return {
        "task": task,
        "resolved_model": spec,
        "scenes": len(scene_tokens),
        "calls": tally.calls,
        "input_tokens": tally.input_tokens,
        "output_tokens": tally.output_tokens,
        "usd": round(usd, 4) if price_known(spec) else None,
        "planted": {
            "calls": planted.calls,
            "input_tokens": planted.input_tokens,
            "output_tokens": planted.output_tokens,
        },
        "assumptions": [
            "upper bound before cache hits and without parse retries",
            f"planted control items, counted above: {ctx.planted_facts} fact(s) judged per scoring round, "
            f"{ctx.planted_sentences} sentence(s) per coherence score (the same items every round, so later "
            "rounds answer them from the cache)",
            f"{FACTS_PER_SENTENCE} atomic facts per summary sentence, {TOKENS_PER_SENTENCE} tokens per sentence",
            *(
                [
                    f"every round up to max_iterations ({ctx.max_iterations}) runs; summary length "
                    "min(max_summary_tokens, document/4)"
                ]
                if task == "refine"
                else []
            ),
            "typical answer lengths per call kind: "
            + ", ".join(f"{k} {v}" for k, v in OUTPUT_TOKENS.items()),
            "USD at the judge model's list price, for OpenAI models with a known price "
            "(storyjudge.core.usage.PRICES_PER_MTOK)",
        ],
    }


def estimate(config: ExperimentConfig, *, max_cells: int | None = None) -> dict[str, Any]:
    """Per cell and in total: LLM calls, tokens, and USD for models with a known price (None otherwise)."""
    loaded = {spec: spec.load() for spec in {cell.dataset for cell in cells(config)}}
    rows = []
    for cell in cells(config)[: max_cells if max_cells is not None else None]:
        items = loaded[cell.dataset].items
        tally = _Tally()
        groups: set[str] = set()
        for item in items:
            one = estimate_item(config, cell, item, indexed=cell.task == "score" and item.group in groups)
            groups.add(item.group)
            tally.calls += one.calls
            tally.input_tokens += one.input_tokens
            tally.output_tokens += one.output_tokens
        spec = resolve_spec(cell_context(config, cell, config.out_dir), "judge")
        usd = price(spec, tally.input_tokens, tally.output_tokens)
        known = spec.partition(":")[0] == "openai" and usd > 0
        rows.append(
            {
                "cell": cell.id,
                **cell.params,
                "resolved_model": spec,
                "items": len(items),
                "calls": tally.calls,
                "input_tokens": tally.input_tokens,
                "output_tokens": tally.output_tokens,
                "usd": round(usd, 4) if known else None,
            }
        )
    priced = [r["usd"] for r in rows if r["usd"] is not None]
    return {
        "cells": rows,
        "total": {
            "calls": sum(r["calls"] for r in rows),
            "input_tokens": sum(r["input_tokens"] for r in rows),
            "output_tokens": sum(r["output_tokens"] for r in rows),
            "usd": round(sum(priced), 4) if priced else None,
            "usd_covers_cells": f"{len(priced)} of {len(rows)}",
        },
        "assumptions": [
            "upper bound before cache hits (cells sharing a model reuse each other's cached calls) and "
            "without parse retries",
            f"{FACTS_PER_SENTENCE} atomic facts per summary sentence, "
            f"{TOKENS_PER_SENTENCE} tokens per sentence",
            "refine: every round up to max_iterations runs; "
            "summary length min(max_summary_tokens, document/4)",
            "typical answer lengths per call kind: "
            + ", ".join(f"{k} {v}" for k, v in OUTPUT_TOKENS.items()),
            "USD only for OpenAI models with a known price (storyjudge.core.usage.PRICES_PER_MTOK)",
        ],
    }
