"""No file of a run directory holds the API key, not even in memory a native library wrote without setting.

Chroma's HNSW index writes its whole reserved capacity (``data_level0.bin``, ``length.bin``) from memory it
allocated but never set, which holds whatever the process freed before: in a run, the buffers of LLM calls
with their ``Authorization`` header. To make the test sensitive, each process first fills its heap with
freed copies of the key, in as many threads as glibc has arenas, at the sizes those files are allocated;
measured without the scrub, that put the key into 4 of 10 fresh stores. Runs are built in one process (the
LLM calls carry the key to the scripted server) and searched again in another, which is when Chroma rewrites
a segment that holds no element yet; every byte of every file of every run directory is then searched for
any 12 consecutive characters of the key.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-storyjudge-heap-" + "Qv7Xw2Lr9Tb4" * 3
"""A long, recognisable key: any 12 consecutive characters of it found in a file count as a leak."""
RUNS = 5
STORES_PER_RUN = 2
WINDOW = 12
SEED_SIZES = (96, 200, 400, 416, 1024, 1676, 4096, 65536, 167_600, 200_000)
"""Sizes of freed key buffers: around the files' allocations (400 = 100 int32 levels; 167,600 = 100 x 1,676)."""


def seed_heap() -> None:
    """Leave freed copies of the key in every arena of this process."""

    def fill() -> None:
        held = [
            bytearray((KEY.encode() * (size // len(KEY) + 1))[:size]) for size in SEED_SIZES for _ in range(8)
        ]
        del held

    threads = [threading.Thread(target=fill) for _ in range(4 * (os.cpu_count() or 2) * 8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fill()


def build_runs(root: str) -> None:
    """Worker: ``RUNS`` refine runs (each with its own store), the key sent with every LLM call."""
    from typer.testing import CliRunner

    from storyjudge.apps.cli import app
    from storyjudge.core.records import Scene
    from storyjudge.core.sceneindex import build_index
    from storyjudge.core.scripted_server import OpenAIServer
    from tests.scripted_story import STORY, StoryResponder

    story = Path(root) / "story.txt"
    story.write_text(STORY)
    with OpenAIServer(StoryResponder()) as server:
        for number in range(RUNS):
            seed_heap()
            result = CliRunner().invoke(
                app,
                ["refine", str(story), "--model", "openai:scripted", "--base-url", server.base_url,
                 "--run-dir", f"{root}/run{number}", "--ckg-samples", "1", "--max-iterations", "1"],
                env={"STORYJUDGE_API_KEY": KEY},
            )  # fmt: skip
            assert result.exit_code == 0, result.output
            for extra in range(STORES_PER_RUN - 1):  # more stores, built right after seeding
                seed_heap()
                scenes = [
                    Scene(
                        id=f"s{i}", index=i, title=f"t{i}", start=0, end=20, text=f"Scene {extra}.{i} at sea."
                    )
                    for i in range(3)
                ]
                build_index(scenes, location=f"{root}/run{number}/extra-store-{extra}", embedder="minilm")
    assert {entry.authorization for entry in server.log} == {f"Bearer {KEY}"}


def search_runs(root: str) -> None:
    """Worker: a fresh process that holds the key opens every store again and searches it."""
    from storyjudge.core.chromastore import chroma_client
    from storyjudge.core.records import IndexRef
    from storyjudge.core.sceneindex import search_scenes_many

    for store in sorted(Path(root).glob("run*/**/chroma.sqlite3")):
        seed_heap()
        client = chroma_client(store.parent)
        for collection in client.list_collections():
            ref = IndexRef(
                store="chroma",
                location=str(store.parent),
                embedder="minilm",
                scenes_collection=collection.name,
                passages=collection.count(),
            )
            assert search_scenes_many(ref, ["the harbour at night"], 2)[0]


def _worker(function: str, root: Path) -> None:
    code = f"from tests.integration.test_key_in_store import {function}; {function}({str(root)!r})"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "STORYJUDGE_API_KEY": KEY}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def leaks(data: bytes) -> bool:
    key = KEY.encode()
    return any(key[i : i + WINDOW] in data for i in range(len(key) - WINDOW + 1))


def test_no_file_of_many_run_directories_holds_the_key(tmp_path: Path) -> None:
    _worker("build_runs", tmp_path)
    _worker("search_runs", tmp_path)
    runs = sorted(tmp_path.glob("run*"))
    files = [path for run in runs for path in run.rglob("*") if path.is_file()]
    hnsw = [path for path in files if path.name in ("data_level0.bin", "length.bin")]
    print(f"{len(files)} files of {len(runs)} runs scanned, {len(hnsw)} of them HNSW data")
    assert len(runs) == RUNS and len(hnsw) >= 2 * RUNS * STORES_PER_RUN
    assert [str(path) for path in files if leaks(path.read_bytes())] == []


def test_the_scrub_zeroes_only_what_the_index_does_not_hold(tmp_path: Path) -> None:
    """Unused capacity is zeroed; the elements held stay, and a fresh process finds the same neighbours."""
    from storyjudge.core.chromastore import scrub_unused_capacity

    store = tmp_path / "store"
    script = """
import json, sys
import chromadb
from chromadb.config import Settings
client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
if sys.argv[2] == "build":
    hnsw = {"space": "l2", "sync_threshold": 10, "batch_size": 10}
    col = client.create_collection("scrubbed", configuration={"hnsw": hnsw})
    for start in range(0, 25, 5):
        ids = range(start, start + 5)
        col.add(ids=[str(i) for i in ids], embeddings=[[float(i), float(i % 7), 1.0] for i in ids])
col = client.get_collection("scrubbed")
found = col.query(query_embeddings=[[float(i), float(i % 7), 1.0] for i in range(25)], n_results=3)
print(json.dumps(found["ids"]))
"""
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}

    def run(mode: str) -> list[list[str]]:
        done = subprocess.run(
            [sys.executable, "-c", script, str(store), mode], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return list(json.loads(done.stdout.strip().splitlines()[-1]))

    before = run("build")
    (header,) = store.glob("*/header.bin")
    capacity, count, element = struct.unpack_from("<QQQ", header.read_bytes(), 12)
    assert 0 < count < capacity  # elements on disk, and room reserved past them
    data, levels = header.parent / "data_level0.bin", header.parent / "length.bin"
    held = data.read_bytes()[: count * element], levels.read_bytes()[: count * 4]
    for path, unit in ((data, element), (levels, 4)):  # what a dirty heap would have left there
        with path.open("r+b") as handle:
            handle.seek(count * unit)
            handle.write(KEY.encode() * ((capacity - count) * unit // len(KEY)))

    assert scrub_unused_capacity(store) > 0
    assert scrub_unused_capacity(store) == 0  # nothing left to zero
    assert not leaks(data.read_bytes()) and not leaks(levels.read_bytes())
    assert data.read_bytes()[count * element :].count(0) == (capacity - count) * element
    assert (data.read_bytes()[: count * element], levels.read_bytes()[: count * 4]) == held
    assert run("query") == before
