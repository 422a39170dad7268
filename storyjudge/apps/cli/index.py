"""``storyjudge index``: segment a narrative, extract its Character Knowledge Graph and index its scenes.

Writes the CKG as node-link JSON and the Chroma collections into the run directory, then prints one stats
line. Running it again on an unchanged document reuses the cached LLM answers and the complete collections.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

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
from storyjudge.core.concurrency import branch_threads
from storyjudge.core.context import ConfigError
from storyjudge.core.llm import ModelError, require_models
from storyjudge.core.models import is_local, resolve_spec
from storyjudge.core.rundir import RunDir, RunDirMismatch, default_run_dir, document_hash
from storyjudge.core.usage import totals


def stats_line(final: dict[str, Any], seconds: float) -> str:
    """``28 scenes (play), 31 characters, 74 edges (9 self-loops); 3 samples/scene; 84 LLM calls ...``."""
    stats = final.get("ckg_stats") or {}
    meta = (final.get("ckg") or {}).get("graph") or {}
    usage = totals(final.get("usage"))
    index = final.get("index") or {}
    failed = meta.get("failed_extractions", 0)
    return (
        f"{stats.get('scenes', 0)} scenes ({final.get('segmentation', '?')}), "
        f"{stats.get('characters', 0)} characters, {stats.get('edges', 0)} edges "
        f"({stats.get('self_loops', 0)} self-loops); "
        f"{meta.get('samples', '?')} samples/scene, predicates kept at {meta.get('min_count', '?')}+; "
        f"{usage['calls']} LLM calls ({usage['cache_hits']} cached, {failed} unparseable), "
        f"{usage['input_tokens']} in / {usage['output_tokens']} out tokens; "
        f"{index.get('passages', 0)} passages in the index; {seconds:.1f} s"
    )


@app.command("index")
def index_command(
    file: Annotated[Path, typer.Argument(help="Narrative: .txt / .md, or a JSON list of scenes.")],
    ckg_samples: Annotated[
        int | None, typer.Option("--ckg-samples", "-k", help="Extraction samples per scene (default 3).")
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            help="Keep a predicate seen in at least threshold x samples extractions (0..1, default 0.5).",
        ),
    ] = None,
    predicate_min_count: Annotated[
        int | None,
        typer.Option(
            help="Keep a predicate stated in at least this many extractions over all samples and scenes "
            "(the paper's frequency threshold; default 0: use the threshold x samples)."
        ),
    ] = None,
    chunk_size: Annotated[
        int | None, typer.Option("--chunk-size", help="Largest scene in cl100k tokens (default 2048).")
    ] = None,
    embedder: Annotated[
        str | None, typer.Option("--embedder", help="'minilm' (default) or 'bge-m3:<local path>'.")
    ] = None,
    chroma_url: Annotated[
        str | None,
        typer.Option("--chroma-url", help="Chroma server URL (default: embedded store in the run dir)."),
    ] = None,
    title: Annotated[
        str | None, typer.Option("--title", help="Document title (default: the file name).")
    ] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    run_dir: RunDirOpt = None,
    concurrency: ConcurrencyOpt = None,
    preset: PresetOpt = None,
    prompt_dir: PromptDirOpt = None,
) -> None:
    """Build the scenes, the Character Knowledge Graph and the scene index of a narrative."""
    started = time.perf_counter()
    text, _ = read_text_file(file)
    doc_hash = document_hash(text)
    name = title or file.stem
    rd = RunDir(run_dir or default_run_dir(name, doc_hash))
    try:
        rd.claim(doc_hash, str(file))
    except RunDirMismatch as exc:
        fail(str(exc))
    ctx = make_context(
        model=model,
        base_url=base_url,
        run_dir=rd.root,
        concurrency=concurrency,
        ckg_samples=ckg_samples,
        predicate_threshold=threshold,
        predicate_min_count=predicate_min_count,
        chunk_size=chunk_size,
        embedder=embedder,
        chroma_url=chroma_url,
        preset=preset,
        prompt_dir=prompt_dir,
    )
    try:
        require_models(ctx, ("extractor",))
    except ConfigError as exc:
        fail(str(exc))
    print_models(ctx, ("extractor",))
    from graphs.index import build_graph

    # An in-process model serves one call at a time: running branches (nearly) in order lets each scene's k
    # samples follow each other and reuse the model's prompt cache. Not 1: while streaming, LangGraph's queue
    # waiter takes one of the slots, and with a single slot the run would wait forever.
    parallel = branch_threads(ctx, local=is_local(resolve_spec(ctx, "extractor")))
    try:
        final = stream_graph(
            build_graph(), {"document": text, "title": name}, ctx, {"max_concurrency": parallel}
        )
    except (ModelError, ConfigError, ValueError) as exc:
        fail(str(exc))
    if not final or "ckg_stats" not in final:
        fail("Indexing stopped before it finished; run the same command again to continue from the cache.")
    out.print(f"{name}: {stats_line(final, time.perf_counter() - started)}", highlight=False, soft_wrap=True)
    console.print(
        f"CKG: {rd.ckg}\nIndex: {final['index'].get('store_dir') or final['index'].get('chroma_url')}"
    )
