"""``storyjudge eval``: experiment grids, agreement with STORYSUMM labels, ROUGE on SQuALITY; every one resumes."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from storyjudge.apps.cli import COMMANDS, app
from storyjudge.apps.cli.common import cancel_on_ctrl_c, console, fail, failing, out, print_models, text_table
from storyjudge.apps.cli.options import Settings, field_help, model_settings, with_settings
from storyjudge.core.context import ConfigError
from storyjudge.core.llm import require_models
from storyjudge.core.usage import Usage, cost_text, merge_usage, totals


class _ConfigFirstGroup(TyperGroup):
    """``storyjudge eval CONFIG.yaml`` stands for ``storyjudge eval run CONFIG.yaml``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


eval_app = typer.Typer(name="eval", cls=_ConfigFirstGroup, help=COMMANDS["eval"][1], no_args_is_help=True)
app.add_typer(eval_app, name="eval")

OutDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--out-dir",
        help="Experiment directory (rows, records, tables, plots, LLM cache). "
        "Default: runs/eval-<file>-<hash>-<model>.",
    ),
]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", "-n", help="Use only the first N items of the file. Default: all.")
]
ParallelItemsOpt = Annotated[
    int,
    typer.Option(
        "--parallel-items",
        help="Items evaluated at once (the LLM calls in flight are bounded by --concurrency).",
    ),
]
# as every command declares it; unset, the experiment config's value holds
ConcurrencyOpt = Annotated[int | None, typer.Option("--concurrency", "-j", help=field_help("concurrency"))]

ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="Where items run: 'local' (threads of this process) or 'dask' (a task per item on a Dask "
        "cluster; --concurrency is then the total of LLM calls in flight across it). Default: local.",
    ),
]
SchedulerOpt = Annotated[
    str,
    typer.Option(
        "--scheduler",
        help="With --executor dask: the scheduler's address (tcp://HOST:PORT) of a running cluster. "
        "Default: start a cluster of 2 worker processes on 127.0.0.1 for this run.",
    ),
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Estimate LLM calls, tokens and USD; call no model. Default: off.")
]
# the settings of every item's run that the shortcuts take as options (any other: --set)
SCORING = ("concurrency", "ckg_samples", "retrieval_k", "evidence_tokens", "coverage_floor", "preset")


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _print_estimate(estimate: dict[str, Any]) -> None:
    total = {**estimate["total"], "cell": "total", "resolved_model": "", "items": ""}
    keys = ("cell", "resolved_model", "items", "calls", "input_tokens", "output_tokens")
    rows = [
        [
            *(escape(str(row[key])) for key in keys),
            "unknown price" if row["usd"] is None else _fmt(row["usd"]),
        ]
        for row in [*estimate["cells"], total]
    ]
    columns = ("cell", "model", "items", "calls", "input tokens", "output tokens", "USD")
    out.print(text_table("Dry run: estimated LLM work", columns, rows))
    for line in estimate["assumptions"]:
        out.print(f"  assumption: {line}", markup=False)


# The columns that fit a terminal; summary.md and summary.csv hold every column.
SUMMARY_COLUMNS = {
    "score": (
        *("ok", "nfs", "nfs_coverage", "nfs_unreliable", "coherence", "coherence_coverage"),
        "coherence_unreliable",
        *("balanced_accuracy", "cohens_kappa", "calls", "wall_seconds"),
    ),
    "refine": (
        *("ok", "nfs_initial", "nfs_best", "nfs_best_coverage", "nfs_best_unreliable"),
        *("coherence_best", "rouge1_best", "calls", "wall_seconds"),
    ),
}


