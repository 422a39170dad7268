"""``eval/bench/RESULTS.md``: the benchmark's numbers as Markdown tables, with the machine they came from."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from typing import Any

LATENCY_GOAL = 1.10
"""Goal 1: factscore and refine at 16 in flight within this factor of their dependency bound."""
COHERENCE_GOAL = 1.05
"""Goal 1: coherence scoring within this factor of its bound."""
SEQUENTIAL_GOAL = 1.10
"""Goal 2: a chain of dependent calls, process start included, within this factor of calls x latency."""
CHECKPOINT_GOAL = 3.0
"""Goal 3: a refine run's checkpoints (database and texts) at most this many times its result.json."""
STARTUP_GOAL_S = 3.0
"""Goal 4: seconds to doctor's exit and to refine's first progress line."""
EMBEDDING_GOAL = 0.60
"""Goal 5: the embedder's FLOP/s as a share of the machine's float32 matmul FLOP/s, at least this."""
WHY_SHORT = {
    "factscore": (
        "Each sentence is decomposed, retrieved and judged in its own branch, so no wave waits for another "
        "sentence; what is left is CPU work the bound does not count (the client CPU column), in one process "
        "whose threads share one interpreter lock. Most of it is embedding the fact queries: a verdict waits for "
        "its sentence's decomposition and then for its facts' query vectors, and the embedder, one pass of a "
        "sentence's facts at a time, is busy from the first decompositions' answers until the last facts' "
        "vectors, so the verdicts of the first wave after the decompositions reach the server a few at a time. "
        "The pass is compute (the thread's CPU time is most of its wall time), traced and outside the lock, "
        "which it takes back once a pass; a sentence's facts are searched in one Chroma call. Two passes at "
        "once, one per core, were no faster: the threads reading answers need the second core then. The 16 "
        "answers of a wave arrive together and are read one after the other under the lock, so the last of "
        "them waits for the others' client work."
    ),
    "refine": (
        "Segmentation, the CKG build, the index check, three retrieval rounds (the first embeds the fact "
        "queries) and the run record are CPU work between dependent stages. The summarizer's calls go before "
        "the extraction samples for a slot, and the slot each of its calls gives back is kept for its next "
        "call for a moment instead of going to a waiting sample. The first round's "
        "decompositions, which need only the summary, wait for the extraction's last, partly filled wave: "
        "factscore starts once the index subgraph and the summarizer have both returned (a LangGraph "
        "superstep ends when all of its tasks do), and the bound lets them share that wave. In each "
        "refinement round the rewritten "
        "sentence is decomposed in the first wave, and its verdicts wait for the unchanged sentences' "
        "cached verdicts, read under the same interpreter lock."
    ),
    "coherence": "",
}
SEQUENTIAL_SHORT = (
    "Where a process row misses the goal and its graph row does not, the difference is start-up: the process "
    "sends its first request after importing LangGraph, LangChain's messages and runnables (with langsmith), "
    "tiktoken and, when it builds the chat model, LangChain's OpenAI client and the OpenAI SDK (the floor "
    "above), then reading and chunking the document. Imports the first call needs run no faster side by side "
    "in threads (the interpreter lock). No embedder, torch or Chroma is imported, and the interpreter's "
    "teardown of those modules is skipped since the program exits once the command has returned."
)
HIERARCHICAL_SHORT = (
    "Where hierarchical merging misses its bound in the graph row itself, the tree is no longer the cause: "
    "chunk summaries and merges run as one dataflow, each merge sent once its group and the merge before it "
    "are known. What is left is CPU work the bound does not count: chunking the document before the first "
    "call, and the client work of reading each answer and sending the next, with the calls of a wave in one "
    "process whose threads share one interpreter lock. A slot is handed back when an answer arrives, so a "
    "chunk's regeneration may find it taken by a later chunk; the chunk summaries then end a little after the "
    "waves their calls need."
)
EMBEDDING_SHORT = (
    "Why short of the bound: in a profile of one forward pass of 32 passages of 128 tokens, the matrix "
    "products (`addmm`) take 60 % of the time and run below plain `mm` (each first copies the bias into its "
    "output: 13 %), and the rest is element-wise work, memory-bound and unfused: GELU 6 %, "
    "layer norms 5 %, residual adds 4 %, attention 8 %. The traced transformer runs the same operations. "
    "Passages are encoded under `torch.inference_mode`, each call's sorted by length; batches of 32 measured "
    "faster than 16 or 64."
)
COMMON_CAUSE = (
    "Each live call also costs Python client CPU (LangChain, the OpenAI SDK and httpx building the request "
    "and reading its response), serialised by the interpreter lock: {per_call}. "
    "Both costs are fixed per run and per call, so at a hosted model's latency (seconds per call) the ratio "
    "approaches 1."
)


