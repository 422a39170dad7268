"""``storyjudge summarize``: a book-length summary by hierarchical merging or incremental updating.

Prints the summary and its statistics (seed 000's table 2) and writes every intermediate summary, event, cost
and timing to ``summary_tree.json`` in the run directory.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from nodes.writer import PROMPT_NAMES, tree_outline
from prompts import load
from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import (
    BaseUrlOpt,
    ConcurrencyOpt,
    ModelOpt,
    PresetOpt,
    PromptDirOpt,
    RunDirOpt,
    console,
    fail,
    make_context,
    out,
    print_models,
    read_text_file,
    stream_graph,
)
from storyjudge.core.concurrency import graph_config
from storyjudge.core.context import ConfigError
from storyjudge.core.llm import ModelError, require_models
from storyjudge.core.models import resolve_spec
from storyjudge.core.rundir import RunDir, RunDirMismatch, default_run_dir, document_hash
from storyjudge.core.summary_stats import summary_stats
from storyjudge.core.usage import totals


def _graph_input(text: str, chunk_size: int) -> tuple[dict[str, Any], str]:
    """The graph input and the source text for the statistics (a JSON scene list becomes scenes)."""
    if text.lstrip().startswith("["):
        from storyjudge.core.segmentation import join_scenes, segment_document

        try:
            scenes, rule = segment_document(text, chunk_size)
        except ValueError as exc:
            fail(str(exc))
        if rule == "json":
            return {"scenes": scenes}, join_scenes(scenes)
    return {"document": text}, text


def _stats_table(
    stats: dict[str, Any], shape: dict[str, Any], usage: dict[str, Any], seconds: float
) -> Table:
    table = Table(title="Summary", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("strategy", shape["strategy"])
    table.add_row("chunks", str(shape["chunks"]))
    if shape["strategy"] == "hierarchical":
        table.add_row("levels", f"{shape['levels']} (summaries per level {shape['summaries_per_level']})")
    else:
        table.add_row("compressions", str(shape["compressions"]))
    table.add_row("events", ", ".join(f"{k} {v}" for k, v in sorted(shape["events"].items())) or "none")
    table.add_row("length", f"{stats['length_tokens']} tokens, {stats['words']} words")
    novel, repeated = stats["novel_trigrams_pct"], stats["repeated_trigrams_pct"]
    table.add_row("novel trigrams", "n/a" if novel is None else f"{novel:.2f} %")
    table.add_row("repeated trigrams", "n/a" if repeated is None else f"{repeated:.2f} %")
    table.add_row(
        "LLM calls",
        f"{usage['calls']} (cache hits {usage['cache_hits']}), "
        f"tokens {usage['input_tokens']} in / {usage['output_tokens']} out, est. ${usage['cost_usd']:.4f}",
    )
    table.add_row("wall time", f"{seconds:.1f} s")
    return table


@app.command("summarize")
def summarize_command(
    file: Annotated[Path, typer.Argument(help="Narrative: .txt / .md, or a JSON list of scenes.")],
    strategy: Annotated[
        str | None,
        typer.Option("--strategy", help="'hierarchical' merging (default) or 'incremental' updating."),
    ] = None,
    chunk_size: Annotated[
        int | None, typer.Option("--chunk-size", help="Chunk size C in cl100k tokens (default 2048).")
    ] = None,
    max_summary_tokens: Annotated[
        int | None, typer.Option("--max-summary-tokens", help="Summary budget G_n in tokens (default 900).")
    ] = None,
    context_window: Annotated[
        int | None,
        typer.Option("--context-window", help="The model's context window W in tokens (default 8192)."),
    ] = None,
    artifact_removal: Annotated[
        bool | None,
        typer.Option(
            "--artifact-removal/--no-artifact-removal",
            help="Clean 'in this segment'-style phrases (default on).",
        ),
    ] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    run_dir: RunDirOpt = None,
    concurrency: ConcurrencyOpt = None,
    preset: PresetOpt = None,
    prompt_dir: PromptDirOpt = None,
) -> None:
    """Summarize a book-length narrative (seed 000's hierarchical merging or incremental updating)."""
    started = time.perf_counter()
    text, _ = read_text_file(file)
    doc_hash = document_hash(text)
    rd = RunDir(run_dir or default_run_dir(file.stem, doc_hash))
    try:
        rd.claim(doc_hash, str(file))
    except RunDirMismatch as exc:
        fail(str(exc))
    ctx = make_context(
        model=model,
        base_url=base_url,
        run_dir=rd.root,
        concurrency=concurrency,
        strategy=strategy,
        chunk_size=chunk_size,
        max_summary_tokens=max_summary_tokens,
        context_window=context_window,
        artifact_removal=artifact_removal,
        preset=preset,
        prompt_dir=prompt_dir,
    )
    try:
        require_models(ctx, ("summarizer",))
    except ConfigError as exc:
        fail(str(exc))
    print_models(ctx, ("summarizer",))
    graph_input, source = _graph_input(text, ctx.chunk_size)
    from graphs.summarize import build_graph

    try:
        final = stream_graph(build_graph(), graph_input, ctx, graph_config(ctx))
    except (ModelError, ConfigError, ValueError) as exc:
        fail(str(exc))
    seconds = time.perf_counter() - started
    summary = (final or {}).get("summary", "")
    if not summary.strip():
        fail(f"The summarizer produced no text (see the events in {rd.summary_tree}); try another model.")
    stats = summary_stats(summary, source)
    shape = tree_outline(final.get("tree", []), final.get("events", []))
    usage = totals(final.get("usage"))
    record = {
        "source": str(file),
        "document_hash": doc_hash,
        "settings": {
            "strategy": ctx.strategy,
            "chunk_size": ctx.chunk_size,
            "max_summary_tokens": ctx.max_summary_tokens,
            "context_window": ctx.context_window,
            "artifact_removal": ctx.artifact_removal,
            "temperature": ctx.summarizer_temperature,
            "seed": ctx.seed,
            "preset": ctx.preset,
            "preset_applied": ctx.preset_applied,
            "prompt_dir": ctx.prompt_dir,
        },
        "models": {"summarizer": resolve_spec(ctx, "summarizer")},
        "prompts": {name: load(name, ctx.prompt_dir).version_id for name in PROMPT_NAMES},
        "summary": summary,
        "stats": stats,
        "shape": shape,
        "usage": final.get("usage", {}),
        "timings": final.get("timings", {}),
        "wall_seconds": round(seconds, 2),
        "events": final.get("events", []),
        "tree": final.get("tree", []),
    }
    rd.write_json(rd.summary_tree, record)
    out.print(summary, markup=False, highlight=False)
    out.print(_stats_table(stats, shape, usage, seconds))
    console.print(f"Intermediate summaries: {rd.summary_tree}")