def _print_summary(table_rows: list[dict[str, Any]], diffs: list[dict[str, Any]] | None = None) -> None:
    """The cells side by side (a column each, scores with their 95% intervals), then the paired differences."""
    from storyjudge.core.intervals import interval_text, signed_text

    def cell(line: dict[str, Any], key: str) -> str:
        if f"{key}_ci95" in line and isinstance(line.get(key), float | None):
            return interval_text(line.get(key), line[f"{key}_ci95"])
        return _fmt(line.get(key))

    number: dict[str, str] = {}
    for task in dict.fromkeys(str(line.get("task")) for line in table_rows):
        lines = [line for line in table_rows if str(line.get("task")) == task]
        names = [f"cell {n}" for n in range(1, len(lines) + 1)]
        number |= {str(line["cell"]): name for line, name in zip(lines, names, strict=True)}
        scores = [key for key in SUMMARY_COLUMNS.get(task, ()) if any(key in line for line in lines)]
        keys = ("cell", "dataset", "model", "strategy", "chunk_size", "loop", *scores)
        shown = ([key, *(cell(line, key) for line in lines)] for key in keys)
        out.print(text_table(f"{task} cells (means over items, 95% bootstrap interval)", ["", *names], shown))
    if diffs:
        rows = []
        for diff in diffs:
            a, b = number.get(diff["cell_a"], diff["cell_a"]), number.get(diff["cell_b"], diff["cell_b"])
            words = (diff["metric"], diff["setting"], f"{diff['from']} -> {diff['to']}", diff["items"])
            difference = signed_text(diff["difference"], diff["ci95"])
            excludes = "yes" if diff["excludes_zero"] else "no"
            rows.append(
                [a if a == b else f"{a} -> {b}", *(escape(str(w)) for w in words), difference, excludes]
            )
        columns = ("cells", "metric", "setting", "from -> to", "items", "difference [95% CI over items]")
        title = "Paired differences over the same items (second minus first)"
        out.print(text_table(title, (*columns, "excludes 0"), rows))


def _missing_scores(table_rows: list[dict[str, Any]], metrics: Any) -> list[str]:
    """Why a cell shows no score for a metric it asked for: never a blank without a word."""
    notes = []
    for n, line in enumerate(table_rows, start=1):
        for key, name in (("nfs", "factscore"), ("coherence", "coherence")):
            if name not in metrics or key not in line or line.get(key) is not None or not line.get("ok"):
                continue
            coverage = line.get(f"{key}_coverage")
            share = f" (mean coverage {coverage:.0%})" if isinstance(coverage, (int, float)) else ""
            notes.append(
                f"cell {n} ({line.get('cell')}): no {key} score: {line.get(f'{key}_unreliable', 0)} of "
                f"{line['ok']} item(s) did not count{share}: too few units got a readable answer, or the "
                "judge check failed; rows.jsonl has each item's errors."
            )
    return notes


EXECUTORS = ("local", "dask")


def _executor(config: Any, name: str, scheduler: str) -> Any:
    """The executor the options ask for (None: the runner's local default)."""
    if name not in EXECUTORS:
        fail(f"--executor must be one of {', '.join(EXECUTORS)}, not {name!r}")
    if name == "local":
        if scheduler:
            fail("--scheduler needs --executor dask")
        return None
    from eval.cluster import DaskExecutor, llm_total

    console.print(
        f"Starting Dask ({scheduler or 'a local cluster on 127.0.0.1'}); "
        f"{llm_total(config)} LLM call(s) in flight across the cluster."
    )
    try:
        return DaskExecutor(config, scheduler, width=config.concurrency if config.concurrency > 1 else None)
    except ConfigError as exc:
        fail(str(exc))
    except (OSError, TimeoutError) as exc:
        fail(f"cannot reach the Dask scheduler at {scheduler}: {exc}. Check --scheduler.")


