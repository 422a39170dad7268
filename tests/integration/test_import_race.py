"""The main job on a novel, as a user runs it: heavy modules imported on one thread, never by two at once.

Python hands a thread a partially initialised module when two threads import a package with circular imports
at once (numpy's); a refine run of Frankenstein failed that way in about one run of three while its index
branch imported Chroma and background threads imported the embedder and networkx. The race itself shows only
sometimes; which thread imports what is the same every run, so an import audit hook makes the test
deterministic: every heavy module must be first imported by one and the same thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eval.bench.workload import BenchResponder

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "numpy",
    "scipy",
    "chromadb",
    "torch",
    "transformers",
    "sentence_transformers",
    "networkx",
    "sklearn",
)

AUDITED_CLI = """
import atexit, json, sys, threading
HEAVY, LOG = {heavy!r}, {log!r}
first = {{}}

def audit(event, args):
    if event == "import" and args[0].partition(".")[0] in HEAVY and args[0] not in first:
        first[args[0]] = threading.current_thread().name

def write():
    with open(LOG, "w", encoding="utf-8") as handle:
        json.dump(first, handle)

sys.addaudithook(audit)
atexit.register(write)
from storyjudge.apps.cli import entry
sys.argv = ["storyjudge", *sys.argv[1:]]
entry()
"""


def refine(
    text: str, base_url: str, tmp: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """``storyjudge refine`` in a fresh process with its own LLM cache; also which thread first imported what."""
    log = tmp / "imports.json"
    script = AUDITED_CLI.format(heavy=HEAVY, log=str(log))
    env = {**os.environ, "STORYJUDGE_CACHE_DIR": str(tmp / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-c", script, "refine", str(ROOT / "examples" / text), "--base-url", base_url]
    command += ["--model", "openai:scripted", "--run-dir", str(tmp / "run"), "--max-iterations", "1", *extra]
    done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=1200)
    imports = json.loads(log.read_text(encoding="utf-8")) if log.exists() else {}
    return done, imports


def importing_threads(imports: dict[str, str]) -> dict[str, list[str]]:
    """Thread name -> the heavy modules it imported first (a few names each, for the failure message)."""
    threads: dict[str, list[str]] = {}
    for module, thread in imports.items():
        threads.setdefault(thread, []).append(module)
    return {thread: sorted(modules)[:4] for thread, modules in threads.items()}


@pytest.mark.slow
def test_a_refine_run_imports_every_heavy_module_on_one_thread(scripted_server: Any, tmp_path: Path) -> None:
    server = scripted_server(BenchResponder())
    done, imports = refine("macbeth-witches.md", server.base_url, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    imported = {module.partition(".")[0] for module in imports}
    assert {"numpy", "chromadb", "torch", "transformers", "networkx"} <= imported
    threads = importing_threads(imports)
    assert len(threads) == 1, f"heavy modules imported by several threads at once: {threads}"


@pytest.mark.slow
@pytest.mark.parametrize("attempt", [1, 2])
def test_refine_runs_on_a_novel(scripted_server: Any, tmp_path: Path, attempt: int) -> None:
    """The README's main job on the bundled novel, twice, each with a fresh cache and run directory."""
    server = scripted_server(BenchResponder())
    done, imports = refine("frankenstein.txt", server.base_url, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(importing_threads(imports)) == 1, importing_threads(imports)
    result = json.loads((tmp_path / "run" / "result.json").read_text(encoding="utf-8"))
    assert result["iterations"] and result["best_summary"].strip()
