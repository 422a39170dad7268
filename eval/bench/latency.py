"""Wall time of coherence, factscore and refine runs against their critical-path bound, and cached reruns.

Against the scripted server with latency ``L`` per call and ``K`` serving slots, each workload runs at
concurrency ``K`` and at concurrency 1 (the papers' code is sequential), each with a fresh LLM cache, then
once more on the warm cache (an identical experiment rerun: it should make no call). The bound of each run
comes from the calls the server actually received and their dependencies (:mod:`eval.bench.critical_path`);
each row also gives the earlier barrier bound, which made every verdict wait for every decomposition, and
the floors of a concurrent run: its calls posted again with their dependencies by a client that does
nothing else (:mod:`eval.bench.floor`), what this machine and server allow, and again with each
decomposition's facts retrieved for real before its verdicts go (the method's own compute on the path). The
server runs in a process of its own, as a real endpoint would. The index the factscore and refine runs search
is built once beforehand; embedding is measured by :mod:`eval.bench.overhead`.

    python -m eval.bench.latency [--latency 0.3] [--slots 16] [--scale 1.0] [--json rows.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval.bench import workload
from eval.bench.critical_path import DECOMPOSE, barrier_waves, dependency_waves, request_kind, stages
from eval.bench.floor import replay, retrieval
from eval.bench.server_process import ServerProcess
from storyjudge.apps.scripted_server import OpenAIServer
from storyjudge.core.context import Context

Runner = Callable[[Context], dict[str, Any]]


def _context(
    server: OpenAIServer | ServerProcess, cache: Path, run_dir: Path, concurrency: int, **fields: Any
) -> Context:
    return Context(
        model="openai:scripted",
        base_url=server.base_url,
        cache_dir=str(cache),
        run_dir=str(run_dir),
        concurrency=concurrency,
        retry_budget_s=0,
        **fields,
    )


def forget_searches() -> None:
    """Start each run as a new process would: no remembered query vectors or scene searches."""
    from nodes.retrieve import _remembered_searches
    from storyjudge.core import vectorstore

    _remembered_searches.cache_clear()
    with vectorstore._prepared_lock:
        vectorstore._prepared.clear()


def measure(
    server: ServerProcess,
    label: str,
    run: Runner,
    ctx: Context,
    latency: float,
    check: Callable[[Any], str],
    floor: bool = False,
    indexed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One timed run: wall time, calls, stages, bound and ratio.

    With ``floor``, also its floors (module docstring); the method's floor retrieves from ``indexed``, the index,
    scenes and CKG that the run searched.
    """
    forget_searches()
    begin = len(server.completions)
    cpu = time.process_time()  # every thread of this process: the client's work, embedding included
    started = time.perf_counter()
    out = run(ctx)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    bodies = server.completions[begin:]
    found = stages(bodies)
    rounds = dependency_waves(bodies, ctx.concurrency)
    bound = rounds * latency
    barrier = barrier_waves(bodies, ctx.concurrency) * latency
    floor_s = method_floor_s = None
    if floor and bodies:
        floor_s = replay(server.base_url, bodies, ctx.concurrency)
        if indexed and any(request_kind(body) == DECOMPOSE for body in bodies):
            forget_searches()  # the run's searches are remembered: the floor must pay for them as a run does
            work = retrieval(bodies, ctx, indexed)
            method_floor_s = replay(server.base_url, bodies, ctx.concurrency, work)
    highest = method_floor_s or floor_s
    return {
        "workload": label,
        "concurrency": ctx.concurrency,
        "calls": len(bodies),
        "stages": len(found),
        "waves": rounds,
        "stage_calls": [f"{s.kind[:24]}:{s.calls}" for s in found],
        "bound_s": round(bound, 2),
        "wall_s": round(wall, 2),
        "client_cpu_s": round(cpu, 2),
        "ratio": round(wall / bound, 3) if bound else None,
        "barrier_bound_s": round(barrier, 2),
        "barrier_ratio": round(wall / barrier, 3) if barrier else None,
        "floor_s": None if floor_s is None else round(floor_s, 2),
        "floor_ratio": round(floor_s / bound, 3) if floor_s and bound else None,
        "method_floor_s": None if method_floor_s is None else round(method_floor_s, 2),
        "method_floor_ratio": round(method_floor_s / bound, 3) if method_floor_s and bound else None,
        "over_floor": round(wall / highest, 3) if highest else None,
        "result": check(out),
    }


def warm_up(ctx: Context) -> None:
    """One call before timing: the HTTP client is created once per process and endpoint, not per run."""
    from prompts import Prompt
    from storyjudge.core.llm import ask_text

    ask_text(ctx, "judge", Prompt(name="warm-up", version="1", text=""), [("user", "Warm up.")])


WORKLOADS = ("coherence", "factscore", "refine")
SHORT_RUN_REPEATS = 3


