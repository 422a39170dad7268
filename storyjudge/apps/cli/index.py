"""``storyjudge index``: scenes, Character Knowledge Graph and scene index; a rerun reuses cached answers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from storyjudge.apps.cli.common import fail, read_text_file, say
from storyjudge.apps.cli.options import run_settings
from storyjudge.apps.cli.run import GraphCommand, Job, Run, add_graph_command
from storyjudge.core import scenestore
from storyjudge.core.concurrency import branch_threads
from storyjudge.core.context import Context
from storyjudge.core.models import is_local, resolve_spec
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


def _read(
    file: Annotated[Path, typer.Argument(help="Narrative: .txt / .md, or a JSON list of scenes.")],
    title: Annotated[
        str | None, typer.Option("--title", help="Document title. Default: the file name.")
    ] = None,
) -> Job:
    text, _ = read_text_file(file)
    name = title or file.stem
    return Job({"document": text, "title": name}, source=file, text=text, title=name)


def _branches(ctx: Context) -> int:
    """Graph branches in flight: few for an in-process model, so a scene's samples reuse its prompt cache."""
    return branch_threads(ctx, local=is_local(resolve_spec(ctx, "extractor")))


def _write(run: Run) -> None:
    final = run.final
    if "ckg_stats" not in final:
        fail("Indexing stopped before it finished; run the same command again to continue from the cache.")
    assert run.rd is not None
    index = final["index"]
    where = scenestore.where(index)[1] or "in memory"
    say(f"CKG: {run.rd.ckg}\nIndex: {where}")
    run.show(
        {
            "title": run.job.title,
            "source": str(run.job.source),
            "document_hash": run.job.doc_hash,
            "run_dir": str(run.rd.root),
            "ckg": str(run.rd.ckg),
            "segmentation": final.get("segmentation"),
            "ckg_stats": final.get("ckg_stats"),
            "index": index,
            "usage": final.get("usage", {}),
            "usage_totals": totals(final.get("usage")),
            "timings": final.get("timings", {}),
            "wall_seconds": round(run.seconds, 2),
        },
        f"{run.job.title}: {stats_line(final, run.seconds)}",
    )


SETTINGS = (
    *run_settings("extractor"),
    *("run_dir", "chunk_size", "ckg_samples", "extraction_temperature", "predicate_threshold"),
    *("predicate_min_count", "embedder", "chroma_url"),
)
add_graph_command(
    GraphCommand("index", ("extractor",), SETTINGS, read=_read, write=_write, max_concurrency=_branches)
)
