"""Goal 3: how much a refine run checkpoints, against its ``result.json``.

Runs ``python -m storyjudge refine`` on a document, as a user would, against the scripted server in a process
of its own, then reads the run directory: the checkpoint database plus the texts it refers to
(``checkpoint_blobs/``, where a run has them), over ``result.json``.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from eval.bench import ROOT, checkout_env
from eval.bench.workload import ServerProcess

DOCUMENT = ROOT / "examples" / "macbeth-witches.md"


def measure(run_dir: Path) -> dict[str, Any]:
    """The sizes of one finished run directory, and their ratio."""
    database = run_dir / "checkpoints.sqlite"
    conn = sqlite3.connect(database)
    try:
        checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    finally:
        conn.close()
    blobs = run_dir / "checkpoint_blobs"
    sizes = {
        "checkpoints": checkpoints,
        "checkpoints_sqlite_bytes": database.stat().st_size,
        "checkpoint_blobs_bytes": sum(p.stat().st_size for p in blobs.rglob("*") if p.is_file()),
        "result_json_bytes": (run_dir / "result.json").stat().st_size,
    }
    stored = sizes["checkpoints_sqlite_bytes"] + sizes["checkpoint_blobs_bytes"]
    return {**sizes, "ratio": round(stored / sizes["result_json_bytes"], 2)}


def run(document: Path = DOCUMENT) -> dict[str, Any]:
    """Refine ``document`` once in a fresh process and measure its run directory."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with ServerProcess(0.0, 16, tmp / "requests.jsonl") as server:
            done = subprocess.run(
                [sys.executable, "-m", "storyjudge", "refine", str(document), "--model", "openai:scripted",
                 "--base-url", server.base_url, "--run-dir", str(tmp / "run"), "--concurrency", "16"],
                cwd=ROOT, env=checkout_env(STORYJUDGE_CACHE_DIR=str(tmp / "cache")), capture_output=True,
                text=True, check=False,
            )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"storyjudge refine failed: {done.stdout[-1500:]} {done.stderr[-1500:]}")
        name = document.relative_to(ROOT) if document.is_relative_to(ROOT) else document
        return {"document": str(name), **measure(tmp / "run")}
