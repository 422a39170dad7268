"""Goal 1: coherence, factscore and refine at K calls in flight against their critical-path bound.

Each workload runs at concurrency ``K`` on a fresh cache against the scripted server (``L`` s per call, ``K``
at once); the index and the compiled graphs are made once beforehand, untimed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval.bench import workload
from eval.bench.critical_path import dependency_waves
from eval.bench.workload import ServerProcess
from storyjudge.core.context import Context
from storyjudge.core.scripted_server import OpenAIServer

Runner = Callable[[Context], dict[str, Any]]
SHORT_RUN_REPEATS = 3
"""Short runs are repeated and the median kept: one busy second elsewhere would otherwise decide their ratio."""


def context(
    server: OpenAIServer | ServerProcess, cache: Path, run_dir: Path, slots: int, **fields: Any
) -> Context:
    """A run against the scripted server, without retries."""
    return Context(
        model="openai:scripted",
        base_url=server.base_url,
        cache_dir=str(cache),
        run_dir=str(run_dir),
        concurrency=slots,
        retry_budget_s=0,
        **fields,
    )


def measure(server: ServerProcess, run: Runner, ctx: Context, latency: float) -> dict[str, Any]:
    """One timed run (as in a new process: no remembered query vectors or searches): wall, CPU, calls, bound."""
    from nodes.retrieve import _remembered_searches
    from storyjudge.core import queryvectors

    _remembered_searches.cache_clear()
    with queryvectors._prepared_lock:
        queryvectors._prepared.clear()
    begin = len(server.completions)
    cpu = time.process_time()  # every thread of this process: the client's work, embedding included
    started = time.perf_counter()
    out = run(ctx)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    bodies = server.completions[begin:]
    waves = dependency_waves(bodies, ctx.concurrency)
    return {
        "concurrency": ctx.concurrency,
        "calls": len(bodies),
        "waves": waves,
        "bound_s": round(waves * latency, 2),
        "wall_s": round(wall, 2),
        "client_cpu_s": round(cpu, 2),
        "ratio": round(wall / (waves * latency), 3) if waves else None,
        "out": out,
    }


def warm_up(ctx: Context) -> None:
    """One call before timing: the HTTP client is created once per process and endpoint, not per run."""
    from prompts import Prompt
    from storyjudge.core.llm import ask_text

    ask_text(ctx, "judge", Prompt(name="warm-up", version="1", text=""), [("user", "Warm up.")])


def run_all(latency: float, slots: int, scale: float, tmp: Path) -> list[dict[str, Any]]:
    """Every workload at concurrency ``slots``: one row each (``scale``: the share of 100 coherence summaries)."""
    from graphs.coherence import build_graph as coherence_graph
    from graphs.factscore import build_graph as factscore_graph
    from graphs.index import build_graph as index_graph
    from graphs.refine import build_graph as refine_graph

    n_summaries, sentences = max(1, round(100 * scale)), 20
    document = workload.story(12)
    summary = workload.book_summary(sentences)
    run_dir = tmp / "run"
    with OpenAIServer(workload.BenchResponder(sentences)) as setup_server:  # the searched index, untimed
        ctx = context(setup_server, tmp / "setup-cache", run_dir, slots, ckg_samples=3)
        index = index_graph().invoke({"document": document, "title": "bench"}, context=ctx)
    indexed = {key: index[key] for key in ("scenes", "ckg", "index", "title")}
    coherence, factscore, refine = coherence_graph(), factscore_graph(), refine_graph()
    summaries = workload.coherence_summaries(n_summaries, sentences)

    def refine_result(out: dict[str, Any]) -> str:
        iterations = sorted(out["iterations"], key=lambda i: i["iteration"])
        scores = " -> ".join(f"{it['factscore']['score']:.3f}" for it in iterations)
        return f"NFS {scores}; {out['stop_reason'].split(' (')[0]}"

    workloads: list[tuple[str, Runner, Callable[[Any], str], dict[str, Any]]] = [
        (f"coherence {n_summaries} x {sentences} sentences",
         lambda ctx: dict(coherence.invoke({"summaries": summaries}, context=ctx)),
         lambda out: f"BooookScore {out['coherence']['system_score']:.3f} over {out['coherence']['sentences']} "
         "sentences", {}),
        ("factscore, 60 facts", lambda ctx: dict(factscore.invoke({"summary": summary, **indexed}, context=ctx)),
         lambda out: f"NFS {out['factscore']['score']:.3f} ({out['factscore']['facts']} facts)",
         {"ckg_samples": 3}),
        ("refine, 2 iterations",
         lambda ctx: dict(refine.invoke({"document": document, "title": "bench"}, context=ctx)),
         refine_result, {"ckg_samples": 3, "max_iterations": 2}),
    ]  # fmt: skip
    rows: list[dict[str, Any]] = []
    with ServerProcess(latency, slots, tmp / "requests.jsonl", sentences) as server:
        warm_up(context(server, tmp / "warm-up", run_dir, slots))
        for label, run, check, fields in workloads:
            repeats = 1 if label.startswith("coherence") else SHORT_RUN_REPEATS
            tries = [
                measure(server, run, context(server, tmp / f"cache-{label[:9]}-{n}", run_dir, slots, **fields),
                        latency)
                for n in range(repeats)
            ]  # fmt: skip
            row = sorted(tries, key=lambda r: r["wall_s"])[len(tries) // 2]
            out = row.pop("out")
            rows.append(
                {"workload": label, **row, "result": check(out), "repeats": [r["wall_s"] for r in tries]}
            )
    return rows
