"""eval's summary: each cell's means with intervals over items, and paired differences between cells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eval.tables import differences, summary_table, write_tables


def _row(cell: str, item: str, nfs: float, *, model: str = "m", reliable: bool = True) -> dict[str, Any]:
    return {
        "cell": cell,
        "task": "score",
        "dataset": "d",
        "model": model,
        "strategy": "hierarchical",
        "chunk_size": 2048,
        "loop": {},
        "item": {"id": item},
        "status": "ok",
        "factscore": {"score": nfs, "coverage": 1.0, "reliable": reliable},
        "coherence": {},
    }


def _rows() -> list[dict[str, Any]]:
    base = [0.2, 0.4, 0.6, 0.8, 0.5]
    rows = [_row("a", f"i{n}", v) for n, v in enumerate(base)]
    rows += [_row("b", f"i{n}", v + 0.1, model="other") for n, v in enumerate(base)]
    rows.append(_row("c", "i0", 0.9, model="third", reliable=False))  # unreliable: out of means and pairs
    return rows


def test_cells_carry_intervals_over_items() -> None:
    table = summary_table(_rows())
    a = next(line for line in table if line["cell"] == "a")
    assert a["nfs"] == pytest.approx(0.5)
    low, high = a["nfs_ci95"]
    assert low < 0.5 < high
    c = next(line for line in table if line["cell"] == "c")
    assert c["nfs"] is None and c["nfs_ci95"] is None and c["nfs_unreliable"] == 1


def test_cells_differing_in_one_setting_are_paired_item_by_item(tmp_path: Path) -> None:
    rows = _rows()
    table = summary_table(rows)
    diffs = differences(rows, table)
    ab = next(d for d in diffs if (d["cell_a"], d["cell_b"], d["metric"]) == ("a", "b", "nfs"))
    assert ab["setting"] == "model" and (ab["from"], ab["to"]) == ("m", "other")
    assert ab["items"] == 5 and ab["difference"] == pytest.approx(0.1)
    assert ab["ci95"] == pytest.approx([0.1, 0.1]) and ab["excludes_zero"]  # the same gain on every item
    assert not any("c" in (d["cell_a"], d["cell_b"]) for d in diffs)  # its one item is unreliable
    files = write_tables(table, tmp_path, diffs)
    assert tmp_path / "differences.csv" in files
    md = (tmp_path / "summary.md").read_text()
    assert "Paired differences" in md and "+0.100 [+0.100, +0.100]" in md
    assert "nfs_ci95" in (tmp_path / "summary.csv").read_text().splitlines()[0]


def test_the_cost_plot_draws_each_cell_s_interval(tmp_path: Path) -> None:
    from eval.plots import cost_plot

    line = {"cell": "a", "ok": 2, "calls": 4, "nfs": 2 / 3, "nfs_ci95": [0.6667, 0.6667]}  # rounded ends
    wide = {**line, "cell": "b", "nfs": 0.5, "nfs_ci95": [0.2, 0.8]}
    assert cost_plot([line, wide], tmp_path / "cost.png") is None
    assert (tmp_path / "cost.png").read_bytes()[:4] == b"\x89PNG"
