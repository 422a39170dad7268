"""The benchmark of storyjudge's five performance goals against local test servers; rerunnable offline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout the benchmarks run from (their child processes import this copy of the code)."""


def checkout_env(**extra: str) -> dict[str, str]:
    """The environment of a benchmark's child process: this checkout first on its import path, plus ``extra``."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **extra,
    }


def cli(command: str, *args: str, base_url: str, run_dir: Path) -> list[str]:
    """``python -m storyjudge COMMAND ARGS`` against the scripted model at ``base_url``."""
    scripted = ["--model", "openai:scripted", "--base-url", base_url, "--run-dir", str(run_dir)]
    return [sys.executable, "-m", "storyjudge", command, *args, *scripted]
