"""The benchmark of storyjudge's five performance goals against local test servers; rerunnable offline."""

from __future__ import annotations

import os
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