def _run(config: Any, *, dry_run: bool, print_agreement: bool, executor: str, scheduler: str) -> None:
    from eval.grid import cell_context, cells
    from storyjudge.core.models import resolve_spec
    from storyjudge.core.servercheck import check_server

    if executor == "dask":  # every worker must find the same directory (a shared file system)
        config.out_dir = Path(config.out_dir).resolve()
    print_models(cell_context(config, cells(config)[0], config.out_dir))
    if dry_run:
        from eval.estimate import estimate

        with failing(ValueError):  # a dataset file that does not read
            _print_estimate(estimate(config))
        return
    # the servers first, before the runner's imports (the graphs, the metrics): a dead one is named at once
    roles = ["extractor", "decomposer", "judge"]
    if config.task == "refine":
        roles += ["summarizer", "refiner"]
    if "coherence" in config.metrics:
        roles.append("coherence")
    looked_at: set[tuple[str, ...]] = set()  # each server once, before any item
    for cell in cells(config):
        ctx = cell_context(config, cell, config.out_dir)
        specs = {resolve_spec(ctx, role) for role in roles}
        with failing(ConfigError):
            require_models(ctx, roles)
            if (ctx.base_url, *sorted(specs)) not in looked_at:
                looked_at.add((ctx.base_url, *sorted(specs)))
                check_server(ctx, specs)
    from eval.runner import Experiment, finish

    experiment = Experiment(config)
    planned = f"{len(cells(config))} cell(s), {len(experiment.plan())} item run(s)"
    console.print(f"Experiment {config.name}: {planned} -> {config.out_dir}", markup=False)

    def on_row(row: dict[str, Any], done: int, total: int) -> None:
        error = escape(str(row.get("error", "error")))
        status = row["status"] if row["status"] == "ok" else f"[red]{error}[/]"
        usage = row["usage_totals"]
        console.print(
            f"\\[{done}/{total}] {escape(row['cell'])} {escape(str(row['item']['id']))}: {status} "
            f"({usage['calls']} calls, {usage['cache_hits']} cached, {row['wall_seconds']:.1f}s)",
            highlight=False,
        )

    runner = _executor(config, executor, scheduler)
    stopped = "\n[yellow]Stopped.[/] Finished items are saved; rerun the same command to resume."
    # Ctrl-C cancels the calls not yet sent, then exits 130
    with failing(ValueError), cancel_on_ctrl_c(stopped):
        outcome = experiment.run(on_row=on_row, executor=runner)
    if outcome.stopped:
        console.print(
            f"[yellow]Stopped early:[/] {escape(outcome.stopped)}. Rerun the same command to continue."
        )
    result = finish(outcome, config)
    _print_summary(result["table"], result.get("differences"))
    for note in _missing_scores(result["table"], config.metrics):
        out.print(f"  note: {note}", markup=False)
    if print_agreement:
        for cell_id, report in result["agreements"].items():
            _print_agreement(cell_id, report)
    merged: Usage = {}  # per model spec: a cost is known or not per model
    for row in outcome.rows:
        merged = merge_usage(merged, row.get("usage"))
    usage = totals(merged)
    failed = sum(1 for r in outcome.rows if r.get("status") != "ok")
    out.print(
        f"Ran {outcome.ran} item(s), skipped {outcome.skipped} already done, {failed} failed; "
        f"wall {outcome.wall_seconds:.1f}s this run."
    )
    out.print(
        f"LLM usage over the whole experiment: {usage['calls']} calls (cache hits {usage['cache_hits']}, "
        f"failures {usage['failures']}), tokens {usage['input_tokens']} in / {usage['output_tokens']} out, "
        f"est. {cost_text(merged)}"
    )
    for note in result["plot_notes"]:
        out.print(f"  plot not drawn: {note}", markup=False)
    out.print("Wrote: " + ", ".join(str(p) for p in result["files"]), markup=False)


def _print_agreement(cell_id: str, report: dict[str, Any]) -> None:
    from eval.storysumm import table_lines

    columns = ("level", "metric", "value [95% bootstrap CI]")
    out.print(text_table(f"Agreement with human labels ({cell_id})", columns, table_lines(report)))
    summary_level = report.get("summary_level") or {}
    boot = (summary_level.get("table") or {}).get("bootstrap") or {}
    out.print(
        f"Items: {report['items']}, scored {report['scored']}, failed {report['failed']}. Positive class: "
        f"unfaithful. Bootstrap: {boot.get('resamples', '?')} resamples, seed {boot.get('seed', '?')} "
        "(sentences resampled by summary)."
    )
    sweep = (summary_level.get("threshold_sweep") or {}).get("rows") or []
    if sweep:
        keys = ("predicted_unfaithful", "balanced_accuracy", "cohens_kappa")
        rows = [[f"{row['threshold']:.3f}", *(_fmt(row[key]) for key in keys)] for row in sweep]
        title = "Threshold sweep on NFS: unfaithful if NFS < t (diagnostic only)"
        out.print(text_table(title, ("t", "predicted unfaithful", "balanced accuracy", "kappa"), rows))
        out.print("  Picking the best t here and reporting it would be tuning on this data; it is not done.")
    for note in report.get("notes", []):
        out.print(f"  note: {note}", markup=False)


