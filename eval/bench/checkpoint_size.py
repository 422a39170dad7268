"""Goal 3: how many copies of a refine run's final state its checkpoints (database and blobs) hold.

``python -m storyjudge refine`` runs as a user would against the scripted server; its checkpoints are set
against every graph's last checkpoint serialized plainly (``result.json``, which refers to its passages
instead of copying them, is reported beside).
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from eval.bench import ROOT, checkout_env, cli
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
    database, blobs = run_dir / "checkpoints.sqlite", run_dir / "checkpoint_blobs"
    with contextlib.closing(sqlite3.connect(database)) as conn:
        checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        final = final_state_bytes(conn, blobs)
    sizes = {
        "checkpoints": checkpoints,
        "checkpoints_sqlite_bytes": database.stat().st_size,
        "checkpoint_blobs_bytes": sum(p.stat().st_size for p in blobs.rglob("*") if p.is_file()),
        "final_state_bytes": final,
        "result_json_bytes": (run_dir / "result.json").stat().st_size,
    }
    stored = sizes["checkpoints_sqlite_bytes"] + sizes["checkpoint_blobs_bytes"]
    return {**sizes, "ratio": round(stored / final, 2)}


def run() -> dict[str, Any]:
    """Refine the witches' scenes once in a fresh process and measure its run directory."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with ServerProcess(0.0, 16, tmp / "requests.jsonl") as server:
            done = subprocess.run(
                cli("refine", str(DOCUMENT), "--concurrency", "16", base_url=server.base_url, run_dir=tmp / "run"),
                cwd=ROOT, env=checkout_env(STORYJUDGE_CACHE_DIR=str(tmp / "cache")), capture_output=True,
                text=True, check=False,
            )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"storyjudge refine failed: {done.stdout[-1500:]} {done.stderr[-1500:]}")
        return {"document": str(DOCUMENT.relative_to(ROOT)), **measure(tmp / "run")}
