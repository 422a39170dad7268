"""``storyjudge bench``: the performance goals measured by ``eval/bench``; needs a source checkout."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import console, fail

PARTS = ("latency", "summarize", "checkpoint", "startup", "embedding")
"""The parts of ``eval.bench.run`` (named here too: that module is importable only from a source checkout)."""


@app.command("bench")
def bench_command(
    latency: Annotated[float, typer.Option(help="Seconds the scripted server waits per call.")] = 0.3,
    slots: Annotated[
        int, typer.Option(help="Calls the scripted server serves at once, and the concurrency.")
    ] = 16,
    quick: Annotated[
        bool, typer.Option("--quick", help="A tenth of the coherence workload, fewer repeats. Default: off.")
    ] = False,
    skip: Annotated[
        str,
        typer.Option(
            help="Comma-separated parts to skip, one per goal: latency, summarize, checkpoint, startup, "
            "embedding. Default: none."
        ),
    ] = "",
    out_path: Annotated[
        Path | None, typer.Option("--out", help="Markdown file to write. Default: eval/bench/RESULTS.md.")
    ] = None,
) -> None:
    """Measure every performance goal: latency against its bound, chains of calls, checkpoints, start-up, embedding."""
    if latency <= 0 or slots < 1:
        fail("--latency must be > 0 and --slots >= 1.")
    parts = tuple(part.strip() for part in skip.split(",") if part.strip())
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        fail(f"unknown part(s) {unknown} in --skip; choose from {', '.join(PARTS)}.")
    import eval as eval_package

    # the repository the installed ``eval`` lives in (its __path__: an editable install may give no __file__)
    root = Path(next(iter(eval_package.__path__))).resolve().parent
    if not (
        (root / "eval" / "bench" / "run.py").is_file() and (root / "examples" / "frankenstein.txt").is_file()
    ):
        fail(
            f"storyjudge bench needs a source checkout with eval/bench/ and examples/ (looked in {root}); "
            "run it from a clone of the repository."
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from eval.bench.run import run

    console.print("The benchmark takes minutes; the machine should be otherwise idle.")
    path = run(latency=latency, slots=slots, quick=quick, skip=parts, out=out_path)
    console.print(f"Wrote {path}", markup=False)
