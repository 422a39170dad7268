"""The benchmark, written to ``eval/bench/RESULTS.md``: ``python -m eval.bench`` or ``storyjudge bench``."""

from eval.bench.run import main

if __name__ == "__main__":
    main()
