"""Summaries of finished runs: a line per cell (parameters, mean scores, spending, time), Markdown and CSV.

Each mean has its 95% bootstrap interval over items; cells that differ in one setting (and a refine cell's
best rounds against its first) get paired per-item differences with intervals (``differences``).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.grid import ExperimentConfig, cells
from storyjudge.core.intervals import difference_interval, mean_interval, signed_text

SETTINGS = ("model", "strategy", "chunk_size", "loop")
"""The settings a pair of cells may differ in (one of them) to be compared."""


def _number(value: Any) -> bool:
    """Whether a value is a finite number (not a bool, a word like "unavailable", NaN or None)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _mean(values: Iterable[Any]) -> float | None:
    kept = [float(v) for v in values if _number(v)]
    return sum(kept) / len(kept) if kept else None


def summary_table(
    rows: Sequence[Mapping[str, Any]], config: ExperimentConfig | None = None
) -> list[dict[str, Any]]:
    """One line per cell: its parameters, mean scores over its items, spending and time."""
    by_cell: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_cell.setdefault(row["cell"], []).append(row)
    order = [c.id for c in cells(config)] if config else sorted(by_cell)
    table = []
    for cell_id in [c for c in order if c in by_cell] + sorted(set(by_cell) - set(order)):
        group = by_cell[cell_id]
        ok = [r for r in group if r.get("status") == "ok"]
        first = group[0]
        usage = [r.get("usage_totals") or {} for r in group]
        line: dict[str, Any] = {
            "cell": cell_id,
            **{key: first.get(key) for key in ("task", "dataset", "model", "strategy", "chunk_size")},
            "loop": json.dumps(first.get("loop") or {}, sort_keys=True),
            "items": len(group),
            "ok": len(ok),
        }
        line["model"] = first.get("resolved_model") or first.get("model")
        per_item = item_scores(ok)
        if first.get("task") == "refine":
            scores = [r.get("scores") or {} for r in ok]
            _with_interval(line, per_item, "nfs_initial", "nfs_best")
            line["nfs_best_coverage"] = _mean(s.get("nfs_best_coverage") for s in scores)
            line["nfs_best_unreliable"] = sum(s.get("nfs_best_reliable") is False for s in scores)
            _with_interval(line, per_item, "coherence_initial", "coherence_best")
            line["iterations"] = _mean(len(r.get("iterations") or []) for r in ok)
            for kind in ("rouge1", "rouge2", "rougeL"):
                line[f"{kind}_best"] = _mean(((r.get("rouge") or {}).get("best") or {}).get(kind) for r in ok)
            bert = [r.get("bertscore") or {} for r in ok]
            unavailable = any(b.get("available") is False for b in bert)
            line["bertscore_best"] = "unavailable" if unavailable else _mean(b.get("best") for b in bert)
            best = [
                it
                for r in ok
                for it in r.get("iterations") or []
                if it["iteration"] == r.get("best_iteration")
            ]
            line["summary_tokens_best"] = _mean(it["summary_tokens"] for it in best)
        else:
            cards = [r.get("factscore") or {} for r in ok]
            coherence = [r.get("coherence") or {} for r in ok]
            # means over the scores that count; the unreliable ones are counted beside them
            _with_interval(line, per_item, "nfs")
            line["nfs_coverage"] = _mean(c.get("coverage") for c in cards)
            line["nfs_unreliable"] = sum(c.get("reliable") is False for c in cards)
            _with_interval(line, per_item, "coherence")
            line["coherence_unreliable"] = sum(c.get("reliable") is False for c in coherence)
            line["coherence_coverage"] = _mean(c.get("coverage") for c in coherence if c)
            if any(r.get("factscore") and (r.get("labels") or {}).get("summary") is not None for r in ok):
                from eval.storysumm import agreement_report  # its own rows: the labelled ones

                report = agreement_report(ok, resamples=200, seed=config.seed if config else 0)
                summary_level = (report.get("summary_level") or {}).get("table") or {}
                line["balanced_accuracy"] = (summary_level.get("balanced_accuracy") or {}).get("value")
                line["cohens_kappa"] = (summary_level.get("cohens_kappa") or {}).get("value")
        for name in sorted({name for r in ok for name in r.get("metrics") or {}}):  # added metrics
            _with_interval(line, per_item, name + ("_best" if first.get("task") == "refine" else ""))
            line[f"{name}_failed"] = sum(
                bool(((r.get("metrics") or {}).get(name) or {}).get("error")) for r in ok
            )
        for key in ("calls", "cache_hits", "failures", "input_tokens", "output_tokens"):
            line[key] = sum(int(u.get(key, 0)) for u in usage)
        line["cost_usd"] = round(sum(float(u.get("cost_usd", 0.0)) for u in usage), 6)
        line["wall_seconds"] = round(sum(float(r.get("wall_seconds", 0.0)) for r in group), 2)
        table.append(line)
    return table


