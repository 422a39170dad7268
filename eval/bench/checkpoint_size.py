"""How much a refine run checkpoints: ``checkpoints.sqlite`` against ``result.json``, by channel.

Runs ``python -m storyjudge refine`` on a document, as a user would, against the scripted server in a process
of its own, then reads the run directory: the checkpoint database's bytes (the file, and the pages in use),
``result.json``'s bytes, the ratio of the database plus the texts it refers to (``checkpoint_blobs/``) to
``result.json``, and which channels the bytes are in (each checkpointed channel value and
each pending write, re-serialized with the saver's own serializer).

    python -m eval.bench.checkpoint_size [--document examples/macbeth-witches.md] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from eval.bench import checkout_env
from eval.bench.server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "examples" / "macbeth-witches.md"


def refine(document: Path, run_dir: Path, base_url: str, cache: Path) -> None:
    """One refine run in a fresh process."""
    env = checkout_env(STORYJUDGE_CACHE_DIR=str(cache))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "storyjudge",
            "refine",
            str(document),
            "--model",
            "openai:scripted",
            "--base-url",
            base_url,
            "--run-dir",
            str(run_dir),
            "--concurrency",
            "16",
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"storyjudge refine failed: {done.stdout[-1500:]} {done.stderr[-1500:]}")


def by_channel(database: Path) -> dict[str, dict[str, int]]:
    """Bytes per channel: in checkpoints' channel values, and in pending writes."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()  # as stored: references to long texts count as references
    values: Counter[str] = Counter()
    writes: Counter[str] = Counter()
    conn = sqlite3.connect(database)
    try:
        for kind, blob in conn.execute("SELECT type, checkpoint FROM checkpoints"):
            checkpoint = serde.loads_typed((kind, blob))
            for channel, value in checkpoint.get("channel_values", {}).items():
                values[channel] += len(serde.dumps_typed(value)[1])
        for channel, blob in conn.execute("SELECT channel, value FROM writes"):
            writes[channel] += len(blob or b"")
    finally:
        conn.close()
    return {"checkpoint_values": dict(values.most_common()), "writes": dict(writes.most_common())}


def measure(run_dir: Path) -> dict[str, Any]:
    """The sizes of one finished run directory."""
    database = run_dir / "checkpoints.sqlite"
    result = run_dir / "result.json"
    conn = sqlite3.connect(database)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        in_use = (
            conn.execute("PRAGMA page_count").fetchone()[0]
            - conn.execute("PRAGMA freelist_count").fetchone()[0]
        ) * page_size
        checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        write_rows = conn.execute("SELECT count(*) FROM writes").fetchone()[0]
    finally:
        conn.close()
    blobs = run_dir / "checkpoint_blobs"
    blob_files = [path for path in blobs.rglob("*") if path.is_file()] if blobs.is_dir() else []
    sizes = {
        "checkpoints_sqlite_bytes": database.stat().st_size,
        "checkpoint_blobs_bytes": sum(path.stat().st_size for path in blob_files),
        "checkpoint_blobs_files": len(blob_files),
        "checkpoints_in_use_bytes": in_use,
        "result_json_bytes": result.stat().st_size,
        "checkpoints": checkpoints,
        "write_rows": write_rows,
    }
    stored = sizes["checkpoints_sqlite_bytes"] + sizes["checkpoint_blobs_bytes"]
    sizes["ratio"] = round(stored / sizes["result_json_bytes"], 2)  # the database and its texts together
    return {**sizes, **by_channel(database)}


def run(document: Path, keep: Path | None = None) -> dict[str, Any]:
    """Refine ``document`` once and measure its run directory."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        run_dir = (keep or tmp) / "run"
        with ServerProcess(0.0, 16, tmp / "requests.jsonl") as server:
            refine(document, run_dir, server.base_url, tmp / "cache")
        return {
            "document": str(document.relative_to(ROOT) if document.is_relative_to(ROOT) else document),
            **measure(run_dir),
        }


def main() -> None:
    """Print the measurement as JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--document", type=Path, default=DOCUMENT)
    parser.add_argument("--keep", type=Path, default=None, help="leave the run directory under this folder")
    args = parser.parse_args()
    print(json.dumps(run(args.document.resolve(), args.keep), indent=1))


if __name__ == "__main__":
    main()
