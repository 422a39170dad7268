"""Goal 2: the summarizers' chains of calls against their critical-path bound, process start included.

Incremental updating is one chain (bound ``L x calls``); hierarchical merging's bound is the longest chain of
dependent calls in its tree (``tree_waves``); artifact removal is one more call. Each strategy runs on
``examples/frankenstein.txt`` twice: the graph alone in this process, and ``python -m storyjudge summarize``.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path
from typing import Any

from eval.bench import ROOT, checkout_env, cli
from eval.bench.latency import context, warm_up
from eval.bench.workload import ServerProcess

DOCUMENT = ROOT / "examples" / "frankenstein.txt"


def _calls(summary: dict[str, Any], compressed: bool = False) -> int:
    """Model calls a summary took; records written before ``calls`` existed give their attempts."""
    return int(summary.get("calls", int(summary["attempts"]) + int(compressed)))


def tree_waves(tree: list[dict[str, Any]], concurrency: int) -> tuple[int, int]:
    """(waves on the critical path, summarizer calls) of a summarize tree.

    A summary's calls run in turn once its sources and prior are done, and no earlier than everything it
    depends on could have been served ``concurrency`` at a time; cache hits take no wave.
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


def in_process(server: ServerProcess, strategy: str, slots: int, tmp: Path) -> dict[str, Any]:
    """The summarize graph alone, on a fresh LLM cache."""
    from graphs.summarize import build_graph

    ctx = context(server, tmp / f"cache-{strategy}", tmp / f"run-{strategy}", slots, strategy=strategy)
    graph = build_graph()  # compiled before the clock starts, as the client is made before it
    document = {"document": DOCUMENT.read_text(encoding="utf-8")}  # read before it too
    begin = len(server.completions)
    started = time.perf_counter()
    out = dict(graph.invoke(document, config={"max_concurrency": 2 * slots}, context=ctx))
    wall = time.perf_counter() - started
    return {"wall_s": wall, "calls": len(server.completions) - begin, "out": out}


def as_a_user(server: ServerProcess, strategy: str, slots: int, tmp: Path) -> dict[str, Any]:
    """``python -m storyjudge summarize`` in a fresh process, timed from its start to its exit."""
    run_dir = tmp / f"cli-{strategy}"
    begin = len(server.completions)
    started = time.perf_counter()
    args = (str(DOCUMENT), "--strategy", strategy, "--concurrency", str(slots))
    done = subprocess.run(
        cli("summarize", *args, base_url=server.base_url, run_dir=run_dir),
        cwd=ROOT, env=checkout_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"storyjudge summarize failed: {done.stderr[-2000:]}")
    record = json.loads((run_dir / "summary_tree.json").read_text(encoding="utf-8"))
    return {"wall_s": wall, "calls": len(server.completions) - begin, "out": record}


def run_all(latency: float, slots: int, tmp: Path) -> list[dict[str, Any]]:
    """Every strategy, in this process and as a user runs it; one row each."""
    rows: list[dict[str, Any]] = []
    with ServerProcess(latency, slots, tmp / "requests.jsonl") as server:
        warm_up(context(server, tmp / "warm-up", tmp / "warm-up-run", slots))
        for strategy in ("incremental", "hierarchical"):
            for where, measure in (("graph", in_process), ("process", as_a_user)):
                got = measure(server, strategy, slots, tmp)
                waves, tree_calls = tree_waves(got["out"].get("tree", []), slots)
                limit = latency * (waves + max(0, got["calls"] - tree_calls))  # then artifact removal
                rows.append(
                    {
                        "workload": f"summarize {strategy} ({where})",
                        "concurrency": slots,
                        "calls": got["calls"],
                        "bound_s": round(limit, 2),
                        "wall_s": round(got["wall_s"], 2),
                        "ratio": round(got["wall_s"] / limit, 3) if limit else None,
                    }
                )
    return rows
