"""End to end: an experiment grid through the real refine and coherence graphs, then its tables and plots.

The scripted story model (``tests.scripted_story``) writes a three-sentence summary with one false fact that
the judge flags and the refiner fixes, so a refine run goes 2/3 -> 1.0; the grid crosses two loop settings,
and the runner must record both, resume without new requests, and draw every plot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import STORY, StoryResponder

pytestmark = pytest.mark.slow


def test_refine_grid_writes_rows_tables_and_plots(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    responder = StoryResponder()
    server = scripted_server(responder)
    story = tmp_path / "harbour.txt"
    story.write_text(STORY)
    config = tmp_path / "grid.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "grid-test",
                "out_dir": str(tmp_path / "exp"),
                "task": "refine",
                "metrics": ["factscore", "coherence", "stats"],
                "datasets": [{"kind": "documents", "paths": [str(story)]}],
                "models": ["openai:scripted"],
                "base_url": server.base_url,
                "strategies": ["hierarchical"],
                "chunk_sizes": [2048],
                "loops": [{"max_iterations": 0}, {"max_iterations": 2}],
                "context": {"ckg_samples": 1, "retry_budget_s": 0},
            }
        )
    )
    monkeypatch.chdir(tmp_path)
    from storyjudge.apps.cli import app

    result = CliRunner().invoke(app, ["eval", str(config)])
    assert result.exit_code == 0, result.output
    assert "Paired differences" in result.output  # the two loop settings, item by item
    out = tmp_path / "exp"
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows), rows
    by_loop = {r["loop"]["max_iterations"]: r for r in rows}
    assert [it["nfs"] for it in by_loop[0]["iterations"]] == [pytest.approx(2 / 3)]
    assert [it["nfs"] for it in by_loop[2]["iterations"]] == [pytest.approx(2 / 3), 1.0]
    assert by_loop[2]["scores"]["nfs_best"] == 1.0 and by_loop[2]["best_iteration"] == 1
    assert all(it["coherence"] == 1.0 for it in by_loop[2]["iterations"])
    assert by_loop[2]["stats"]["best"]["length_tokens"] > 0
    for name in (
        "summary.md",
        "summary.csv",
        "score_per_iteration.png",
        "nfs_vs_booookscore.png",
        "cost_vs_score.png",
    ):
        assert (out / name).is_file(), name
    assert (out / "score_per_iteration.png").read_bytes()[:4] == b"\x89PNG"
    table = (out / "summary.csv").read_text().splitlines()
    assert len(table) == 3 and "nfs_best" in table[0]

    before = len(server.completions)
    again = CliRunner().invoke(app, ["eval", "run", str(config)])
    assert again.exit_code == 0, again.output
    assert "skipped 2 already done" in again.output
    assert len(server.completions) == before