def item_scores(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Each score of each item (by item id) that a cell's mean counts: an unreliable score is None."""
    out: dict[str, dict[str, float | None]] = {}

    def put(metric: str, item: str, value: Any, reliable: Any = True) -> None:
        out.setdefault(metric, {})[item] = float(value) if _number(value) and reliable is not False else None

    for row in rows:
        item = str(row["item"]["id"])
        if row.get("task") == "refine":
            scores = row.get("scores") or {}
            for metric in ("nfs_initial", "nfs_best", "coherence_initial", "coherence_best"):
                put(metric, item, scores.get(metric), scores.get(f"{metric}_reliable"))
        else:
            card, coherence = row.get("factscore") or {}, row.get("coherence") or {}
            put("nfs", item, card.get("score"), card.get("reliable"))
            put("coherence", item, coherence.get("score"), coherence.get("reliable"))
        suffix = "_best" if row.get("task") == "refine" else ""
        for name, card in (row.get("metrics") or {}).items():
            put(name + suffix, item, card.get("score"), card.get("reliable"))
    return out


def _with_interval(line: dict[str, Any], per_item: Mapping[str, Mapping[str, Any]], *metrics: str) -> None:
    """Each metric's mean over items and its 95% bootstrap interval (``<metric>_ci95``: ``[low, high]``)."""
    for metric in metrics:
        found = mean_interval(list((per_item.get(metric) or {}).values()))
        line[metric] = found["mean"]
        line[f"{metric}_ci95"] = [round(v, 4) for v in found["ci95"]] if found["ci95"] else None


def differences(
    rows: Sequence[Mapping[str, Any]], table: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Paired per-item differences (second minus first) of cells differing in one setting; best vs first rounds."""
    by_cell: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("status") == "ok":
            by_cell.setdefault(str(row["cell"]), []).append(row)
    scores = {cell: item_scores(group) for cell, group in by_cell.items()}
    out: list[dict[str, Any]] = []

    def add(first: str, second: str, metric: str, setting: str, was: Any, now: Any, base: str = "") -> None:
        left, right = scores[first].get(base or metric) or {}, scores[second].get(metric) or {}
        items = sorted(set(left) & set(right))
        found = difference_interval([left[i] for i in items], [right[i] for i in items], paired=True)
        if found["difference"] is None:
            return
        out.append(
            {
                "metric": metric if not base else f"{metric} - {base}",
                "setting": setting,
                "from": was,
                "to": now,
                "cell_a": first,
                "cell_b": second,
                "items": found["n"],
                "difference": round(found["difference"], 4),
                "ci95": [round(v, 4) for v in found["ci95"]] if found["ci95"] else None,
                "excludes_zero": found["excludes_zero"],
            }
        )

    lines = [line for line in table if line["cell"] in scores]
    for cell in (line["cell"] for line in lines if line.get("task") == "refine"):
        for metric in ("nfs", "coherence"):
            add(cell, cell, f"{metric}_best", "refinement", "initial", "best", f"{metric}_initial")
    for a, b in itertools.combinations(lines, 2):
        differing = [k for k in SETTINGS if a.get(k) != b.get(k)]
        if (a.get("task"), a.get("dataset")) != (b.get("task"), b.get("dataset")) or len(differing) != 1:
            continue
        metrics = ("nfs_best", "coherence_best") if a.get("task") == "refine" else ("nfs", "coherence")
        for metric in metrics:
            add(a["cell"], b["cell"], metric, differing[0], a.get(differing[0]), b.get(differing[0]))
    return out


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


DIFFERENCE_COLUMNS = (
    *("metric", "setting", "from", "to", "items", "difference", "ci95", "excludes_zero", "cell_a", "cell_b"),
)


def markdown(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table ("|" in a cell written "/")."""
    body = ["| " + " | ".join(_cell_text(x).replace("|", "/") for x in row) + " |" for row in rows]
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *body]


def _write_csv(path: Path, columns: Sequence[str], lines: Iterable[Mapping[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows({k: line.get(k, "") for k in columns} for line in lines)
    return path


def write_tables(
    table: Sequence[Mapping[str, Any]], out_dir: Path, diffs: Sequence[Mapping[str, Any]] = ()
) -> list[Path]:
    """``summary.md`` and ``summary.csv`` (columns: the union over cells), with the differences and their CSV."""
    columns = list(dict.fromkeys(key for line in table for key in line))
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / "summary.md"
    written = [md_path, _write_csv(out_dir / "summary.csv", columns, table)]
    md = markdown(columns, ([line.get(k) for k in columns] for line in table))
    if diffs:
        md += ["", "Paired differences over the same items (second minus first, 95% bootstrap interval):", ""]
        shown = [{**diff, "difference": signed_text(diff["difference"], diff["ci95"])} for diff in diffs]
        md += markdown(DIFFERENCE_COLUMNS, ([line.get(k) for k in DIFFERENCE_COLUMNS] for line in shown))
        written.append(_write_csv(out_dir / "differences.csv", DIFFERENCE_COLUMNS, diffs))
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")
    return written
