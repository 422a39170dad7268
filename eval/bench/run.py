"""One command for every benchmark, written to ``eval/bench/RESULTS.md`` with a table of the goals they measure.

Latency against the critical-path bound, cached reruns, the summarizers' chains of calls, checkpoint size,
start-up, embedding against the machine's matmul bound, indexing overhead, and the embedded model's speed:

    python -m eval.bench [--latency 0.3] [--slots 16] [--quick] [--skip PART,...] [--out PATH]

Parts (each can be skipped): latency, summarize, checkpoint, startup, embedding, overhead, embedded. A full run
takes about 25 minutes on 2 cores (the concurrency-1 BooookScore run alone is 2,000 calls x 0.3 s); ``--quick``
scales the coherence workload to a tenth, indexes Frankenstein only, and repeats start-up and the embedding
measurement fewer times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from eval.bench import checkout_env, results
from eval.bench import checkpoint_size as checkpoint_bench
from eval.bench import latency as latency_bench
from eval.bench import overhead as overhead_bench
from eval.bench import sequential as sequential_bench
from eval.bench import startup as startup_bench

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PARTS = ("latency", "summarize", "checkpoint", "startup", "embedding", "overhead", "embedded")


def in_own_process(module: str, *args: str) -> dict[str, Any] | None:
    """``python -m MODULE --json PATH ARGS`` in a fresh process (its torch threads and loaded models its own).

    None, with the reason printed, when it fails: llama.cpp or a model missing skips one part, not the run.
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "part.json"
        env = checkout_env()
        done = subprocess.run(
            [sys.executable, "-m", module, "--json", str(out), *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not out.exists():
            print(f"{module} skipped: {done.stderr.strip().splitlines()[-1:] or ['no output']}")
            return None
        return dict(json.loads(out.read_text(encoding="utf-8")))


def embedded_speed() -> dict[str, Any] | None:
    """``eval.bench.embedded_speed`` in its own process; None when llama.cpp or the model is missing."""
    return in_own_process("eval.bench.embedded_speed")


def run(
    *,
    latency: float = 0.3,
    slots: int = 16,
    quick: bool = False,
    skip: tuple[str, ...] = (),
    out: Path | None = None,
) -> Path:
    """Run the chosen parts and write the Markdown report; returns its path."""
    started = {"load": ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"}
    latency_rows: list[dict[str, Any]] = []
    overhead_rows: list[dict[str, Any]] = []
    embedded: dict[str, Any] | None = None
    summarize_rows: list[dict[str, Any]] = []
    checkpoint: dict[str, Any] | None = None
    startup: dict[str, Any] | None = None
    embedding: dict[str, Any] | None = None
    if "latency" not in skip:
        print("latency benchmarks ...", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            latency_rows = latency_bench.run_all(latency, slots, 0.1 if quick else 1.0, Path(tmp))
    if "summarize" not in skip:
        print("summarizers ...", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            summarize_rows = sequential_bench.run_all(latency, slots, Path(tmp))
    if "checkpoint" not in skip:
        print("checkpoint size ...", flush=True)
        checkpoint = checkpoint_bench.run(checkpoint_bench.DOCUMENT)
    if "startup" not in skip:
        print("start-up ...", flush=True)
        startup = startup_bench.run_all(latency, 1 if quick else 3)
    if "embedding" not in skip:
        print("embedding against the matmul bound ...", flush=True)
        embedding = in_own_process("eval.bench.embedding_bound", "--repeat", "2" if quick else "3")
    if "overhead" not in skip:
        print("indexing overhead ...", flush=True)
        documents = ("frankenstein",) if quick else ("frankenstein", "novel")
        overhead_rows = [overhead_bench.run_isolated(name) for name in documents]
    if "embedded" not in skip:
        print("embedded model speed ...", flush=True)
        embedded = embedded_speed()
    path = out or HERE / "RESULTS.md"
    text = results.render(
        latency_rows,
        overhead_rows,
        embedded,
        {"latency": latency, "slots": slots},
        started,
        summarize_rows,
        checkpoint=checkpoint,
        startup=startup,
        embedding=embedding,
    )
    path.write_text(text, encoding="utf-8")
    raw = {
        "latency": latency_rows,
        "summarize": summarize_rows,
        "overhead": overhead_rows,
        "embedded": embedded,
        "checkpoint": checkpoint,
        "startup": startup,
        "embedding": embedding,
        "goals": results.goals(latency_rows, summarize_rows, checkpoint, startup, embedding),
    }
    path.with_suffix(".json").write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--latency", type=float, default=0.3, help="seconds per call at the scripted server (L)"
    )
    parser.add_argument(
        "--slots", type=int, default=16, help="serving slots K, also storyjudge's concurrency"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a tenth of the coherence workload, one novel, fewer repeats"
    )
    parser.add_argument("--skip", default="", help=f"comma-separated parts to skip: {', '.join(PARTS)}")
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write the Markdown (default RESULTS.md)"
    )
    args = parser.parse_args(argv)
    skip = tuple(part.strip() for part in args.skip.split(",") if part.strip())
    unknown = sorted(set(skip) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {unknown} in --skip; choose from {', '.join(PARTS)}")
    path = run(latency=args.latency, slots=args.slots, quick=args.quick, skip=skip, out=args.out)
    print(f"wrote {path}")
