"""``eval/bench/RESULTS.md``: the goals' table first, the machine, then one short section per goal."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from typing import Any

LATENCY_GOAL = 1.10  # goal 1: factscore and refine, x their critical-path bound
COHERENCE_GOAL = 1.05  # goal 1: coherence scoring, x its bound
SEQUENTIAL_GOAL = 1.10  # goal 2: a chain of dependent calls, process start included, x its bound
CHECKPOINT_GOAL = 3.0  # goal 3: a refine run's checkpoints, x its final state
STARTUP_GOAL_S = 3.0  # goal 4: seconds to doctor's exit and to refine's first progress line
FIRST_REQUEST_GOAL_S = 2.5  # goal 4: seconds to `summarize BOOK --strategy incremental`'s first request
FIRST_REQUEST = "summarize first request"
EMBEDDING_GOAL = 0.60  # goal 5: the embedder's FLOP/s as a share of float32 matmul FLOP/s, at least


GOALS = (
    ("latency within the critical-path bound", f"<= {LATENCY_GOAL} x bound ({COHERENCE_GOAL} for coherence)"),
    ("sequential calls at the bound (process start included)", f"<= {SEQUENTIAL_GOAL} x bound"),
    ("lean checkpoints of a refine run", f"<= {CHECKPOINT_GOAL:g} x final state"),
    ("start fast", f"<= {STARTUP_GOAL_S:g} s"),
    ("indexing near the machine's matmul bound", f">= {EMBEDDING_GOAL:.0%} of matmul"),
)
"""What each goal (numbered from 1) asks, and its target."""


def load() -> str:
    """The load average over 1, 5 and 15 minutes."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if "Model name" in line), "")
    return {
        "cpus (nproc)": str(os.cpu_count() or "?"),
        "cpu model (lscpu)": model or platform.processor() or "?",
        "python": platform.python_version(),
        "load average (1, 5, 15 min) at the end": load(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table and the blank line after it."""
    body = ["| " + " | ".join("" if cell is None else str(cell) for cell in row) + " |" for row in rows]
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *body, ""]


def _met(met: bool | None) -> str:
    return "" if met is None else "yes" if met else "**no**"


def _median(runs: list[dict[str, Any]], field: str) -> float | None:
    values = [float(r[field]) for r in runs if field in r]
    return statistics.median(values) if values else None


def latency_goal(row: dict[str, Any]) -> float:
    """The goal of a latency row: coherence within 1.05 x its bound, factscore and refine 1.10 x."""
    return COHERENCE_GOAL if row["workload"].startswith("coherence") else LATENCY_GOAL


def startup_seconds(startup: dict[str, Any]) -> dict[str, float | None]:
    """Median seconds: doctor to exit, refine to first progress, summarize (and a baseline's) to its request."""
    seconds = {
        "doctor exit": _median([r for r in startup.get("doctor", []) if r.get("rc") == 0], "exit_s"),
        "refine first progress line": _median(startup.get("refine", []), "first_progress_s"),
    }
    for key, name in (("summarize", FIRST_REQUEST), ("summarize_baseline", f"baseline: {FIRST_REQUEST}")):
        if startup.get(key):
            seconds[name] = _median(startup[key], "first_request_s")
    return seconds


def goals(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per goal: what was measured, measured / target (share / target for embedding), whether it is met."""
    found: dict[int, tuple[str, float | None, bool | None]] = {}
    if latency := [r for r in raw.get("latency") or [] if r.get("wall_s") and r.get("bound_s")]:
        worst = max(latency, key=lambda r: r["wall_s"] / r["bound_s"] / latency_goal(r))
        ratio, target = worst["wall_s"] / worst["bound_s"], latency_goal(worst)
        text = f"worst {ratio:.2f} x bound (goal {target:.2f}): {worst['workload']}"
        found[1] = (text, ratio / target, ratio <= target)
    if chains := [r for r in raw.get("summarize") or [] if r.get("ratio")]:
        worst = max(chains, key=lambda r: r["ratio"])
        text = f"worst {worst['ratio']:.2f} x bound: {worst['workload']}"
        found[2] = (text, worst["ratio"] / SEQUENTIAL_GOAL, worst["ratio"] <= SEQUENTIAL_GOAL)
    if checkpoint := raw.get("checkpoint"):
        ratio = float(checkpoint["ratio"])
        text = f"{ratio:.2f} x the final state ({checkpoint['document']})"
        found[3] = (text, ratio / CHECKPOINT_GOAL, ratio <= CHECKPOINT_GOAL)
    seconds = startup_seconds(raw.get("startup") or {})
    doctor, refine = seconds["doctor exit"], seconds["refine first progress line"]
    if doctor is not None and refine is not None:
        text = f"doctor {doctor:.2f} s, refine's first progress line {refine:.2f} s"
        ratio = max(doctor, refine) / STARTUP_GOAL_S
        if (first := seconds.get(FIRST_REQUEST)) is not None:
            text += f", summarize's first request {first:.2f} s (goal {FIRST_REQUEST_GOAL_S:g} s)"
            ratio = max(ratio, first / FIRST_REQUEST_GOAL_S)
        found[4] = (text, ratio, ratio <= 1)
    if embedding := raw.get("embedding"):
        share = float(embedding["share"])
        text = f"{share:.0%}: {embedding['achieved_gflops']} of {embedding['matmul']['bound_gflops']} GFLOP/s"
        found[5] = (text, share / EMBEDDING_GOAL, share >= EMBEDDING_GOAL)
    rows = []
    for number, (what, aim) in enumerate(GOALS, 1):
        text, ratio, met = found.get(number, ("not measured (part skipped)", None, None))
        rows.append({"goal": number, "what": what, "target": aim, "measured": text,
                     "ratio to target": None if ratio is None else round(ratio, 2), "met": met})  # fmt: skip
    return rows


def render(raw: dict[str, Any]) -> str:
    """The whole RESULTS.md from the benchmark's raw numbers (what ``RESULTS.json`` holds)."""
    goal_rows = [
        [r["goal"], r["what"], r["target"], r["measured"],
         "" if r["ratio to target"] is None else f"{r['ratio to target']:.2f}", _met(r["met"])]
        for r in goals(raw)
    ]  # fmt: skip
    return "\n".join(
        [
            "# Benchmark results",
            "",
            "Written by `storyjudge bench` (or `python -m eval.bench`); rerun it to refresh this file and",
            "`RESULTS.json`. The machine is shared and noisy: compare ratios measured in one session.",
            "",
            "## Goals",
            "",
            "Ratio: measured / target (the embedding share: share / target), so a goal is met at <= 1, or >= 1",
            "for the share. Each goal's numbers are in its section below.",
            "",
            *_table(["goal", "what", "target", "measured", "ratio", "met"], goal_rows),
            "## Machine",
            "",
            *_table(["", ""], [[key, value] for key, value in raw.get("machine", {}).items()]),
            *(_latency(raw["latency"], raw["settings"]) if raw.get("latency") else []),
            *(_summarize(raw["summarize"], raw["settings"]) if raw.get("summarize") else []),
            *(_checkpoint(raw["checkpoint"]) if raw.get("checkpoint") else []),
            *(_startup(raw["startup"]) if raw.get("startup") else []),
            *(_embedding(raw["embedding"]) if raw.get("embedding") else []),
        ]
    )


def _latency(rows: list[dict[str, Any]], settings: dict[str, Any]) -> list[str]:
    latency, slots = settings["latency"], settings["slots"]
    header = "workload|LLM calls|waves|bound s|measured s|client CPU s|ratio|met|result".split("|")
    table = [
        [r["workload"], r["calls"], r["waves"], f"{r['bound_s']:.2f}", f"{r['wall_s']:.2f}",
         r.get("client_cpu_s", ""), f"{r['wall_s'] / r['bound_s']:.2f}",
         _met(r["wall_s"] <= r["bound_s"] * latency_goal(r)), r["result"]]
        for r in rows
    ]  # fmt: skip
    return [
        f"## Latency against the critical-path bound (goal 1; L = {latency * 1000:.0f} ms, K = {slots})",
        "",
        "The scripted server, in its own process, waits L per call and serves K calls at once; each run has K",
        "in flight, on an empty LLM cache. The bound is L x the fewest waves of at most K calls that the calls'",
        "dependencies allow (`eval/bench/critical_path.py`). Client CPU: the CPU seconds of the benchmark's",
        "process during the run. Short runs are the median of three.",
        "",
        *_table(header, table),
    ]


def _summarize(rows: list[dict[str, Any]], settings: dict[str, Any]) -> list[str]:
    table = [
        [r["workload"], r["calls"], f"{r['bound_s']:.2f}", f"{r['wall_s']:.2f}",
         f"{r['ratio']:.2f}" if r["ratio"] else "", _met(r["ratio"] <= SEQUENTIAL_GOAL if r["ratio"] else None)]
        for r in rows
    ]  # fmt: skip
    return [
        f"## Summarizers against their critical-path bound (goal 2; L = {settings['latency'] * 1000:.0f} ms)",
        "",
        "Frankenstein summarized. Incremental updating is one chain of calls: its bound is L x calls.",
        "Hierarchical merging's is L x the longest chain of dependent calls in its tree, each merge also waiting",
        "until everything below it could have been served K at a time (`eval/bench/sequential.py`). `graph`",
        "times the graph in the benchmark's process; `process` times `python -m storyjudge summarize` from its",
        "start to its exit.",
        "",
        *_table(["workload", "LLM calls", "bound s", "measured s", "ratio", "met"], table),
    ]


def _checkpoint(checkpoint: dict[str, Any]) -> list[str]:
    ratio = float(checkpoint["ratio"])
    header = "checkpoints|checkpoints.sqlite kB|checkpoint_blobs kB|final state kB|result.json kB".split("|")
    row = [
        checkpoint["checkpoints"], f"{checkpoint['checkpoints_sqlite_bytes'] / 1e3:.0f}",
        f"{checkpoint['checkpoint_blobs_bytes'] / 1e3:.0f}", f"{checkpoint.get('final_state_bytes', 0) / 1e3:.0f}",
        f"{checkpoint['result_json_bytes'] / 1e3:.0f}", f"{ratio:.2f}", _met(ratio <= CHECKPOINT_GOAL),
    ]  # fmt: skip
    return [
        "## Checkpoints of a refine run (goal 3)",
        "",
        f"`storyjudge refine {checkpoint['document']}` against the scripted server: the checkpoint database",
        "plus the values it refers to (`checkpoint_blobs/`), over the run's final state (every graph's last",
        "checkpoint, serialized plainly); `result.json` beside.",
        "",
        *_table([*header, "ratio", "met"], [row]),
    ]


def _startup(startup: dict[str, Any]) -> list[str]:
    rows = []
    for what, value in startup_seconds(startup).items():
        goal = FIRST_REQUEST_GOAL_S if what == FIRST_REQUEST else STARTUP_GOAL_S
        met = None if value is None or what.startswith("baseline") else value <= goal
        rows.append([what, "" if value is None else f"{value:.2f}", _met(met)])
    return [
        "## Start-up (goal 4)",
        "",
        "Seconds from the process start, on a pseudo-terminal, median of "
        f"{len(startup.get('doctor', []))} run(s): `doctor`",
        "against a server answering its one call, to its exit; `refine` to its first progress line; `summarize",
        f"--strategy incremental` of a novel to its first request at the server (goal {FIRST_REQUEST_GOAL_S:g} s;",
        "a baseline checkout, when given, timed alternately with it).",
        "",
        *_table(["", "seconds", "met"], rows),
    ]


def _embedding(embedding: dict[str, Any]) -> list[str]:
    shape, share = embedding["shape"], float(embedding["share"])
    header = ["passages/s", "GFLOP per passage", "achieved GFLOP/s", "matmul GFLOP/s (bound)", "share", "met"]
    row = [
        embedding["passages_per_s"], embedding["gflop_per_passage"], embedding["achieved_gflops"],
        embedding["matmul"]["bound_gflops"], f"{share:.0%}", _met(share >= EMBEDDING_GOAL),
    ]  # fmt: skip
    return [
        "## Embedding against the machine's matmul bound (goal 5)",
        "",
        f"The default embedder ({shape['num_hidden_layers']} layers, hidden {shape['hidden_size']}, intermediate "
        f"{shape['intermediate_size']}) on {embedding['passages']} passages of {embedding['tokens_per_passage']}",
        f"tokens, {embedding['batch']} per call as indexing embeds them, on {embedding['threads']} torch threads",
        f"(torch {embedding['torch']}); FLOPs from the model's shape. The bound: float32 `torch.mm` on the same",
        "threads, the best of a few sizes (`eval/bench/embedding_bound.py`).",
        "",
        *_table(header, [row]),
    ]
