"""``storyjudge refine`` (the main job) and ``storyjudge score``: resumable runs with a run record."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.table import Table

import prompts
from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import (
    BaseUrlOpt,
    ConcurrencyOpt,
    CoverageFloorOpt,
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
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.coverage import describe
from storyjudge.core.llm import ModelError, require_models
from storyjudge.core.rundir import RunDir, RunDirMismatch, default_run_dir, document_hash
from storyjudge.core.runrecord import build_result, write_result
from storyjudge.core.usage import totals

StrategyOpt = Annotated[
    str | None,
    typer.Option("--strategy", help="Initial summary: 'hierarchical' merging or 'incremental' updating."),
]
ResumeOpt = Annotated[
    bool, typer.Option("--resume", help="Continue the interrupted run in --run-dir (checkpoint + LLM cache).")
]


def _read_document(path: Path) -> str:
    text, _ = read_text_file(path)
    if len(text.split()) < 3:
        fail(f"{path} has fewer than 3 words; give a narrative to summarize.")
    return text


def _claim(path: Path, text: str, ctx: Context, resume: bool) -> tuple[Context, RunDir]:
    """The run directory, claimed for this document only once every setting has been checked."""
    doc_hash = document_hash(text)
    rd = RunDir(Path(ctx.run_dir) if ctx.run_dir else default_run_dir(path.stem, doc_hash))
    try:
        rd.claim(doc_hash, str(path), resume=resume)
    except RunDirMismatch as exc:
        fail(str(exc))
    return ctx.replace(run_dir=str(rd.root)), rd


def _check_models(ctx: Context, roles: tuple[str, ...]) -> None:
    try:
        require_models(ctx, roles)
    except ConfigError as exc:
        fail(str(exc))


def _thread(rd: RunDir, kind: str, resume: bool) -> tuple[str, bool]:
    """The checkpoint thread of this run: the last one on --resume, a new one otherwise."""
    meta = json.loads(rd.meta.read_text())
    key = f"{kind}_thread"
    if resume and meta.get(key):
        return meta[key], True
    thread = f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    meta[key] = thread
    rd.write_json(rd.meta, meta)
    return thread, False


def _run(kind: str, graph_input: dict[str, Any], ctx: Context, rd: RunDir, resume: bool) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    if kind == "refine":
        from graphs.refine import build_graph
    else:
        from graphs.factscore import build_graph
    conn = sqlite3.connect(rd.checkpoints, check_same_thread=False)
    try:
        graph = build_graph(checkpointer=SqliteSaver(conn))
        thread, resuming = _thread(rd, kind, resume)
        config = graph_config(ctx, configurable={"thread_id": thread})
        if resuming:
            snapshot = graph.get_state(config)
            if snapshot.created_at is None:  # stopped before its first checkpoint: nothing to continue
                console.print(f"Nothing was checkpointed in {thread}; starting it (cached answers count).")
                return dict(stream_graph(graph, graph_input, ctx, config))
            if not snapshot.next and not snapshot.tasks:
                console.print(f"[green]The run in {rd.root} already finished;[/] showing its result.")
                return dict(snapshot.values)
            # tasks that finished before the stop have saved their writes; the stream applies them and goes on
            pending = snapshot.next or tuple(task.name for task in snapshot.tasks)
            console.print(f"Resuming {thread} at {', '.join(pending)}")
            return dict(stream_graph(graph, None, ctx, config))  # type: ignore[arg-type]
        return dict(stream_graph(graph, graph_input, ctx, config))
    except (ModelError, ConfigError) as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(str(exc))
    finally:
        conn.close()


def _score_table(iterations: list[dict[str, Any]], best: int | None) -> Table:
    table = Table(title="NarrativeFactScore per iteration", header_style="bold")
    columns = ("iteration", "NFS", "coverage", "supported", "unsupported", "unjudged", "facts", "coherence")
    for column in (*columns, "note"):
        table.add_column(column)
    for it in sorted(iterations, key=lambda i: i["iteration"]):
        card = it["factscore"]
        coherence = it.get("coherence") or {}
        mark = " (best)" if it["iteration"] == best else ""
        table.add_row(
            f"{it['iteration']}{mark}",
            describe(card["score"], None, card.get("reliable")),
            f"{card.get('coverage', 0.0):.0%}",
            str(card["supported"]),
            str(card["unsupported"]),
            str(card["unjudged"]),
            str(card["facts"]),
            "-"
            if not coherence
            else describe(coherence.get("score"), coherence.get("coverage"), coherence.get("reliable")),
            it.get("note", ""),
        )
    return table


def _nfs_line(card: dict[str, Any]) -> str:
    """The score with its coverage, in words: what was judged and what was not."""
    missing = card.get("decompose_failures", 0)
    not_split = f", {missing} sentence(s) not decomposed" if missing else ""
    return (
        f"NarrativeFactScore {describe(card['score'], card.get('coverage'), card.get('reliable'))}: "
        f"{card['supported']} supported, {card['unsupported']} unsupported, {card['unjudged']} unjudged of "
        f"{card['facts']} facts{not_split}"
    )


@app.command("refine")
def refine_command(
    file: Annotated[Path, typer.Argument(help="Narrative: .txt / .md, or a JSON list of scenes.")],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    run_dir: RunDirOpt = None,
    concurrency: ConcurrencyOpt = None,
    strategy: StrategyOpt = None,
    max_iterations: Annotated[int | None, typer.Option(help="Refinement rounds at most (default 3).")] = None,
    target: Annotated[float | None, typer.Option(help="Stop when NFS reaches this (default 1.0).")] = None,
    min_delta: Annotated[float | None, typer.Option(help="Smallest gain that counts (default 0.01).")] = None,
    patience: Annotated[
        int | None, typer.Option(help="Rounds without gain before stopping (default 1).")
    ] = None,
    ckg_samples: Annotated[int | None, typer.Option(help="Extraction samples per scene (default 3).")] = None,
    retrieval_k: Annotated[int | None, typer.Option(help="Evidence scenes per fact (default 3).")] = None,
    evidence_tokens: Annotated[
        int | None, typer.Option(help="Tokens of scene text per judge prompt (default 4000).")
    ] = None,
    predicate_threshold: Annotated[
        float | None, typer.Option(help="CKG predicate threshold, 0..1 (default 0.5).")
    ] = None,
    predicate_min_count: Annotated[
        int | None,
        typer.Option(
            help="Keep a predicate stated in at least this many extractions over all samples and scenes "
            "(the paper's frequency threshold; default 0: use the threshold x samples)."
        ),
    ] = None,
    chunk_size: Annotated[int | None, typer.Option(help="Chunk size in tokens (default 2048).")] = None,
    max_summary_tokens: Annotated[
        int | None, typer.Option(help="Summary budget in tokens (default 900).")
    ] = None,
    coherence_guard: Annotated[
        bool | None,
        typer.Option(
            "--coherence-guard/--no-coherence-guard", help="Reject refinements that lose coherence."
        ),
    ] = None,
    summary: Annotated[
        Path | None, typer.Option(help="Start from this summary instead of generating one.")
    ] = None,
    coverage_floor: CoverageFloorOpt = None,
    resume: ResumeOpt = False,
    preset: PresetOpt = None,
    prompt_dir: PromptDirOpt = None,
) -> None:
    """Summarize a narrative, then judge every atomic fact and refine until the score saturates."""
    started = time.perf_counter()
    text = _read_document(file)
    summary_text = read_text_file(summary, "summary")[0] if summary is not None else None
    ctx = make_context(
        model=model,
        base_url=base_url,
        run_dir=run_dir,
        concurrency=concurrency,
        strategy=strategy,
        max_iterations=max_iterations,
        target_score=target,
        min_delta=min_delta,
        patience=patience,
        ckg_samples=ckg_samples,
        retrieval_k=retrieval_k,
        evidence_tokens=evidence_tokens,
        predicate_threshold=predicate_threshold,
        predicate_min_count=predicate_min_count,
        chunk_size=chunk_size,
        max_summary_tokens=max_summary_tokens,
        coherence_guard=coherence_guard,
        coverage_floor=coverage_floor,
        preset=preset,
        prompt_dir=prompt_dir,
    )
    _check_models(ctx, ("extractor", "summarizer", "decomposer", "judge", "refiner"))
    ctx, rd = _claim(file, text, ctx, resume)
    print_models(ctx)
    graph_input: dict[str, Any] = {"document": text, "title": file.stem}
    if summary_text is not None:
        graph_input["summary"] = summary_text
    final = _run("refine", graph_input, ctx, rd, resume)
    result = build_result(final, ctx, prompt_versions=prompts.versions(ctx.prompt_dir))
    result["wall_seconds"] = round(time.perf_counter() - started, 2)
    write_result(rd.root, result)
    _write_report(rd)
    iterations = final.get("iterations") or []
    for it in sorted(iterations, key=lambda i: i["iteration"]):
        card = it["factscore"]
        nfs = describe(card["score"], card.get("coverage"), card.get("reliable"))
        out.print(Panel(it["summary"], title=f"iteration {it['iteration']}: NFS {nfs}", expand=False))
    out.print(_score_table(iterations, final.get("best_iteration")))
    usage = totals(final.get("usage"))
    out.print(f"Stopped: {final.get('stop_reason', '?')}. Best iteration: {final.get('best_iteration')}.")
    out.print(
        f"LLM calls {usage['calls']} (cache hits {usage['cache_hits']}, failures {usage['failures']}), "
        f"tokens {usage['input_tokens']} in / {usage['output_tokens']} out, est. ${usage['cost_usd']:.4f}; "
        f"wall {result['wall_seconds']}s"
    )
    out.print(f"Run record: {rd.result}")


@app.command("score")
def score_command(
    file: Annotated[Path, typer.Argument(help="Narrative: .txt / .md, or a JSON list of scenes.")],
    summary: Annotated[Path, typer.Option(help="The summary to score (text file).")],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    run_dir: RunDirOpt = None,
    concurrency: ConcurrencyOpt = None,
    ckg_samples: Annotated[int | None, typer.Option(help="Extraction samples per scene (default 3).")] = None,
    retrieval_k: Annotated[int | None, typer.Option(help="Evidence scenes per fact (default 3).")] = None,
    evidence_tokens: Annotated[
        int | None, typer.Option(help="Tokens of scene text per judge prompt (default 4000).")
    ] = None,
    predicate_threshold: Annotated[
        float | None, typer.Option(help="CKG predicate threshold, 0..1 (default 0.5).")
    ] = None,
    coverage_floor: CoverageFloorOpt = None,
    predicate_min_count: Annotated[
        int | None,
        typer.Option(
            help="Keep a predicate stated in at least this many extractions over all samples and scenes "
            "(the paper's frequency threshold; default 0: use the threshold x samples)."
        ),
    ] = None,
    resume: ResumeOpt = False,
    preset: PresetOpt = None,
    prompt_dir: PromptDirOpt = None,
) -> None:
    """NarrativeFactScore of a given summary against its narrative, with per-fact verdicts and evidence."""
    started = time.perf_counter()
    summary_text, _ = read_text_file(summary, "summary")
    text = _read_document(file)
    ctx = make_context(
        model=model,
        base_url=base_url,
        run_dir=run_dir,
        concurrency=concurrency,
        ckg_samples=ckg_samples,
        retrieval_k=retrieval_k,
        evidence_tokens=evidence_tokens,
        predicate_threshold=predicate_threshold,
        coverage_floor=coverage_floor,
        predicate_min_count=predicate_min_count,
        preset=preset,
        prompt_dir=prompt_dir,
    )
    _check_models(ctx, ("extractor", "decomposer", "judge"))
    ctx, rd = _claim(file, text, ctx, resume)
    print_models(ctx, ("extractor", "decomposer", "judge"))
    final = _run("score", {"document": text, "title": file.stem, "summary": summary_text}, ctx, rd, resume)
    card = final["factscore"]
    iteration = {"iteration": 0, "summary": summary_text, "factscore": card, "accepted": True, "note": ""}
    result = build_result(
        {**final, "iterations": [iteration], "best_iteration": 0},
        ctx,
        kind="score",
        prompt_versions=prompts.versions(ctx.prompt_dir),
    )
    result["wall_seconds"] = round(time.perf_counter() - started, 2)
    write_result(rd.root, result)
    _write_report(rd)
    table = Table(title="Atomic facts", header_style="bold", show_lines=False)
    table.add_column("fact")
    table.add_column("verdict")
    table.add_column("feedback")
    for verdict in card["verdicts"]:
        table.add_row(
            verdict["fact"]["text"], verdict["status"], verdict["feedback"] or verdict.get("error", "")
        )
    out.print(table)
    out.print(f"{_nfs_line(card)}. Run record: {rd.result}")


def _write_report(rd: RunDir) -> None:
    """Render report.html when the report module is available."""
    try:
        from storyjudge.apps.report import write_report
    except ImportError:
        return
    try:
        write_report(rd.root)
    except Exception as exc:  # noqa: BLE001 - a report failure must not lose the run
        console.print(f"[yellow]report.html not written: {exc}[/]")
