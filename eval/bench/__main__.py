"""Every benchmark, written to ``eval/bench/RESULTS.md``: ``python -m eval.bench`` or ``storyjudge bench``."""

from __future__ import annotations

from eval.bench.run import main

if __name__ == "__main__":
    main()
