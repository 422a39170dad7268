"""The experiment runner: every (cell, item) of a grid through the graphs, resumable and cached.

One row per (cell, item) goes to ``rows.jsonl``, the full graph output to ``records/``; a rerun skips ``ok``
rows and shares one LLM cache, so an interrupted run resumes without paying twice. A ``budget`` stops new items
(running ones finish). An unreachable model or bad setting stops the run; any other failure of an item is an
``error`` row. Only the driver writes rows, whether items run in threads or on Dask (``eval.cluster``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import prompts
from eval.datasets import Dataset, EvalItem
from eval.grid import Cell, DatasetSpec, ExperimentConfig, cell_context, cells
from eval.storysumm import coherence_sentence_predictions, sentence_predictions, summary_prediction
from storyjudge.core import heavy_imports
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.llm import ModelError
from storyjudge.core.memory import release_freed
from storyjudge.core.models import resolve_spec
from storyjudge.core.passages import record_passages
from storyjudge.core.rundir import slug
from storyjudge.core.scenestore import still_there
from storyjudge.core.summary_stats import summary_stats
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import merge_usage, totals

GraphInvoker = Callable[[str, dict[str, Any], Context], dict[str, Any]]

METRIC_MODULES = ("eval.metrics", "rouge_score.rouge_scorer")
"""What ROUGE imports (numpy, NLTK's stemmer): imported before an item's threads could import it at once."""


def record_name(item_id: str) -> str:
    """A file name no other id shares: a readable slug, then a short hash of the exact id."""
    return f"{slug(item_id)}-{hashlib.sha256(item_id.encode()).hexdigest()[:8]}"


def invoke_graph(name: str, graph_input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Run one of the project's compiled graphs (``graphs.<name>.graph``) to completion."""
    return dict(importlib.import_module(f"graphs.{name}").graph.invoke(graph_input, context=ctx))


class Budget:
    """LLM calls and dollars spent so far (earlier runs included); says when a limit is reached.

    Unlocked: only the driver (``Experiment.run``) counts and asks, whichever executor runs the items.
    """

    def __init__(self, limits: Mapping[str, float]) -> None:
        self.limits = dict(limits)
        self.calls = 0
        self.usd = 0.0

    def add(self, usage_totals: Mapping[str, Any]) -> None:
        """Count one item's spending."""
        self.calls += int(usage_totals.get("calls", 0))
        self.usd += float(usage_totals.get("cost_usd", 0.0))

    def exhausted(self) -> str | None:
        """Why no new item may start, or None."""
        if "max_calls" in self.limits and self.calls >= self.limits["max_calls"]:
            return f"budget of {int(self.limits['max_calls'])} LLM calls spent ({self.calls})"
        if "max_usd" in self.limits and self.usd >= self.limits["max_usd"]:
            return f"budget of ${self.limits['max_usd']:.2f} spent (${self.usd:.2f})"
        return None


class RowLog:
    """Append-only JSONL of finished items (the driver alone writes); each line is on disk before it counts."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[dict[str, Any]]:
        """Every row written so far; a torn last line (a killed run) is ignored."""
        rows = []
        for line in self.path.read_text(encoding="utf-8").splitlines() if self.path.exists() else []:
            with contextlib.suppress(json.JSONDecodeError):
                rows.append(json.loads(line))
        return rows

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row durably."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def latest_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The last row of each (cell, item): a retried item replaces its earlier failure."""
    return list({(row["cell"], row["item"]["id"]): dict(row) for row in rows}.values())


ItemOutcome = tuple[str, Any]
"""``("row", row)``, ``("fatal", why)`` (stop the experiment) or ``("error", why)`` (the item did not come back)."""


def group_key(cell: Cell, item: EvalItem) -> tuple[str, str]:
    """Items with one key share a run directory (a narrative and its index, within one cell)."""
    return (cell.id, item.group or item.id)


class ItemExecutor(Protocol):
    """Where items run; ``exclusive_groups``: items of one group must not run at once (separate processes)."""

    width: int
    exclusive_groups: bool

    def submit(self, cell: Cell, item: EvalItem) -> None:
        """Start one item."""

    def next_done(self) -> tuple[Cell, EvalItem, ItemOutcome]:
        """Wait for any started item to finish."""
        ...

    def close(self) -> None:
        """Cancel what has not started; free threads or the cluster connection."""


class LocalExecutor:
    """Items in threads of this process (``width`` at once; with 1, each runs in the caller's thread)."""

    exclusive_groups = False  # items of one story wait for its index under a lock of the experiment

    def __init__(self, experiment: Experiment, width: int = 1) -> None:
        self.experiment = experiment
        self.width = max(1, width)
        self._pool = (
            ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="eval") if self.width > 1 else None
        )
        self._inline: list[tuple[Cell, EvalItem]] = []
        self._done: queue.Queue[tuple[Cell, EvalItem, ItemOutcome]] = queue.Queue()

    def submit(self, cell: Cell, item: EvalItem) -> None:
        """Start one item in a thread (or queue it for the caller's thread)."""
        if self._pool is None:
            self._inline.append((cell, item))
            return

        def work() -> None:
            try:
                outcome = self.experiment.attempt(cell, item)
            except BaseException as exc:  # noqa: BLE001 - the driver must hear of every item
                outcome = ("error", f"{type(exc).__name__}: {exc}")
            self._done.put((cell, item, outcome))

        self._pool.submit(work)

    def next_done(self) -> tuple[Cell, EvalItem, ItemOutcome]:
        """The next finished item."""
        if self._inline:
            cell, item = self._inline.pop(0)
            return cell, item, self.experiment.attempt(cell, item)
        return self._done.get()

    def close(self) -> None:
        """Cancel items not started; running ones finish in their threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class RunOutcome:
    """What one invocation of the runner did."""

    rows: list[dict[str, Any]]  # latest row of every planned (cell, item), from this run or earlier ones
    ran: int
    skipped: int
    stopped: str | None
    wall_seconds: float


class Experiment:
    """Runs an :class:`ExperimentConfig`; ``invoke`` can be replaced to run without the real graphs."""

    def __init__(self, config: ExperimentConfig, *, invoke: GraphInvoker | None = None) -> None:
        self.config = config
        self.invoke = invoke or invoke_graph
        self.out = config.out_dir
        self.log = RowLog(self.out / "rows.jsonl")
        self._index_locks: dict[tuple[str, str], threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._datasets: dict[DatasetSpec, Dataset] = {}

    def dataset(self, spec: DatasetSpec) -> Dataset:
        """A dataset, loaded once."""
        if spec not in self._datasets:
            self._datasets[spec] = spec.load()
        return self._datasets[spec]

    def plan(self, max_cells: int | None = None) -> list[tuple[Cell, EvalItem]]:
        """Every (cell, item) pair in grid order (the first ``max_cells`` cells only, when given)."""
        grid = cells(self.config)[:max_cells]
        return [(cell, item) for cell in grid for item in self.dataset(cell.dataset).items]

    def run(
        self,
        *,
        max_cells: int | None = None,
        on_row: Callable[[dict[str, Any], int, int], None] | None = None,
        executor: ItemExecutor | None = None,
    ) -> RunOutcome:
        """Run every pending (cell, item) on ``executor`` (default: threads); ``on_row(row, done, planned)``."""
        started = time.perf_counter()
        self.out.mkdir(parents=True, exist_ok=True)
        self._write_config()
        previous = latest_rows(self.log.read())
        done = {(r["cell"], r["item"]["id"]) for r in previous if r.get("status") == "ok"}
        budget = Budget({str(key): value for key, value in self.config.budget.items()})
        for row in previous:
            budget.add(row.get("usage_totals") or {})
        plan = self.plan(max_cells)
        queue = [(c, i) for c, i in plan if (c.id, i.id) not in done]
        skipped = finished = len(plan) - len(queue)
        runner = executor or LocalExecutor(self, self.config.concurrency)
        stopped: str | None = None
        busy: set[tuple[str, str]] = set()  # (cell, group) of items in flight, where groups are exclusive
        busy_items: set[tuple[str, str]] = set()
        exclusive = runner.exclusive_groups

        def start_more() -> None:
            nonlocal stopped
            while queue and not stopped and len(busy_items) < runner.width:
                stopped = budget.exhausted()
                free = [n for n, (c, i) in enumerate(queue) if not (exclusive and group_key(c, i) in busy)]
                if stopped or not free:
                    return
                cell, item = queue.pop(free[0])
                busy.add(group_key(cell, item))
                busy_items.add((cell.id, item.id))
                runner.submit(cell, item)

        try:
            start_more()
            while busy_items:
                cell, item, (kind, value) = runner.next_done()
                busy_items.discard((cell.id, item.id))
                busy.discard(group_key(cell, item))
                if kind == "fatal":  # retrying other items cannot help: start no more
                    stopped = stopped or str(value)
                else:
                    row = value if kind == "row" else self.failed_row(cell, item, str(value))
                    budget.add(row["usage_totals"])
                    self.log.append(row)
                    finished += 1
                    if on_row:
                        on_row(row, finished, len(plan))
                start_more()
        finally:
            runner.close()
        planned = {(c.id, i.id) for c, i in plan}  # a smaller --limit or grid than an earlier run's
        rows = [r for r in latest_rows(self.log.read()) if (r["cell"], r["item"]["id"]) in planned]
        return RunOutcome(rows, finished - skipped, skipped, stopped, time.perf_counter() - started)

    def attempt(self, cell: Cell, item: EvalItem, *, own_cache: bool = False) -> ItemOutcome:
        """Run one item: ``("row", row)``, or ``("fatal", why)`` when its model or settings are unusable."""
        try:
            return ("row", self.run_item(cell, item, own_cache=own_cache))
        except (ModelError, ConfigError) as exc:
            return ("fatal", f"{type(exc).__name__}: {exc}")
        finally:
            release_freed()  # a process runs item after item (a Dask worker too): what this one freed goes back

    def _write_config(self) -> None:
        record = {
            "name": self.config.name,
            "task": self.config.task,
            "metrics": self.config.metrics,
            "cells": [{"id": c.id, **c.params} for c in cells(self.config)],
            "context": self.config.context,
            "cache_dir": str(self.config.cache_path),
            "prompts": prompts.versions(str(self.config.context.get("prompt_dir") or "")),
        }
        (self.out / "experiment.json").write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")

    def item_context(self, cell: Cell, item: EvalItem, *, own_cache: bool = False) -> Context:
        """An item's Context: its group's run directory (shared index) and, on a cluster, its own cache file."""
        run_dir = self.out / "runs" / cell.id / record_name(item.group or item.id)
        ctx = cell_context(self.config, cell, run_dir)
        if own_cache:
            ctx = ctx.replace(cache_dir=str(run_dir / "cache" / record_name(item.id)))
        return ctx

    def _base_row(self, cell: Cell, item: EvalItem, ctx: Context) -> dict[str, Any]:
        return {
            "experiment": self.config.name,
            "cell": cell.id,
            **cell.params,
            "context": {k: v for k, v in ctx.public_dict().items() if k not in ("run_dir", "cache_dir")},
            "resolved_model": resolve_spec(ctx, "judge"),
            "item": {"id": item.id, "group": item.group, "title": item.title, "dataset": item.dataset},
            "labels": {
                "summary": item.summary_label,
                "sentences": item.sentence_labels,
                "coherence": item.coherence_labels,
            },
            "notes": list(item.notes),
            "status": "ok",
            "usage": {},
        }

    def failed_row(self, cell: Cell, item: EvalItem, error: str) -> dict[str, Any]:
        """The ``error`` row of an item that did not come back (its worker died too often, say)."""
        row = self._base_row(cell, item, self.item_context(cell, item))
        row.update(status="error", error=error, usage_totals=totals({}), wall_seconds=0.0)
        row["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return row

    def run_item(self, cell: Cell, item: EvalItem, *, own_cache: bool = False) -> dict[str, Any]:
        """Run one item of one cell and return its row (a failure of the item becomes an ``error`` row)."""
        started = time.perf_counter()
        ctx = self.item_context(cell, item, own_cache=own_cache)
        row = self._base_row(cell, item, ctx)
        record: dict[str, Any] = {}
        # items run in threads (here and on a Dask worker): the metrics' heavy imports happen once, in turn
        heavy_imports.load_before_branches(modules=METRIC_MODULES if "rouge" in self.config.metrics else ())
        try:
            if cell.task == "refine":
                self._refine_item(cell, item, ctx, row, record)
            else:
                self._score_item(cell, item, ctx, row, record)
        except (ModelError, ConfigError):
            raise
        except Exception as exc:  # noqa: BLE001 - one bad item must not end the experiment; it is recorded
            row.update(status="error", error=f"{type(exc).__name__}: {exc}")
        row["usage_totals"] = totals(row["usage"])
        row["wall_seconds"] = round(time.perf_counter() - started, 3)
        row["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if record:
            path = self.out / "records" / cell.id / f"{record_name(item.id)}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str), encoding="utf-8")
            row["record"] = str(path.relative_to(self.out))
        return row

    def _factscore(self, cell: Cell, item: EvalItem, ctx: Context, row: dict[str, Any]) -> dict[str, Any]:
        """Score the summary; the story's first summary builds its index while the others wait, then reuse it."""
        index_file = Path(ctx.run_dir) / "index.json"
        graph_input: dict[str, Any] = {"summary": item.summary, "title": item.title}
        with self._locks_lock:
            index_lock = self._index_locks.setdefault((cell.id, item.group), threading.Lock())
        with index_lock:
            shared = _read_index(index_file)
            if not shared:
                if item.dataset == "storysumm":  # each story is one scene set
                    from storyjudge.core.segmentation import scenes_from_list

                    graph_input["scenes"] = scenes_from_list([item.document], ctx.chunk_size)
                else:
                    graph_input["document"] = item.document
                out = self.invoke("factscore", graph_input, ctx)
                if out.get("index") and out.get("scenes"):
                    _write_index(index_file, out)
                return out
        row["index_reused"] = True
        return self.invoke("factscore", {**graph_input, **shared}, ctx)

    def _score_item(
        self, cell: Cell, item: EvalItem, ctx: Context, row: dict[str, Any], record: dict[str, Any]
    ) -> None:
        metrics = self.config.metrics
        if not item.summary:  # e.g. SQuALITY in a score cell: fail before any graph spends
            raise ValueError(f"item {item.id} has no summary to score")
        if "factscore" in metrics:
            out = self._factscore(cell, item, ctx, row)
            row["usage"] = merge_usage(row["usage"], out.get("usage"))
            row["timings"] = out.get("timings") or {}
            record["factscore"] = card = out["factscore"]
            record["passages"] = record_passages([{"factscore": card}], out.get("scenes") or [])
            row["factscore"] = {**compact_card(card), "predicted_unfaithful": summary_prediction(card)}
            record["metrics"] = out.get("metrics") or {}
            row["metrics"] = metric_scores(record["metrics"])
            if item.sentences:
                predictions = sentence_predictions(item.sentences, card.get("per_sentence") or [])
                row["factscore"].update({k: predictions[k] for k in ("sentences", "split_differently")})
        if "coherence" in metrics:
            out = self.invoke("coherence", {"summary": item.summary}, ctx)
            row["usage"] = merge_usage(row["usage"], out.get("usage"))
            coherence = out.get("coherence") or {}
            record["coherence"] = {"coherence": coherence, "annotations": out.get("annotations") or []}
            row["coherence"] = {
                **{key: coherence.get(key) for key in ("score", "coverage", "reliable", "mode")},
                "annotator_passed": all(
                    s["annotator_check"]["passed"]
                    for s in coherence.get("summaries") or []
                    if s.get("annotator_check")
                ),
            }
            if item.sentences and out.get("annotations"):
                found = coherence_sentence_predictions(item.sentences, out["annotations"])
                row["coherence"]["sentences"] = found["sentences"]
        if "stats" in metrics:
            row["stats"] = summary_stats(item.summary, item.document)
        if "rouge" in metrics and item.references:
            row["rouge"] = _rouge_f1(item.summary, item.references)

    def _refine_item(
        self, cell: Cell, item: EvalItem, ctx: Context, row: dict[str, Any], record: dict[str, Any]
    ) -> None:
        metrics = self.config.metrics
        out = self.invoke("refine", {"document": item.document, "title": item.title}, ctx)
        row["usage"] = merge_usage(row["usage"], out.get("usage"))
        row["timings"] = dict(out.get("timings") or {})
        iterations = sorted(out.get("iterations") or [], key=lambda it: it["iteration"])
        if not iterations:
            raise ValueError("the refine graph returned no iterations")
        record["refine"] = {k: v for k, v in out.items() if k not in ("scenes", "ckg")}
        coherence_by_iteration = {
            it["iteration"]: (it.get("coherence") or {}).get("score")
            for it in iterations
            if it.get("coherence")
        }
        missing = [it for it in iterations if it["iteration"] not in coherence_by_iteration]
        if "coherence" in metrics and missing:
            summaries = [{"id": f"iteration-{it['iteration']}", "summary": it["summary"]} for it in missing]
            started = time.perf_counter()
            scored = self.invoke("coherence", {"summaries": summaries}, ctx)
            row["usage"] = merge_usage(row["usage"], scored.get("usage"))
            row["timings"]["coherence_eval"] = round(time.perf_counter() - started, 3)
            record["coherence"] = scored.get("coherence")
            for entry in (scored.get("coherence") or {}).get("summaries") or []:
                coherence_by_iteration[int(str(entry["id"]).rsplit("-", 1)[1])] = entry.get("score")
        best_number = out.get("best_iteration", iterations[-1]["iteration"])
        best = next((it for it in iterations if it["iteration"] == best_number), iterations[-1])
        row["iterations"] = [
            {
                **compact_card(it["factscore"]),
                "iteration": it["iteration"],
                "nfs": it["factscore"].get("score"),
                "coherence": coherence_by_iteration.get(it["iteration"]),
                "accepted": it.get("accepted", True),
                "summary_tokens": count_tokens(it["summary"]),
                "metrics": metric_scores(it.get("metrics")),
            }
            for it in iterations
        ]
        row["metrics"] = metric_scores(best.get("metrics"))  # the best round's, as the table reports it
        row["best_iteration"] = best["iteration"]
        row["stop_reason"] = out.get("stop_reason", "")
        ends = {"initial": iterations[0], "best": best}
        row["scores"] = {  # nfs_initial, nfs_initial_coverage, nfs_initial_reliable, nfs_best, ...
            **{
                f"nfs_{end}{part}": it["factscore"].get(key)
                for end, it in ends.items()
                for part, key in NFS_PARTS
            },
            **{f"coherence_{end}": coherence_by_iteration.get(it["iteration"]) for end, it in ends.items()},
        }
        if "stats" in metrics:
            row["stats"] = {end: summary_stats(it["summary"], item.document) for end, it in ends.items()}
        if "rouge" in metrics and item.references:
            row["rouge"] = {end: _rouge_f1(it["summary"], item.references) for end, it in ends.items()}
        if "bertscore" in metrics and item.references:
            from eval.metrics import bertscore

            texts = [it["summary"] for it in ends.values()]
            found = bertscore(texts, [item.references] * 2, model_path=self.config.bertscore_model or None)
            row["bertscore"] = (
                {end: one["f1"] for end, one in zip(ends, found["per_item"], strict=True)}
                if found.get("available")
                else {"available": False, "reason": found.get("reason")}
            )


