"""One command for the benchmark's five goals, written to ``eval/bench/RESULTS.md`` and ``RESULTS.json``.

    python -m eval.bench [--latency 0.3] [--slots 16] [--quick] [--skip PART,...] [--out PATH] [--baseline DIR]

Parts, one per goal (each can be skipped): latency, summarize, checkpoint, startup, embedding. ``--quick`` runs a
tenth of the coherence workload and repeats start-up and the embedding measurement fewer times. ``--baseline``
names another checkout (e.g. ``git worktree add DIR main``) whose summarize start-up is timed beside this one's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval.bench import ROOT, checkout_env, results

PARTS = ("latency", "summarize", "checkpoint", "startup", "embedding")


def embedding(repeat: int, out: Path) -> dict[str, Any] | None:
    """``eval.bench.embedding_bound`` in a fresh process, to ``out``; None, with the reason printed, when it fails."""
    done = subprocess.run(
        [sys.executable, "-m", "eval.bench.embedding_bound", "--json", str(out), "--repeat", str(repeat)],
        cwd=ROOT, env=checkout_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not out.exists():
        print(f"embedding skipped: {done.stderr.strip().splitlines()[-1:] or ['no output']}")
        return None
    return dict(json.loads(out.read_text(encoding="utf-8")))


def run(
    *,
    latency: float = 0.3,
    slots: int = 16,
    quick: bool = False,
    skip: tuple[str, ...] = (),
    out: Path | None = None,
    baseline: Path | None = None,
) -> Path:
    """Run the chosen parts and write the Markdown report and its raw numbers; returns the report's path."""
    from eval.bench import checkpoint_size, sequential, startup
    from eval.bench import latency as latency_bench

    raw: dict[str, Any] = {"settings": {"latency": latency, "slots": slots, "quick": quick}}
    if baseline is not None:
        raw["settings"]["baseline"] = str(baseline)
    started = results.load()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        parts: dict[str, Callable[[], Any]] = {
            "latency": lambda: latency_bench.run_all(latency, slots, 0.1 if quick else 1.0, tmp / "latency"),
            "summarize": lambda: sequential.run_all(latency, slots, tmp / "summarize"),
            "checkpoint": checkpoint_size.run,
            "startup": lambda: startup.run_all(latency, 1 if quick else 3, baseline),
            "embedding": lambda: embedding(2 if quick else 3, tmp / "embedding" / "part.json"),
        }
        for name, measure in parts.items():
            if name not in skip:
                print(f"{name} ...", flush=True)
                (tmp / name).mkdir()
                raw[name] = measure()
    raw["machine"] = {**results.machine(), "load average at the start": started}
    raw["goals"] = results.goals(raw)
    path = out or Path(__file__).resolve().parent / "RESULTS.md"
    path.write_text(results.render(raw), encoding="utf-8")
    path.with_suffix(".json").write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add = parser.add_argument
    add("--latency", type=float, default=0.3, help="seconds per call at the scripted server (L)")
    add("--slots", type=int, default=16, help="serving slots K, also storyjudge's concurrency")
    add("--quick", action="store_true", help="a tenth of the coherence workload, fewer repeats")
    add("--skip", default="", help=f"comma-separated parts to skip: {', '.join(PARTS)}")
    add("--out", type=Path, default=None, help="where to write the Markdown (default RESULTS.md)")
    add("--baseline", type=Path, default=None, help="another checkout whose start-up is timed beside")
    args = vars(parser.parse_args(argv))
    args["skip"] = tuple(part.strip() for part in args["skip"].split(",") if part.strip())
    if unknown := sorted(set(args["skip"]) - set(PARTS)):
        parser.error(f"unknown part(s) {unknown} in --skip; choose from {', '.join(PARTS)}")
    print(f"wrote {run(**args)}")
