"""Summaries of finished runs: a line per cell (parameters, mean scores, spending, time), Markdown and CSV."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.grid import ExperimentConfig, cells
from storyjudge.core.usage import Usage, merge_usage, totals


def _mean(values: Iterable[Any]) -> float | None:
    kept = [
        float(v)
        for v in values
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ]
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
            "task": first.get("task"),
            "dataset": first.get("dataset"),
            "model": first.get("resolved_model") or first.get("model"),
            "strategy": first.get("strategy"),
            "chunk_size": first.get("chunk_size"),
            "loop": json.dumps(first.get("loop") or {}, sort_keys=True),
            "items": len(group),
            "ok": len(ok),
        }
        if first.get("task") == "refine":
            scores = [r.get("scores") or {} for r in ok]
            line["nfs_initial"] = _mean(
                s.get("nfs_initial") for s in scores if s.get("nfs_initial_reliable") is not False
            )
            line["nfs_best"] = _mean(
                s.get("nfs_best") for s in scores if s.get("nfs_best_reliable") is not False
            )
            line["nfs_best_coverage"] = _mean(s.get("nfs_best_coverage") for s in scores)
            line["nfs_best_unreliable"] = sum(s.get("nfs_best_reliable") is False for s in scores)
            line["coherence_initial"] = _mean((r.get("scores") or {}).get("coherence_initial") for r in ok)
            line["coherence_best"] = _mean((r.get("scores") or {}).get("coherence_best") for r in ok)
            line["iterations"] = _mean(len(r.get("iterations") or []) for r in ok)
            for kind in ("rouge1", "rouge2", "rougeL"):
                line[f"{kind}_best"] = _mean(((r.get("rouge") or {}).get("best") or {}).get(kind) for r in ok)
            bert = [r.get("bertscore") or {} for r in ok]
            line["bertscore_best"] = _mean(b.get("best") for b in bert)
            if any(b.get("available") is False for b in bert):
                line["bertscore_best"] = "unavailable"
            line["summary_tokens_best"] = _mean(
                next(
                    (
                        it["summary_tokens"]
                        for it in r.get("iterations") or []
                        if it["iteration"] == r.get("best_iteration")
                    ),
                    None,
                )
                for r in ok
            )
        else:
            cards = [r.get("factscore") or {} for r in ok]
            coherence = [r.get("coherence") or {} for r in ok]
            # means over the scores that count; the unreliable ones are counted beside them
            line["nfs"] = _mean(c.get("score") for c in cards if c.get("reliable") is not False)
            line["nfs_coverage"] = _mean(c.get("coverage") for c in cards)
            line["nfs_unreliable"] = sum(c.get("reliable") is False for c in cards)
            line["coherence"] = _mean(c.get("score") for c in coherence if c.get("reliable") is not False)
            line["coherence_unreliable"] = sum(c.get("reliable") is False for c in coherence)
            labelled = [r for r in ok if (r.get("labels") or {}).get("summary") is not None]
            if labelled and any(r.get("factscore") for r in labelled):
                from eval.storysumm import agreement_report

                report = agreement_report(labelled, resamples=200, seed=config.seed if config else 0)
                summary_level = (report.get("summary_level") or {}).get("table") or {}
                line["balanced_accuracy"] = (summary_level.get("balanced_accuracy") or {}).get("value")
                line["cohens_kappa"] = (summary_level.get("cohens_kappa") or {}).get("value")
        line["calls"] = sum(int(u.get("calls", 0)) for u in usage)
        line["cache_hits"] = sum(int(u.get("cache_hits", 0)) for u in usage)
        line["failures"] = sum(int(u.get("failures", 0)) for u in usage)
        line["input_tokens"] = sum(int(u.get("input_tokens", 0)) for u in usage)
        line["output_tokens"] = sum(int(u.get("output_tokens", 0)) for u in usage)
        line["cost_usd"] = round(sum(float(u.get("cost_usd", 0.0)) for u in usage), 6)
        line["wall_seconds"] = round(sum(float(r.get("wall_seconds", 0.0)) for r in group), 2)
        table.append(line)
    return table


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def write_tables(table: Sequence[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """``summary.md`` and ``summary.csv`` of a summary table (columns: the union over cells, in order)."""
    columns: list[str] = []
    for line in table:
        columns.extend(k for k in line if k not in columns)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / "summary.csv", out_dir / "summary.md"
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for line in table:
            writer.writerow({k: line.get(k, "") for k in columns})
    md = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for line in table:
        md.append("| " + " | ".join(_cell_text(line.get(k)).replace("|", "/") for k in columns) + " |")
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")
    return [md_path, csv_path]


def usage_of(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Summed usage of rows."""
    merged: Usage = {}
    for row in rows:
        merged = merge_usage(merged, row.get("usage"))
    return totals(merged)
