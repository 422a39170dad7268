"""Goal 3: how many copies of a refine run's final state its checkpoints hold.

Runs ``python -m storyjudge refine`` on a document, as a user would, against the scripted server in a process
of its own, then reads the run directory: the checkpoint database plus the texts it refers to
(``checkpoint_blobs/``, where a run has them), over the run's state at its end: every graph's last checkpoint,
serialized plainly. Lean checkpoints store what changed, not the whole state again at each superstep.
(``result.json`` is no yardstick since it refers to its passages instead of copying them: it is reported
beside.)
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from eval.bench import ROOT, checkout_env
from eval.bench.workload import ServerProcess
from storyjudge.core.checkpointblobs import BlobSerializer

DOCUMENT = ROOT / "examples" / "macbeth-witches.md"


def final_state_bytes(conn: sqlite3.Connection, blobs: Path) -> int:
    """The run's state at its end, serialized plainly: every graph's (namespace's) last checkpoint's values."""
    serde, plain = BlobSerializer(blobs), JsonPlusSerializer()
    total = 0
    for (namespace,) in conn.execute("SELECT DISTINCT checkpoint_ns FROM checkpoints").fetchall():
        kind, data = conn.execute(
            "SELECT type, checkpoint FROM checkpoints WHERE checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (namespace,),
        ).fetchone()
        total += len(plain.dumps_typed(serde.loads_typed((kind, data))["channel_values"])[1])
    return total


def measure(run_dir: Path) -> dict[str, Any]:
    """The sizes of one finished run directory, and how many copies of its final state they hold."""
    database = run_dir / "checkpoints.sqlite"
    blobs = run_dir / "checkpoint_blobs"
    conn = sqlite3.connect(database)
    try:
        checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        final = final_state_bytes(conn, blobs)
    finally:
        conn.close()
    sizes = {
        "checkpoints": checkpoints,
        "checkpoints_sqlite_bytes": database.stat().st_size,
        "checkpoint_blobs_bytes": sum(p.stat().st_size for p in blobs.rglob("*") if p.is_file()),
        "final_state_bytes": final,
        "result_json_bytes": (run_dir / "result.json").stat().st_size,
    }
    stored = sizes["checkpoints_sqlite_bytes"] + sizes["checkpoint_blobs_bytes"]
    return {**sizes, "ratio": round(stored / final, 2)}


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
