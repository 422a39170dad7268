"""The summarizers against their critical-path bound: incremental updating and hierarchical merging.

Incremental updating is one chain of dependent calls (each step needs the summary so far), so its bound is
``L x calls``. Hierarchical merging summarizes the chunks in parallel and merges each group once it is
summarized; merges within a level are sequential (each takes the previous merge as prior context), so its
bound is the longest chain of dependent calls in the tree (attempts included, those answered from the cache
not), where a merge also waits until the calls of everything below it could have been served at the
concurrency. Artifact removal is one more call after either.

Each strategy is measured twice on ``examples/frankenstein.txt`` against the scripted server in its own
process: the graph alone in this process (its HTTP client already made, as in :mod:`eval.bench.latency`), and
``python -m storyjudge summarize`` as a user runs it, process start, imports and client set-up included.

    python -m eval.bench.sequential [--latency 0.3] [--slots 16] [--strategies incremental,hierarchical]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from eval.bench import checkout_env
from eval.bench.server_process import ServerProcess
from storyjudge.core.context import Context

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "examples" / "frankenstein.txt"
STRATEGIES = ("incremental", "hierarchical")


def _calls(summary: dict[str, Any], compressed: bool = False) -> int:
    """Model calls a summary took; records written before ``calls`` existed give their attempts."""
    return int(summary.get("calls", int(summary["attempts"]) + int(compressed)))


def tree_waves(tree: list[dict[str, Any]], concurrency: int) -> tuple[int, int]:
    """(waves on the critical path, summarizer calls) of a summarize tree.

    A summary's calls run one after the other, once its sources (one level down) and its prior (same level)
    are done; an attempt answered from the LLM cache (a request identical to an earlier one) takes no wave.
    Nor can a summary start before every summary it depends on, directly or through others, has been served
    at ``concurrency`` calls at a time: it ends no earlier than ceil(those calls / concurrency) + its own calls.
    """
    if tree and "step" in tree[0]:  # incremental: every step waits for the one before
        calls = sum(_calls(step["summary"], bool(step.get("compressed"))) for step in tree)
        return calls, calls
    slots = max(concurrency, 1)
    done: dict[tuple[int, int], int] = {}
    below: dict[tuple[int, int], frozenset[tuple[int, int]]] = {}
    own: dict[tuple[int, int], int] = {}
    for level in tree:
        for summary in level.get("summaries", []):
            lvl, idx = int(summary["level"]), int(summary["index"])
            needs = [(lvl - 1, int(s)) for s in summary["sources"]] if lvl else []
            if summary.get("prior") is not None:
                needs.append((lvl, int(summary["prior"])))
            ancestors = frozenset().union(*(below[n] | {n} for n in needs))
            served = math.ceil(sum(own[a] for a in ancestors) / slots)
            key = (lvl, idx)
            below[key], own[key] = ancestors, _calls(summary)
            done[key] = max([served, *(done[n] for n in needs)]) + own[key]
    calls = sum(own.values())
    return max(max(done.values(), default=0), math.ceil(calls / slots)), calls


def bound(out: dict[str, Any], calls: int, concurrency: int, latency: float) -> float:
    """L x (the tree's critical path + the calls after it: artifact removal)."""
    waves, tree_calls = tree_waves(out.get("tree", []), concurrency)
    return latency * (waves + max(0, calls - tree_calls))


def in_process(server: ServerProcess, strategy: str, slots: int, tmp: Path) -> dict[str, Any]:
    """The summarize graph alone, on a fresh LLM cache."""
    from graphs.summarize import build_graph

    ctx = Context(
        model="openai:scripted",
        base_url=server.base_url,
        cache_dir=str(tmp / f"cache-{strategy}"),
        run_dir=str(tmp / f"run-{strategy}"),
        concurrency=slots,
        retry_budget_s=0,
        strategy=strategy,
    )
    graph = build_graph()  # compiled before the clock starts, as the client is made before it
    begin = len(server.completions)
    started = time.perf_counter()
    out = dict(
        graph.invoke(
            {"document": DOCUMENT.read_text(encoding="utf-8")},
            config={"max_concurrency": 2 * slots},
            context=ctx,
        )
    )
    wall = time.perf_counter() - started
    return {"wall_s": wall, "calls": len(server.completions) - begin, "out": out}


def as_a_user(server: ServerProcess, strategy: str, slots: int, tmp: Path) -> dict[str, Any]:
    """``python -m storyjudge summarize`` in a fresh process, timed from its start to its exit.

    The server's log (written as it answers) is watched while it runs: ``first_answer_s`` is when the first
    answer went out (process start, imports and set-up, then one call's latency); ``after_last_answer_s`` is
    from the last answer to the exit (the run record, the statistics, the exit).
    """
    run_dir = tmp / f"cli-{strategy}"
    env = checkout_env()
    begin = len(server.completions)
    size = server.log.stat().st_size if server.log.exists() else 0
    first = last = None
    started = time.perf_counter()
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "storyjudge",
            "summarize",
            str(DOCUMENT),
            "--strategy",
            strategy,
            "--model",
            "openai:scripted",
            "--base-url",
            server.base_url,
            "--run-dir",
            str(run_dir),
            "--concurrency",
            str(slots),
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        while process.poll() is None:
            now = server.log.stat().st_size if server.log.exists() else 0
            if now != size:
                size, last = now, time.perf_counter() - started
                first = last if first is None else first
            time.sleep(0.005)
        _, stderr = process.communicate()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"storyjudge summarize failed: {stderr[-2000:]}")
    record = json.loads((run_dir / "summary_tree.json").read_text(encoding="utf-8"))
    phases = {"first_answer_s": round(first or 0.0, 2), "after_last_answer_s": round(wall - (last or 0.0), 2)}
    return {"wall_s": wall, "calls": len(server.completions) - begin, "out": record, "phases": phases}