@eval_app.command("run")
def run_command(
    config: Annotated[Path, typer.Argument(help="Experiment config (.yaml, .yml or .json).")],
    dry_run: DryRunOpt = False,
    parallel_items: Annotated[
        int | None,
        typer.Option(
            "--parallel-items",
            help="Items evaluated at once. Default: the config's concurrency (1 when it has none; "
            "with --executor dask, the cluster's worker threads).",
        ),
    ] = None,
    concurrency: ConcurrencyOpt = None,
    executor: ExecutorOpt = "local",
    scheduler: SchedulerOpt = "",
) -> None:
    """Run an experiment grid (datasets x models x strategies x chunk sizes x loops); resumes if rerun."""
    from eval.grid import load_config

    with failing(ValueError):
        experiment = load_config(config)
    if parallel_items is not None:
        experiment.concurrency = max(1, parallel_items)
    if concurrency is not None:
        experiment.context["concurrency"] = max(1, concurrency)
    _run(experiment, dry_run=dry_run, print_agreement=True, executor=executor, scheduler=scheduler)


def _shortcut(
    kind: str,
    metrics: Callable[..., list[str]],
    *,
    settings: Settings,
    out_dir: Path | None,
    limit: int | None,
    parallel_items: int,
    dry_run: bool,
    executor: str,
    scheduler: str,
    **given: Any,
) -> None:
    """``eval KIND``: its dataset's items through ``_run``; ``given``, the arguments of its metrics function."""
    from eval.datasets import load, resolve
    from eval.grid import shortcut_config

    with failing(ValueError):
        file = resolve(given["file"], kind)
        dataset = load(kind, file)
    for note in dataset.notes:
        console.print(f"[yellow]data note:[/] {escape(note)}", highlight=False)
    settings.context()  # a bad value fails here with one line
    context = settings.values()
    model, base_url = str(context.pop("model", "")), str(context.pop("base_url", ""))
    options: dict[str, Any] = {"out_dir": out_dir, "limit": limit, "concurrency": parallel_items}
    with failing(ValueError):
        config = shortcut_config(
            kind, file, model=model, base_url=base_url, metrics=metrics(**given), context=context, **options
        )
    started = time.perf_counter()
    _run(config, dry_run=dry_run, print_agreement=kind == "storysumm", executor=executor, scheduler=scheduler)
    if not dry_run:
        out.print(
            f"Total wall time {time.perf_counter() - started:.1f}s. Rows: {config.out_dir / 'rows.jsonl'}"
        )


def _storysumm(
    file: Annotated[
        str,
        typer.Argument(
            metavar="DATASET",
            help="STORYSUMM-format JSON, or a dataset name: storysumm (the bundled val split), storysumm:test.",
        ),
    ],
    coherence: Annotated[
        bool, typer.Option("--coherence/--no-coherence", help="Also run BooookScore on each summary.")
    ] = False,
) -> list[str]:
    """Agreement of NarrativeFactScore with STORYSUMM's human labels (summary and sentence level)."""
    return ["factscore", "stats"] + (["coherence"] if coherence else [])


def _squality(
    file: Annotated[
        str,
        typer.Argument(
            metavar="DATASET",
            help="SQuALITY-format JSON lines, or a dataset name: squality (the bundled dev split), squality:test.",
        ),
    ],
    bertscore: Annotated[
        bool,
        typer.Option(
            "--bertscore",
            help="Also BERTScore (needs STORYJUDGE_BERTSCORE_MODEL, a local model). Default: off.",
        ),
    ] = False,
) -> list[str]:
    """Summarize and refine each story, then ROUGE-1/2/L against the question-1 reference plot summaries."""
    return ["factscore", "rouge", "stats"] + (["bertscore"] if bertscore else [])


def _add_shortcut(kind: str, metrics: Callable[..., list[str]], names: tuple[str, ...]) -> None:
    """Register ``eval KIND``: the metrics function's arguments, the options every shortcut shares, the settings."""
    shared = {
        "out_dir": (OutDirOpt, None),
        "limit": (LimitOpt, None),
        "parallel_items": (ParallelItemsOpt, 1),
        "dry_run": (DryRunOpt, False),
        "executor": (ExecutorOpt, "local"),
        "scheduler": (SchedulerOpt, ""),
    }
    body = partial(_shortcut, kind, metrics)
    eval_app.command(kind)(with_settings(*names, extra=shared, body=body)(metrics))


_add_shortcut(
    "storysumm", _storysumm, (*model_settings("extractor", "decomposer", "judge", "coherence"), *SCORING)
)
_add_shortcut(
    "squality",
    _squality,
    (
        *model_settings("extractor", "summarizer", "decomposer", "judge", "refiner"),
        *SCORING,
        *("strategy", "chunk_size", "max_summary_tokens", "max_iterations"),
    ),
)
