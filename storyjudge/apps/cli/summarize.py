"""``storyjudge summarize``: the summary on stdout, every intermediate summary in ``summary_tree.json``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from nodes.summary_writer import PROMPT_NAMES, tree_outline
from prompts import load
from storyjudge.apps.cli.common import console, fail, failing, read_text_file, say, write_out
from storyjudge.apps.cli.options import run_settings
from storyjudge.apps.cli.run import GraphCommand, Job, Run, add_graph_command
from storyjudge.core.context import Context
from storyjudge.core.models import resolve_spec
from storyjudge.core.summary_stats import summary_stats
from storyjudge.core.usage import cost_text, totals


def _read(
    file: Annotated[Path, typer.Argument(help="Narrative: .txt / .md, or a JSON list of scenes.")],
    out_path: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Also write the summary to this text file. Default: none."),
    ] = None,
) -> Job:
    text, _ = read_text_file(file)
    extra = {"source_text": text, "out": out_path}
    return Job({"document": text}, source=file, text=text, title=file.stem, extra=extra)


def _scenes(job: Job, ctx: Context) -> Job:
    """A JSON list of scenes becomes the graph's scenes (cut at the chunk size), joined for the statistics."""
    if not job.text.lstrip().startswith("["):
        return job
    from storyjudge.core.segmentation import join_scenes, segment_document

    with failing(ValueError):
        scenes, rule = segment_document(job.text, ctx.chunk_size)
    if rule != "json":
        return job
    return replace(
        job, graph_input={"scenes": scenes}, extra={**job.extra, "source_text": join_scenes(scenes)}
    )


def _stats_table(
    stats: dict[str, Any], shape: dict[str, Any], usage: dict[str, Any], cost: str, seconds: float
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
        f"tokens {usage['input_tokens']} in / {usage['output_tokens']} out, est. {cost}",
    )
    table.add_row("wall time", f"{seconds:.1f} s")
    return table


RECORDED = (
    *("strategy", "chunk_size", "chunker", "max_summary_tokens", "context_window", "artifact_removal"),
    *("seed", "preset", "preset_applied", "prompt_dir"),
)
"""The settings a summary's record keeps (and the summarizer's temperature)."""


def _write(run: Run) -> None:
    final, ctx, rd, seconds = run.final, run.ctx, run.rd, run.seconds
    assert rd is not None
    summary = final.get("summary", "")
    if not summary.strip():
        fail(f"The summarizer produced no text (see the events in {rd.summary_tree}); try another model.")
    stats = summary_stats(summary, run.job.extra["source_text"])
    shape = tree_outline(final.get("tree", []), final.get("events", []))
    usage = totals(final.get("usage"))
    record = {
        "source": str(run.job.source),
        "document_hash": run.job.doc_hash,
        "settings": {
            **{name: getattr(ctx, name) for name in RECORDED},
            "temperature": ctx.summarizer_temperature,
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
    console.print(_stats_table(stats, shape, usage, cost_text(final.get("usage")), seconds))
    say(f"Intermediate summaries: {rd.summary_tree}")
    out_path: Path | None = run.job.extra.get("out")
    if out_path is not None:
        write_out(out_path, summary.rstrip("\n") + "\n")
        say(f"Summary: {out_path}")
    run.show(record, summary)


SETTINGS = (
    *run_settings("summarizer"),
    *("run_dir", "strategy", "chunk_size", "max_summary_tokens", "context_window", "artifact_removal"),
    *("summary_temperature", "chunker"),
)
add_graph_command(
    GraphCommand("summarize", ("summarizer",), SETTINGS, read=_read, write=_write, prepare=_scenes)
)