IMPORT_FLOOR = "import langgraph.graph, langchain_openai, os; os._exit(0)"
"""What every LangGraph program that calls a model through LangChain's OpenAI client imports before its first call;
it exits without the interpreter's teardown, as storyjudge's command line does."""


def import_floor(repeat: int = 3) -> float:
    """Median seconds from start to exit of a fresh Python process that only runs ``IMPORT_FLOOR``."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", IMPORT_FLOOR], cwd=ROOT, env=checkout_env(), check=True)
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def run_all(
    latency: float, slots: int, tmp: Path, strategies: tuple[str, ...] = STRATEGIES
) -> list[dict[str, Any]]:
    """Every strategy, in this process and as a user runs it; one row each."""
    from eval.bench.latency import warm_up

    rows: list[dict[str, Any]] = []
    with ServerProcess(latency, slots, tmp / "requests.jsonl") as server:
        warm_up(
            Context(
                model="openai:scripted",
                base_url=server.base_url,
                cache_dir=str(tmp / "warm-up"),
                concurrency=slots,
                retry_budget_s=0,
            )
        )
        for strategy in strategies:
            for where, measure in (("graph", in_process), ("process", as_a_user)):
                got = measure(server, strategy, slots, tmp)
                limit = bound(got["out"], got["calls"], slots, latency)
                rows.append(
                    {
                        "workload": f"summarize {strategy} ({where})",
                        "concurrency": slots,
                        "calls": got["calls"],
                        "bound_s": round(limit, 2),
                        "wall_s": round(got["wall_s"], 2),
                        "ratio": round(got["wall_s"] / limit, 3) if limit else None,
                        **got.get("phases", {}),
                    }
                )
    floor = import_floor()
    for row in rows:
        if row["workload"].endswith("(process)"):
            row.update(import_floor=IMPORT_FLOOR, import_floor_s=round(floor, 2))
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run and print the rows (optionally save them as JSON)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.3, help="seconds the server waits per call (L)")
    parser.add_argument("--slots", type=int, default=16, help="serving slots K, also the concurrency")
    parser.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated strategies")
    parser.add_argument("--json", dest="json_path", default="", help="also write the rows to this file")
    args = parser.parse_args(argv)
    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_all(args.latency, args.slots, Path(tmp), strategies)
    for row in rows:
        print(
            f"{row['workload']:<36} calls {row['calls']:>4} bound {row['bound_s']:>6.2f}s "
            f"wall {row['wall_s']:>6.2f}s ratio {row['ratio']}"
            + (
                f" (first answer at {row['first_answer_s']:.2f}s, exit {row['after_last_answer_s']:.2f}s "
                "after the last)"
                if "first_answer_s" in row
                else ""
            )
        )
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return rows


if __name__ == "__main__":
    main()