def run_all(
    latency: float,
    slots: int,
    scale: float,
    tmp: Path,
    only: tuple[str, ...] = WORKLOADS,
    sequential: bool = True,
) -> list[dict[str, Any]]:
    """Every workload at concurrency ``slots`` (and 1 when ``sequential``), plus a cached rerun of each."""
    from graphs.coherence import build_graph as coherence_graph
    from graphs.factscore import build_graph as factscore_graph
    from graphs.index import build_graph as index_graph
    from graphs.refine import build_graph as refine_graph

    n_summaries = max(1, round(100 * scale))
    sentences = 20
    document = workload.story(12)
    summary = workload.book_summary(sentences)
    responder = workload.BenchResponder(sentences)
    run_dir = tmp / "run"

    with OpenAIServer(responder) as setup_server:  # the index the searches use, built once, untimed
        ctx = _context(setup_server, tmp / "setup-cache", run_dir, slots, ckg_samples=3)
        index = index_graph().invoke({"document": document, "title": "bench"}, context=ctx)
    indexed = {key: index[key] for key in ("scenes", "ckg", "index", "title")}
    # compiled once, untimed, as a program compiles a graph once (a module's ``graph``) and invokes it per run
    graphs = {"coherence": coherence_graph(), "factscore": factscore_graph(), "refine": refine_graph()}

    def coherence(ctx: Context) -> dict[str, Any]:
        summaries = workload.coherence_summaries(n_summaries, sentences)
        return dict(graphs["coherence"].invoke({"summaries": summaries}, context=ctx))

    def factscore(ctx: Context) -> dict[str, Any]:
        return dict(graphs["factscore"].invoke({"summary": summary, **indexed}, context=ctx))

    def refine(ctx: Context) -> dict[str, Any]:
        return dict(graphs["refine"].invoke({"document": document, "title": "bench"}, context=ctx))

    def coherence_result(out: dict[str, Any]) -> str:
        coherence = out["coherence"]
        return f"BooookScore {coherence['system_score']:.3f} over {coherence['sentences']} sentences"

    def factscore_result(out: dict[str, Any]) -> str:
        card = out["factscore"]
        return f"NFS {card['score']:.3f} ({card['facts']} facts)"

    def refine_result(out: dict[str, Any]) -> str:
        scores = [
            f"{it['factscore']['score']:.3f}"
            for it in sorted(out["iterations"], key=lambda i: i["iteration"])
        ]
        return f"NFS {' -> '.join(scores)}; {out['stop_reason'].split(' (')[0]}"

    workloads: list[tuple[str, Runner, Callable[[Any], str], dict[str, Any]]] = [
        (f"coherence {n_summaries} x {sentences} sentences", coherence, coherence_result, {}),
        ("factscore, 60 facts", factscore, factscore_result, {"ckg_samples": 3}),
        ("refine, 2 iterations", refine, refine_result, {"ckg_samples": 3, "max_iterations": 2}),
    ]
    rows: list[dict[str, Any]] = []
    with ServerProcess(latency, slots, tmp / "requests.jsonl", sentences) as server:
        warm_up(_context(server, tmp / "warm-up", run_dir, slots))
        for label, run, check, fields in workloads:
            if label.split()[0].rstrip(",") not in only:
                continue
            for concurrency in (slots, 1) if sequential else (slots,):
                # short concurrent runs are repeated (each with a fresh cache) and the median kept: one
                # busy second elsewhere on a shared machine would otherwise decide their ratio
                repeats = (
                    SHORT_RUN_REPEATS if concurrency == slots and not label.startswith("coherence") else 1
                )
                tries = []
                for attempt in range(repeats):
                    cache = tmp / f"cache-{label.split()[0]}-{concurrency}-{attempt}"
                    ctx = _context(server, cache, run_dir, concurrency, **fields)
                    timed = measure(server, label, run, ctx, latency, check, concurrency == slots, indexed)
                    tries.append(timed)
                row = sorted(tries, key=lambda r: r["wall_s"])[len(tries) // 2]
                row["repeats"] = [r["wall_s"] for r in tries]
                rows.append(row)
                if concurrency == slots:
                    rerun = measure(server, label, run, ctx, latency, check)
                    rerun["workload"] = label + " (rerun, warm cache)"
                    rows.append(rerun)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run and print the rows (optionally save them as JSON)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.3, help="seconds the server waits per call (L)")
    parser.add_argument("--slots", type=int, default=16, help="serving slots K, also the concurrency")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="share of the 100 coherence summaries to run"
    )
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads to run")
    parser.add_argument("--no-sequential", action="store_true", help="skip the concurrency-1 runs")
    parser.add_argument("--json", dest="json_path", default="", help="also write the rows to this file")
    args = parser.parse_args(argv)
    only = tuple(name.strip() for name in args.only.split(",") if name.strip())
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_all(args.latency, args.slots, args.scale, Path(tmp), only, not args.no_sequential)
    for row in rows:
        print(
            f"{row['workload']:<44} c={row['concurrency']:<3} calls {row['calls']:>5} "
            f"waves {row['waves']:>4} "
            f"bound {row['bound_s']:>7.2f}s wall {row['wall_s']:>7.2f}s ratio {row['ratio']} "
            f"(barrier bound {row['barrier_bound_s']:.2f}s: {row['barrier_ratio']}; floors "
            f"{row['floor_s']}s, with retrieval {row['method_floor_s']}s: x{row['method_floor_ratio']} of the "
            f"bound; run x{row['over_floor']} of the floor)  {row['result']}"
        )
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return rows


if __name__ == "__main__":
    main()
