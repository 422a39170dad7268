"""PNG plots of an experiment: score per refinement iteration, NFS vs BooookScore, cost vs score.

A plot with nothing to show is not drawn and a note says why, so an empty figure never passes for a result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
from matplotlib.ticker import MaxNLocator  # noqa: E402


def _label(row: Mapping[str, Any]) -> str:
    loop = row.get("loop") or {}
    loop = json.loads(loop) if isinstance(loop, str) else loop  # the summary table holds it as JSON text
    loop_text = " " + ",".join(f"{k}={v}" for k, v in sorted(loop.items())) if loop else ""
    parts = [str(row.get("dataset", "")), str(row.get("model") or row.get("resolved_model") or "")]
    if row.get("strategy") not in (None, "-"):
        parts.append(str(row["strategy"]))
    parts.append(f"c{row.get('chunk_size')}")
    return " ".join(p for p in parts if p) + loop_text


def _save(fig: Any, ax: Any, path: Path, title: str) -> None:
    """Title, legend and the score axis's range (scores live in [0, 1]); written to ``path`` and closed."""
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def iteration_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> str | None:
    """Mean NFS (and BooookScore, dashed) per refinement iteration, one line per cell; None when not drawn."""
    by_cell: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("status") == "ok" and row.get("iterations"):
            by_cell.setdefault(row["cell"], []).append(row)
    if not by_cell:
        return "score per iteration: no refine rows"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for group in by_cell.values():
        color = None
        for key, name, style in (("nfs", "NFS", "o-"), ("coherence", "BooookScore", "s--")):
            by_round: dict[int, list[float]] = {}
            for it in (it for row in group for it in row["iterations"]):
                if it.get(key) is not None:
                    by_round.setdefault(it["iteration"], []).append(float(it[key]))
            if by_round:
                xs = sorted(by_round)
                ys = [sum(by_round[x]) / len(by_round[x]) for x in xs]
                drawn = ax.plot(xs, ys, style, color=color, label=f"{name} {_label(group[0])}")
                color = drawn[0].get_color()  # a cell's BooookScore in its NFS colour
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("refinement iteration")
    ax.set_ylabel("mean score over items")
    _save(fig, ax, path, "Score per refinement iteration (later rounds: items that reached them)")
    return None


def nfs_vs_coherence_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> str | None:
    """One point per scored summary: NFS against BooookScore, colour per cell; None when drawn."""
    points: dict[str, list[tuple[float, float]]] = {}
    labels: dict[str, str] = {}
    asked = False  # whether any summary was scored for coherence at all
    for row in rows:
        rounds = row.get("iterations") or []
        asked = asked or bool(row.get("coherence")) or any("coherence" in it for it in rounds)
        if row.get("status") != "ok":
            continue
        found = [(it.get("nfs"), it.get("coherence")) for it in rounds]  # a refine row's rounds
        found.append(((row.get("factscore") or {}).get("score"), (row.get("coherence") or {}).get("score")))
        pairs = [(float(nfs), float(score)) for nfs, score in found if nfs is not None and score is not None]
        if pairs:
            points.setdefault(row["cell"], []).extend(pairs)
            labels[row["cell"]] = _label(row)
    if not points:
        why = "add 'coherence' to metrics"
        if asked:
            why = "no BooookScore counted: too few sentences got a readable answer; see coherence_coverage"
        return f"NFS vs BooookScore: no summary has both scores ({why})"
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for cell, pairs in points.items():
        ax.scatter([p[0] for p in pairs], [p[1] for p in pairs], alpha=0.7, label=labels[cell])
    ax.set_xlabel("NarrativeFactScore")
    ax.set_ylabel("BooookScore")
    ax.set_xlim(-0.02, 1.02)
    _save(fig, ax, path, "Faithfulness vs coherence per summary")
    return None


def cost_plot(table: Sequence[Mapping[str, Any]], path: Path) -> str | None:
    """Per cell: spending per item against mean NFS; None when drawn.

    Cells share a cache, so dollars only when no call was a hit; else calls made or answered (order-independent).
    """
    scored = [line for line in table if isinstance(line.get("nfs_best", line.get("nfs")), (int, float))]
    scored = [line for line in scored if line.get("ok")]
    if not scored:
        return "cost vs score: no cell has a score"
    no_hits = all(int(line.get("cache_hits") or 0) == 0 for line in scored)
    use_usd = no_hits and all(float(line.get("cost_usd") or 0) > 0 for line in scored)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for line in scored:
        items = max(1, int(line["ok"]))
        if use_usd:
            spend = float(line["cost_usd"]) / items
        else:
            spend = (int(line.get("calls") or 0) + int(line.get("cache_hits") or 0)) / items
        key = "nfs_best" if "nfs_best" in line else "nfs"
        mean = float(line[key])
        ci = line.get(f"{key}_ci95")  # the 95% bootstrap interval over the cell's items, as an error bar
        yerr = [[max(0.0, mean - ci[0])], [max(0.0, ci[1] - mean)]] if ci else None  # ends are rounded
        ax.errorbar([spend], [mean], yerr=yerr, fmt="o", capsize=4, label=_label(line))
    ax.set_xlabel("USD per item" if use_usd else "LLM calls per item (made + answered from the cache)")
    ax.set_ylabel("mean NFS (best iteration), 95% interval over items")
    _save(fig, ax, path, "Cost vs score per cell")
    return None


def write_plots(
    rows: Sequence[Mapping[str, Any]], table: Sequence[Mapping[str, Any]], out_dir: Path
) -> dict[str, list[Any]]:
    """Draw every plot that has data into ``out_dir``; returns ``{"files": [...], "notes": [...]}``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    notes: list[str] = []
    for name, draw in (
        ("score_per_iteration.png", lambda p: iteration_plot(rows, p)),
        ("nfs_vs_booookscore.png", lambda p: nfs_vs_coherence_plot(rows, p)),
        ("cost_vs_score.png", lambda p: cost_plot(table, p)),
    ):
        path = out_dir / name
        note = draw(path)
        if note is None:
            files.append(path)
        else:
            notes.append(note)
            path.unlink(missing_ok=True)
    return {"files": files, "notes": notes}