NFS_PARTS = (("", "score"), ("_coverage", "coverage"), ("_reliable", "reliable"))


def compact_card(card: Mapping[str, Any]) -> dict[str, Any]:
    """The counts of a score card, without its verdicts and evidence (those go to the item's record)."""
    counts = ("supported", "unsupported", "unjudged", "facts", "decompose_failures")
    check = card.get("judge_check") or {}  # the judge's record on the planted facts (empty: nothing planted)
    return {
        **{key: card.get(key) for key in ("score", "coverage", "reliable")},
        **{key: card.get(key, 0) for key in counts},
        **{f"judge_{key}": check.get(key) for key in ("false_acceptance", "passed", "decision")},
    }


def metric_scores(cards: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Added metrics' cards (``core.metrics``) in brief: score, coverage, reliable, headline, error."""
    keys = ("score", "coverage", "reliable", "headline", "error")
    return {name: {k: card.get(k) for k in keys if k in card} for name, card in (cards or {}).items()}


def _rouge_f1(summary: str, references: list[str]) -> dict[str, float]:
    from eval.metrics import rouge_item

    scores = rouge_item(summary, references)
    return {kind: float(scores[kind]["f1"]) for kind in ("rouge1", "rouge2", "rougeL")}


def _read_index(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):  # none yet, or torn
        return None
    if data.get("index") and not still_there(data["index"]):
        return None
    return {k: data[k] for k in ("scenes", "ckg", "index") if k in data}


def _write_index(path: Path, out: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {k: out[k] for k in ("scenes", "ckg", "index", "ckg_stats", "doc_hash") if k in out}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, default=str), encoding="utf-8")
    tmp.replace(path)


def finish(outcome: RunOutcome, config: ExperimentConfig) -> dict[str, Any]:
    """Write the summary table, agreement reports of labelled cells and plots; return what was written."""
    from eval.plots import write_plots
    from eval.storysumm import agreement_report
    from eval.tables import differences, summary_table, write_tables

    table = summary_table(outcome.rows, config)
    diffs = differences(outcome.rows, table)
    files = write_tables(table, config.out_dir, diffs)
    agreements = {}
    for cell in cells(config):
        mine = [r for r in outcome.rows if r["cell"] == cell.id]
        if cell.task == "score" and any((r.get("labels") or {}).get("summary") is not None for r in mine):
            agreements[cell.id] = agreement_report(mine, seed=config.seed)
    if agreements:
        path = config.out_dir / "agreement.json"
        path.write_text(json.dumps(agreements, indent=2, default=str), encoding="utf-8")
        files.append(path)
    plots = write_plots(outcome.rows, table, config.out_dir)
    return {
        "table": table,
        "differences": diffs,
        "agreements": agreements,
        "files": [*files, *plots["files"]],
        "plot_notes": plots["notes"],
    }