FLOORS_TEXT = """
Floors (`eval/bench/floor.py`), measured after each run at K in flight: the floor posts the run's
own request bodies again, with the bound's dependencies and its highest-level-first order, from bare
HTTP connections on K threads that do nothing else: what this machine, loopback and the scripted
server cost. The method floor does the same and, once a decomposition is answered, retrieves its
facts' evidence for real (query embedding, Chroma, the CKG lines: the function a sentence's branch
calls) before its verdicts may go: the bound counts retrieval as free, but it is the method's own
compute on the path from a decomposition to its verdicts. x floor: measured / the method floor (the
floor where a run retrieves nothing): the part of the time that is storyjudge's own work."""


def _cell(value: Any) -> str:
    """A measured number with two decimals, or an empty cell where it was not measured."""
    return f"{float(value):.2f}" if value else ""


def client_cpu_per_call(row: dict[str, Any], rerun: dict[str, Any] | None) -> float | None:
    """Milliseconds of client CPU per live call: the run's CPU less its cached rerun's, over its calls."""
    if (
        not rerun
        or not row.get("calls")
        or row.get("client_cpu_s") is None
        or rerun.get("client_cpu_s") is None
    ):
        return None
    return 1000 * (float(row["client_cpu_s"]) - float(rerun["client_cpu_s"])) / int(row["calls"])


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    model = ""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next(
            (line.split(":", 1)[1].strip() for line in lscpu.splitlines() if "Model name" in line), ""
        )
    except OSError:
        pass
    memory = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            kb = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
        memory = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return {
        "cpus (nproc)": str(os.cpu_count() or "?"),
        "cpu model (lscpu)": model or platform.processor() or "?",
        "memory": memory or "?",
        "gpu": "none",
        "python": platform.python_version(),
        "load average (1, 5, 15 min) at the end": load,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join("" if cell is None else str(cell) for cell in row) + " |" for row in rows]
    return lines


def _repeats(row: dict[str, Any]) -> str:
    walls = row.get("repeats") or []
    return (
        f"; median of {len(walls)} runs: {', '.join(f'{w:.2f}' for w in walls)} s" if len(walls) > 1 else ""
    )


def _name(workload: str) -> str:
    return workload.split()[0].rstrip(",")


def latency_goal(row: dict[str, Any]) -> float:
    """The issue's goal for a latency row: coherence within 1.05 x its bound, factscore and refine 1.10 x."""
    return COHERENCE_GOAL if _name(row["workload"]) == "coherence" else LATENCY_GOAL


def floor_note(row: dict[str, Any]) -> str:
    """What a short latency row's floors say: how much of its time over the bound any client would spend."""
    if not row.get("over_floor"):
        return ""
    floor = _floor_ratio(row)
    which = "the method's floor (retrieval included)" if row.get("method_floor_s") else "the floor"
    verdict = (
        "already over the goal, so no client can meet it on this machine"
        if floor > latency_goal(row)
        else "within the goal"
    )
    return (
        f"The same calls from a client that does nothing but HTTP take {float(row['floor_s']):.2f} s; "
        f"{which} is {floor:.2f} x the bound, {verdict}; the run takes {float(row['over_floor']):.2f} x it."
    )


def _floor_ratio(row: dict[str, Any]) -> float:
    """The highest floor of a latency row (the method's, else the bare one) over its bound."""
    return float(row.get("method_floor_ratio") or row.get("floor_ratio") or 0)


def bound_of(row: dict[str, Any]) -> float:
    """A latency row's bound: the fewest waves the calls' dependencies allow (``critical_path.dependency_waves``)."""
    return float(row["bound_s"])


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def startup_seconds(startup: dict[str, Any]) -> dict[str, float | None]:
    """Median seconds of the runs: doctor to exit, refine to its first progress line, --help to exit."""
    return {
        "doctor exit": _median([float(r["exit_s"]) for r in startup.get("doctor", []) if r.get("rc") == 0]),
        "refine first progress line": _median(
            [float(r["first_progress_s"]) for r in startup.get("refine", []) if "first_progress_s" in r]
        ),
        "--help exit": _median([float(r["exit_s"]) for r in startup.get("help", []) if r.get("rc") == 0]),
    }


