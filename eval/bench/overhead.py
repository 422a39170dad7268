"""Framework overhead of indexing a novel with a zero-latency scripted model: seconds and peak memory.

The index graph runs end to end (segmentation, k = 3 extraction samples per scene answered at once by the
scripted server in its own process, name graph and CKG build, and beside the extraction the passages embedded
with the default embedder into Chroma), so what is measured is storyjudge's own work. Each document runs in a
fresh process, so its peak memory (max RSS: Python, torch, the embedder, Chroma) is its own.

    python -m eval.bench.overhead [--documents frankenstein,novel] [--json rows.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from eval.bench import checkout_env

ROOT = Path(__file__).resolve().parents[2]
FRANKENSTEIN = ROOT / "examples" / "frankenstein.txt"
SQUALITY = ROOT.parent / "shared" / "data" / "squality" / "dev.jsonl"
NOVEL_WORDS = 130_000
RENAMES = {"Victor": "Anselm", "Elizabeth": "Marguerite", "Clerval": "Dorval", "Justine": "Lisette"}


def frankenstein() -> str:
    """Frankenstein (Project Gutenberg #84), about 75k words."""
    return FRANKENSTEIN.read_text(encoding="utf-8")


def novel() -> tuple[str, str]:
    """About 130k words: Frankenstein, then SQuALITY stories (or Frankenstein again with names changed)."""
    text = frankenstein()
    words = len(text.split())
    parts = [text]
    if SQUALITY.is_file():
        for line in SQUALITY.read_text(encoding="utf-8").splitlines():
            if words >= NOVEL_WORDS:
                break
            story = json.loads(line)["document"]
            parts.append(f"Chapter {len(parts) + 24}\n\n{story}")
            words += len(story.split())
        return "\n\n".join(parts), f"Frankenstein + {len(parts) - 1} SQuALITY stories"
    again = text
    for old, new in RENAMES.items():
        again = again.replace(old, new)
    extra = again.split()[: NOVEL_WORDS - words]
    return text + "\n\n" + " ".join(extra), "Frankenstein + its first part again with names changed"


def measure(name: str) -> dict[str, Any]:
    """Index one document in this process; returns the row (call in a fresh process for peak memory)."""
    from eval.bench.server_process import ServerProcess
    from graphs.index import build_graph
    from storyjudge.core.context import Context
    from storyjudge.core.embeddings import get_embedder

    text, source = (frankenstein(), "Frankenstein") if name == "frankenstein" else novel()
    started = time.perf_counter()
    get_embedder("minilm")
    load_s = time.perf_counter() - started
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(0.0, 16, Path(tmp) / "log.jsonl", names=True) as server,
    ):
        ctx = Context(
            model="openai:scripted",
            base_url=server.base_url,
            run_dir=str(Path(tmp) / "run"),
            concurrency=16,
            ckg_samples=3,
            retry_budget_s=0,
        )
        started = time.perf_counter()
        done_at: dict[str, float] = {}  # seconds from the start at which each node's update arrived
        out: dict[str, Any] = {}
        for mode, chunk in build_graph().stream(
            {"document": text, "title": name}, context=ctx, stream_mode=["updates", "values"]
        ):
            if mode == "updates":
                done_at.update(dict.fromkeys(chunk, time.perf_counter() - started))
            else:
                out = chunk
        wall = time.perf_counter() - started
        calls = len(server.completions)
    timings = out.get("timings") or {}
    # the extraction branches run beside the embedding: their wall time is from the end of segmentation to
    # the last branch's answer (each branch's update streams as it ends)
    extraction = done_at.get("extract_scene", 0.0) - done_at.get("segment", 0.0)
    stats = out.get("ckg_stats") or {}
    passages = int((out.get("index") or {}).get("passages", 0))
    return {
        "document": name,
        "source": source,
        "words": len(text.split()),
        "scenes": len(out.get("scenes") or []),
        "llm_calls": calls,
        "characters": stats.get("characters", 0),
        "edges": stats.get("edges", 0),
        "passages": passages,
        "embedder_load_s": round(load_s, 1),
        "segment_s": round(timings.get("segment", 0.0), 2),
        "extraction_s": round(max(0.0, extraction), 1),
        "ckg_s": round(timings.get("ckg", 0.0), 2),
        "embed_index_s": round(timings.get("index", 0.0), 1),
        "passages_per_s": round(passages / timings["index"], 1) if timings.get("index") else None,
        "total_s": round(wall, 1),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def run_isolated(name: str) -> dict[str, Any]:
    """``measure`` in a fresh interpreter (its own peak memory)."""
    env = checkout_env()
    env.setdefault("HF_HUB_OFFLINE", "1")
    done = subprocess.run(
        [sys.executable, "-m", "eval.bench.overhead", "--one", name],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"overhead benchmark of {name} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Measure each document in its own process and print the rows."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--documents", default="frankenstein,novel")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)  # the child process's job
    parser.add_argument("--json", dest="json_path", default="")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one)))
        return []
    rows = [run_isolated(name.strip()) for name in args.documents.split(",") if name.strip()]
    for row in rows:
        print(json.dumps(row))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return rows


if __name__ == "__main__":
    main()