def goals(
    latency_rows: list[dict[str, Any]],
    summarize_rows: list[dict[str, Any]],
    checkpoint: dict[str, Any] | None,
    startup: dict[str, Any] | None,
    embedding: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """One row per goal of the performance issue: the goal, what was measured, its ratio, whether it is met.

    A goal whose part was skipped is listed as not measured. Ratios are measured / target, so <= 1 meets a goal
    with an upper limit; the embedding share is a lower limit, and its ratio is share / target (>= 1 meets it).
    """
    rows: list[dict[str, Any]] = []
    live = [r for r in latency_rows if "rerun" not in r["workload"] and r.get("wall_s")]
    widest = max((int(r["concurrency"]) for r in live), default=0)
    concurrent = [r for r in live if int(r["concurrency"]) == widest]
    if concurrent:
        worst = max(concurrent, key=lambda r: r["wall_s"] / bound_of(r) / latency_goal(r))
        ratio, target = worst["wall_s"] / bound_of(worst), latency_goal(worst)
        kind = "dependency bound" if worst.get("barrier_bound_s") else "bound"
        measured = (
            f"worst {ratio:.2f} x {kind} (goal {target:.2f}): {worst['workload']}, concurrency {widest}"
        )
        floored = [r for r in concurrent if r.get("over_floor")]
        if floored:
            measured += (
                "; against its floor (its calls from a bare client, retrieval included): "
                + ", ".join(
                    f"{_name(r['workload'])} {r['over_floor']:.2f} (floor {_floor_ratio(r):.2f} x bound)"
                    for r in floored
                )
            )
        rows.append(_goal(1, "latency within the critical-path bound",
                          f"<= {LATENCY_GOAL} x bound ({COHERENCE_GOAL} for coherence) at {widest} in flight",
                          measured, ratio / target, ratio <= target))  # fmt: skip
    else:
        rows.append(_goal(1, "latency within the critical-path bound",
                          f"<= {LATENCY_GOAL} x bound ({COHERENCE_GOAL} for coherence)"))  # fmt: skip
    chains = [r for r in summarize_rows if r.get("ratio")]
    if chains:
        worst = max(chains, key=lambda r: r["ratio"])
        measured = f"worst {worst['ratio']:.2f} x bound: {worst['workload']}"
        if worst.get("import_floor_s") is not None:
            measured += (
                f"; importing LangGraph and LangChain's OpenAI client alone takes {worst['import_floor_s']:.2f} s, "
                f"the goal leaves {start_up_room(worst):.2f} s"
            )
        rows.append(_goal(2, "sequential calls at the bound (L = 300 ms, process start included)",
                          f"<= {SEQUENTIAL_GOAL} x calls x L", measured,
                          worst["ratio"] / SEQUENTIAL_GOAL, worst["ratio"] <= SEQUENTIAL_GOAL))  # fmt: skip
    else:
        rows.append(_goal(2, "sequential calls at the bound", f"<= {SEQUENTIAL_GOAL} x calls x L"))
    if checkpoint:
        ratio = float(checkpoint["ratio"])
        measured = f"{ratio:.2f} x result.json ({checkpoint['document']})"
        rows.append(_goal(3, "lean checkpoints of a refine run", f"<= {CHECKPOINT_GOAL:g} x result.json",
                          measured, ratio / CHECKPOINT_GOAL, ratio <= CHECKPOINT_GOAL))  # fmt: skip
    else:
        rows.append(_goal(3, "lean checkpoints of a refine run", f"<= {CHECKPOINT_GOAL:g} x result.json"))
    seconds = startup_seconds(startup) if startup else {}
    doctor, refine = seconds.get("doctor exit"), seconds.get("refine first progress line")
    if doctor is not None and refine is not None:
        slowest = max(doctor, refine)
        measured = f"doctor {doctor:.2f} s, refine's first progress line {refine:.2f} s"
        rows.append(_goal(4, "start fast", f"<= {STARTUP_GOAL_S:g} s", measured, slowest / STARTUP_GOAL_S,
                          slowest <= STARTUP_GOAL_S))  # fmt: skip
    else:
        rows.append(_goal(4, "start fast", f"<= {STARTUP_GOAL_S:g} s"))
    if embedding:
        share = float(embedding["share"])
        measured = (
            f"{share:.0%}: {embedding['achieved_gflops']} of {embedding['matmul']['bound_gflops']} GFLOP/s"
        )
        rows.append(_goal(5, "indexing near the machine's matmul bound", f">= {EMBEDDING_GOAL:.0%} of matmul",
                          measured, share / EMBEDDING_GOAL, share >= EMBEDDING_GOAL))  # fmt: skip
    else:
        rows.append(
            _goal(5, "indexing near the machine's matmul bound", f">= {EMBEDDING_GOAL:.0%} of matmul")
        )
    return rows


def _goal(
    number: int,
    goal: str,
    target: str,
    measured: str = "",
    ratio: float | None = None,
    met: bool | None = None,
) -> dict[str, Any]:
    return {
        "goal": number,
        "what": goal,
        "target": target,
        "measured": measured or "not measured (part skipped)",
        "ratio to target": None if ratio is None else round(ratio, 2),
        "met": met,
    }


def _met(met: bool | None) -> str:
    return "" if met is None else "yes" if met else "**no**"


def _goals_section(rows: list[dict[str, Any]]) -> list[str]:
    return [
        "## Goals",
        "",
        "The performance goals, each from its section below. Ratio: measured / target (the embedding share:",
        "share / target), so the goal is met at <= 1, or >= 1 for the share.",
        "",
        *_table(
            ["goal", "what", "target", "measured", "ratio", "met"],
            [
                [
                    r["goal"],
                    r["what"],
                    r["target"],
                    r["measured"],
                    "" if r["ratio to target"] is None else f"{r['ratio to target']:.2f}",
                    _met(r["met"]),
                ]
                for r in rows
            ],
        ),  # fmt: skip
        "",
    ]


def _checkpoint_section(checkpoint: dict[str, Any] | None) -> list[str]:
    if not checkpoint:
        return []
    stored = checkpoint["checkpoints_sqlite_bytes"] + checkpoint["checkpoint_blobs_bytes"]
    ratio = float(checkpoint["ratio"])
    channels = checkpoint.get("checkpoint_values", {})
    top = ", ".join(f"{name} {size / 1e3:.0f} kB" for name, size in list(channels.items())[:4])
    return [
        "## Checkpoint size of a refine run (goal 3)",
        "",
        f"`storyjudge refine {checkpoint['document']}` against the scripted server, in its own process",
        "(`python -m eval.bench.checkpoint_size`): the checkpoint database plus the texts it refers to",
        f"(`checkpoint_blobs/`), against `result.json`. Goal: <= {CHECKPOINT_GOAL:g} x.",
        "",
        *_table(
            [
                "checkpoints",
                "write rows",
                "checkpoints.sqlite kB",
                "checkpoint_blobs kB",
                "result.json kB",
                "ratio",
                "met",
            ],
            [
                [
                    checkpoint["checkpoints"],
                    checkpoint["write_rows"],
                    f"{checkpoint['checkpoints_sqlite_bytes'] / 1e3:.0f}",
                    f"{checkpoint['checkpoint_blobs_bytes'] / 1e3:.0f}",
                    f"{checkpoint['result_json_bytes'] / 1e3:.0f}",
                    f"{ratio:.2f} ({stored / 1e3:.0f} kB stored)",
                    _met(ratio <= CHECKPOINT_GOAL),
                ]
            ],
        ),  # fmt: skip
        "",
        f"Largest channels in the checkpoints: {top or 'none'}.",
        "",
    ]


def _startup_section(startup: dict[str, Any] | None) -> list[str]:
    if not startup:
        return []
    seconds = startup_seconds(startup)
    deep = _median([float(r["exit_s"]) for r in startup.get("doctor_deep", []) if r.get("rc") == 0])
    rows = [
        [what, "" if value is None else f"{value:.2f}",
         "" if what == "--help exit" else f"<= {STARTUP_GOAL_S:g}",
         "" if value is None or what == "--help exit" else _met(value <= STARTUP_GOAL_S)]
        for what, value in seconds.items()
    ]  # fmt: skip
    if deep is not None:
        rows.append(["doctor --deep exit (loads and uses the embedder)", f"{deep:.2f}", "", ""])
    runs = max((len(v) for v in startup.values() if isinstance(v, list)), default=0)
    return [
        "## Start-up (goal 4)",
        "",
        "Seconds from the process start, on a pseudo-terminal (`python -m eval.bench.startup`), median of",
        f"{runs} run(s): `doctor` against a server answering its one call (it checks the embedder's and the",
        "embedded model's files; `--deep` loads and uses them), and `refine` to its first progress line.",
        "",
        *_table(["", "seconds", "goal", "met"], rows),
        "",
    ]


def _embedding_section(embedding: dict[str, Any] | None) -> list[str]:
    if not embedding:
        return []
    shape = embedding["shape"]
    matmul = embedding["matmul"]
    share = float(embedding["share"])
    document = embedding.get("document") or {}
    lines = [
        "## Embedding against the machine's matmul bound (goal 5)",
        "",
        f"The default embedder ({shape['num_hidden_layers']} layers, hidden {shape['hidden_size']}, intermediate "
        f"{shape['intermediate_size']}, {shape['num_attention_heads']} heads) on {embedding['passages']} passages",
        f"of {embedding['tokens_per_passage']} tokens, {embedding['batch']} per call as indexing embeds them "
        f"({embedding['encode_batch']} per forward pass), {embedding['threads']} torch threads, torch",
        f"{embedding['torch']} (`python -m eval.bench.embedding_bound`). FLOPs per passage from the model's",
        "shape: 2 x (4 h^2 + 2 h i) per token and layer, plus 4 s h for attention. The bound: float32",
        "`torch.mm` on the same threads, each size timed for a second, best of the rounds interleaved",
        "with the embedder's.",
        "",
        *_table(
            [
                "passages/s",
                "GFLOP per passage",
                "achieved GFLOP/s",
                "matmul GFLOP/s (bound)",
                "share",
                f"goal >= {EMBEDDING_GOAL:.0%}",
            ],
            [
                [
                    embedding["passages_per_s"],
                    embedding["gflop_per_passage"],
                    embedding["achieved_gflops"],
                    matmul["bound_gflops"],
                    f"{share:.0%}",
                    _met(share >= EMBEDDING_GOAL),
                ]
            ],
        ),  # fmt: skip
        "",
        *(
            [
                f"Per CPU second of the process (less exposed to another job taking a core now and then): "
                f"{embedding['achieved_gflop_per_cpu_s']} of {embedding['bound_gflop_per_cpu_s']} GFLOP, "
                f"{float(embedding['share_per_cpu_s']):.0%}.",
                "",
            ]
            if "share_per_cpu_s" in embedding
            else []
        ),
        "Matmul GFLOP/s by size (m x k x n): "
        + ", ".join(f"{size} {rate}" for size, rate in matmul["per_size_gflops"].items())
        + ".",
        "",
    ]
    if document:
        rates = document.get("passages_per_s", {})
        lines += [
            f"Work the run does not use: padding. {document['name']}'s {document['passages']} passages hold "
            f"{document['tokens']} tokens; in document order the",
            f"embedder would compute {document['padding_document_order']:.0%} more, in the order indexing embeds "
            f"them {document['padding_fill_order']:.0%} more. On {document['sample']} of them:",
            ", ".join(f"{name} {rate} passages/s" for name, rate in rates.items())
            + ". The CKG is not embedded; queries are embedded once per batch of searches.",
            "",
        ]
    if share < EMBEDDING_GOAL:
        lines += [EMBEDDING_SHORT, ""]
    return lines


def render(
    latency_rows: list[dict[str, Any]],
    overhead_rows: list[dict[str, Any]],
    embedded: dict[str, Any] | None,
    settings: dict[str, Any],
    started: dict[str, str],
    summarize_rows: list[dict[str, Any]] | None = None,
    *,
    checkpoint: dict[str, Any] | None = None,
    startup: dict[str, Any] | None = None,
    embedding: dict[str, Any] | None = None,
) -> str:
    """The whole RESULTS.md: the goals' table first, then the machine, then each part's section."""
    lines = [
        "# Benchmark results",
        "",
        "Written by `storyjudge bench` (or `python -m eval.bench`); rerun it to refresh this file. The",
        "machine is shared and noisy, so every ratio compares runs measured side by side in one session.",
        "",
        *_goals_section(goals(latency_rows, summarize_rows or [], checkpoint, startup, embedding)),
        "## Machine",
        "",
        *_table(["", ""], [[key, value] for key, value in machine().items()]),
        f"| load average at the start | {started.get('load', '?')} |",
        "",
    ]
    latency, slots = settings["latency"], settings["slots"]
    live = [r for r in latency_rows if "rerun" not in r["workload"]]
    barrier = any(r.get("barrier_bound_s") for r in live)
    floors = any(r.get("floor_s") for r in live)
    lines += (
        []
        if not live
        else [
            f"## Latency against the critical-path bound (L = {latency * 1000:.0f} ms, K = {slots} slots)",
            "",
            "The scripted server (its own process) waits L per call and serves K calls at once. The",
            "bound is L x the fewest waves of at most K calls that the calls' dependencies allow: a stage",
            "(extraction, merging, the refiner) waits for all before it, a verdict only for its own",
            "sentence's decomposition (and the first round's for the whole extraction too, the CKG), the",
            "first round's decompositions only for the summary, and the summarizer's stages only for the",
            "scenes, beside the extraction (`eval/bench/critical_path.py`); calls answered from the cache",
            "do not count. The",
            "barrier bound charges decomposing and judging as two stages, and the summarizer after the",
            "extraction, as a graph with barriers between them would. Goal at "
            f"{slots} in flight: measured / bound <= {LATENCY_GOAL} "
            f"({COHERENCE_GOAL} for coherence). Each run starts with an empty LLM",
            "cache; the index that factscore and refine search is built beforehand (embedding is in the",
            "overhead table), and each graph is compiled once before its runs, as a program compiles a",
            "module's graph once. Client CPU: the seconds of CPU that the benchmark's process (every thread) spent",
            "during the run, on a machine of "
            f"{os.cpu_count() or '?'} cores; the graph's Python work holds one interpreter lock.",
            *(FLOORS_TEXT.splitlines() if floors else []),
            "",
            *_table(
                [
                    "workload",
                    "concurrency",
                    "LLM calls",
                    "stages",
                    "waves",
                    "bound s",
                    *(["barrier bound s"] if barrier else []),
                    "measured s",
                    "client CPU s",
                    "ratio",
                    *(["floor s", "method floor s", "x floor"] if floors else []),
                    "result",
                ],
                [
                    [
                        r["workload"],
                        r["concurrency"],
                        r["calls"],
                        r["stages"],
                        r["waves"],
                        f"{r['bound_s']:.2f}",
                        *(
                            [f"{r['barrier_bound_s']:.2f}" if r.get("barrier_bound_s") else ""]
                            if barrier
                            else []
                        ),
                        f"{r['wall_s']:.2f}",
                        f"{r['client_cpu_s']:.2f}" if r.get("client_cpu_s") is not None else "",
                        f"{r['ratio']:.2f}" if r["ratio"] else "",
                        *(
                            [
                                _cell(r.get("floor_s")),
                                _cell(r.get("method_floor_s")),
                                _cell(r.get("over_floor")),
                            ]
                            if floors
                            else []
                        ),
                        r["result"] + _repeats(r),
                    ]
                    for r in live
                ],
            ),  # fmt: skip
            "",
            "Stages of each run (request kind: calls), in order; refine's summarizer stages are listed after",
            "the extraction, beside which they ran:",
            "",
            *[f"- {r['workload']}: {', '.join(r['stage_calls'])}" for r in live if r["concurrency"] == slots],
            "",
        ]
    )
    lines += _summarize_section(summarize_rows or [], latency)
    lines += _checkpoint_section(checkpoint)
    lines += _startup_section(startup)
    by_name: dict[str, dict[int, dict[str, Any]]] = {}
    for row in live:
        by_name.setdefault(_name(row["workload"]), {})[row["concurrency"]] = row
    speedups = [
        [name, f"{runs[1]['wall_s']:.2f}", f"{runs[slots]['wall_s']:.2f}",
         f"{runs[1]['wall_s'] / runs[slots]['wall_s']:.1f}x",
         f"{runs[1]['bound_s'] / runs[slots]['bound_s']:.1f}x"]
        for name, runs in by_name.items()
        if 1 in runs and slots in runs and runs[slots]["wall_s"]
    ]  # fmt: skip
    if speedups:
        lines += [
            "## Speed-up over sequential calls (the papers' code calls one at a time)",
            "",
            *_table(
                ["workload", "concurrency 1 s", f"concurrency {slots} s", "speed-up", "bound's speed-up"],
                speedups,
            ),
            "",
        ]
    reruns = [r for r in latency_rows if "rerun" in r["workload"]]
    if reruns:
        lines += [
            "## Rerun of an identical experiment (warm LLM cache)",
            "",
            *_table(
                ["workload", "LLM calls (goal 0)", "wall s", "first run s"],
                [
                    [
                        r["workload"].replace(" (rerun, warm cache)", ""),
                        r["calls"],
                        f"{r['wall_s']:.2f}",
                        by_name.get(_name(r["workload"]), {}).get(r["concurrency"], {}).get("wall_s", ""),
                    ]
                    for r in reruns
                ],
            ),  # fmt: skip
            "",
        ]
    if overhead_rows:
        lines += [
            "## Framework overhead: indexing with a zero-latency scripted model",
            "",
            "Segmentation, k = 3 extraction samples per scene (answered at once by the scripted server in",
            "its own process), name graph and CKG build, and embedding every passage with the default MiniLM",
            "embedder into an embedded Chroma store. The passages are embedded while the scenes are extracted:",
            "each stage's seconds are its own wall time, and the total is less than their sum. Each document",
            "runs in a fresh process; peak memory is its max RSS.",
            "",
            *_table(
                [
                    "document",
                    "words",
                    "scenes",
                    "LLM calls",
                    "passages",
                    "embedder load s",
                    "segment s",
                    "extraction s",
                    "CKG s",
                    "embed + index s",
                    "passages/s",
                    "total s",
                    "peak RSS MB",
                ],
                [
                    [
                        f"{r['document']} ({r['source']})",
                        r["words"],
                        r["scenes"],
                        r["llm_calls"],
                        r["passages"],
                        r["embedder_load_s"],
                        r["segment_s"],
                        r["extraction_s"],
                        r["ckg_s"],
                        r["embed_index_s"],
                        r["passages_per_s"],
                        r["total_s"],
                        r["peak_rss_mb"],
                    ]
                    for r in overhead_rows
                ],
            ),  # fmt: skip
            "",
        ]
    lines += _embedding_section(embedding)
    if embedded:
        lines += _embedded_section(embedded)
    short = [r for r in live if r["ratio"] and r["concurrency"] == slots and r["ratio"] > latency_goal(r)]
    lines += ["## Short of the goal, and why", ""]
    if not short:
        lines.append(f"Every run at {slots} in flight is within its goal.")
    reruns_by_name = {_name(r["workload"]): r for r in latency_rows if "rerun" in r["workload"]}
    for row in short:
        why = WHY_SHORT.get(_name(row["workload"]), "")
        rerun = reruns_by_name.get(_name(row["workload"]))
        fixed = (
            f"The same run with every answer cached (no LLM call) takes {rerun['wall_s']:.2f} s: that is the "
            f"run's own CPU work, of {row['wall_s'] - row['bound_s']:.2f} s over the bound."
            if rerun
            else ""
        )
        lines.append(
            f"- {row['workload']} at concurrency {row['concurrency']}: {row['ratio']:.2f} x the bound. "
            + " ".join(part for part in (why, fixed, floor_note(row)) if part)
        )
    if short:
        per_call = [
            f"{row['workload']} {ms:.1f} ms"
            for row in short
            if (ms := client_cpu_per_call(row, reruns_by_name.get(_name(row["workload"])))) is not None
        ]
        measured = (
            "in these runs, the run's client CPU less its cached rerun's, per call: " + ", ".join(per_call)
            if per_call
            else "not measured in these runs"
        )
        lines += ["", COMMON_CAUSE.format(per_call=measured)]
    lines.append("")
    return "\n".join(lines)


def _summarize_section(rows: list[dict[str, Any]], latency: float) -> list[str]:
    if not rows:
        return []
    return [
        f"## Summarizers against their critical-path bound (L = {latency * 1000:.0f} ms, Frankenstein)",
        "",
        "Incremental updating is one chain of dependent calls: its bound is L x calls. Hierarchical merging",
        "summarizes the chunks in parallel and merges each group once it is summarized, each merge after the",
        "previous one of its level: its bound is L x the longest chain of dependent calls in its tree, where a",
        "merge also waits until the calls of everything below it could have been served "
        f"{rows[0]['concurrency']} at a",
        "time. Attempts answered from the LLM cache (a request identical to an earlier one) take no wave.",
        "`graph` times the summarize graph in the benchmark's process (client made and graph compiled",
        "beforehand); `process` times",
        "`python -m storyjudge summarize` from its start to its exit (imports and client set-up included);",
        "for it, when the server sent its first answer (start-up, then one call's latency), and the seconds",
        "from the last answer to its exit (the run record, the statistics, the exit).",
        "",
        *_table(
            [
                "workload",
                "LLM calls",
                "bound s",
                "measured s",
                "ratio",
                "first answer at s",
                "last answer to exit s",
            ],
            [
                [
                    r["workload"],
                    r["calls"],
                    f"{r['bound_s']:.2f}",
                    f"{r['wall_s']:.2f}",
                    f"{r['ratio']:.2f}" if r["ratio"] else "",
                    r.get("first_answer_s", ""),
                    r.get("after_last_answer_s", ""),
                ]
                for r in rows
            ],
        ),  # fmt: skip
        "",
        *_import_floor(rows),
        *(
            [SEQUENTIAL_SHORT, ""]
            if any("(process)" in r["workload"] and (r["ratio"] or 0) > SEQUENTIAL_GOAL for r in rows)
            else []
        ),
        *(
            [HIERARCHICAL_SHORT, ""]
            if any(
                r["workload"] == "summarize hierarchical (graph)" and (r["ratio"] or 0) > SEQUENTIAL_GOAL
                for r in rows
            )
            else []
        ),
    ]


def start_up_room(row: dict[str, Any]) -> float:
    """Seconds a summarizer row's goal leaves over its bound: start-up, every call's client work and the exit."""
    return float(row["bound_s"]) * (SEQUENTIAL_GOAL - 1)


def _import_floor(rows: list[dict[str, Any]]) -> list[str]:
    """What the goal leaves a process for start-up, against what importing the framework alone takes here."""
    measured = next((r for r in rows if r.get("import_floor_s") is not None), None)
    if measured is None:
        return []
    room = [
        f"{r['workload'].replace(' (process)', '')} {start_up_room(r):.2f} s"
        for r in rows
        if "(process)" in r["workload"]
    ]
    return [
        f'The start-up floor of any such program: a fresh `python -c "{measured["import_floor"]}"` exits '
        f"after {measured['import_floor_s']:.2f} s here (median of 3). The goal leaves for start-up, every "
        f"call's client work and the exit together: {', '.join(room)}.",
        "",
    ]


def _embedded_section(embedded: dict[str, Any]) -> list[str]:
    """The embedded model through storyjudge vs llama.cpp directly, per wall second and per CPU second."""
    ours, raw = embedded["storyjudge"], embedded["llama_cpp_direct"]
    threads = embedded.get("threads")
    if isinstance(threads, dict):
        threads = ", ".join(f"{count} for {what}" for what, count in threads.items())
    rows = []
    for label, key in (
        ("prompt tokens/s", "prompt_tokens_per_s"),
        ("prompt tokens per CPU second", "prompt_tokens_per_cpu_s"),
        ("generation tokens/s", "generation_tokens_per_s"),
        ("generation tokens per CPU second", "generation_tokens_per_cpu_s"),
    ):
        mine, direct = ours.get(key), raw.get(key)
        if mine is None or direct is None:
            continue
        ratio = f"{mine / direct:.2f}" if mine and direct else ""
        rows.append([label, mine, direct, ratio])
    minilm = embedded.get("embedder_minilm_256_token_passages") or {}
    return [
        "## Embedded model (local:smollm2) through storyjudge vs llama.cpp directly",
        "",
        f"{embedded['model']}; threads: {threads}; the same GGUF file and context settings; token",
        "counts are the model's own (`python -m eval.bench.embedded_speed`). On a shared machine the",
        "per-CPU-second rates compare the two paths more fairly than wall-clock rates taken a minute apart.",
        "",
        *_table(["", "through storyjudge", "llama.cpp direct", "storyjudge / direct"], rows),
        "",
        f"Default embedder: {minilm.get('passages_per_s')} passages/s "
        f"(passages of ~{minilm.get('mean_passage_tokens')} tokens).",
        "",
    ]
