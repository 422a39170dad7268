"""The scripted test server in a process of its own, as a real model endpoint would be.

In the benchmark's own process the server's request handling would compete with storyjudge for the
interpreter lock and count as storyjudge's overhead. Here it runs apart; every request body it answers is
appended to a JSON-lines log that the benchmark reads to find the run's stages.

    python -m eval.bench.server_process --latency 0.3 --slots 16 --log requests.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from eval.bench import checkout_env
from eval.bench.workload import BenchResponder, NamesResponder
from storyjudge.apps.scripted_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]


class LoggingResponder:
    """The benchmark's scripted model, logging every body it answers."""

    def __init__(self, log: Path, sentences: int, names: bool = False) -> None:
        self.inner = NamesResponder(sentences) if names else BenchResponder(sentences)
        self.handle = log.open("a", encoding="utf-8")
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        """Log the body, then answer it."""
        with self.lock:
            self.handle.write(json.dumps(body) + "\n")
            self.handle.flush()
        return self.inner(body)


class ServerProcess:
    """``with ServerProcess(latency, slots, log) as server:`` gives ``base_url`` and ``completions``."""

    def __init__(
        self, latency: float, slots: int, log: Path, sentences: int = 20, names: bool = False
    ) -> None:
        self.log = log
        self.args = [
            sys.executable, "-m", "eval.bench.server_process", "--latency", str(latency),
            "--slots", str(slots), "--log", str(log), "--sentences", str(sentences),
        ] + (["--names"] if names else [])  # fmt: skip
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> ServerProcess:
        env = checkout_env()
        self.process = subprocess.Popen(
            self.args, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the scripted server did not start: {self.base_url!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)

    @property
    def completions(self) -> list[dict[str, Any]]:
        """Request bodies answered so far, in the order they were answered."""
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


def main() -> None:
    """Serve until stdin closes or the process is terminated."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--names", action="store_true", help="extract capitalised words as characters")
    args = parser.parse_args()
    responder = LoggingResponder(args.log, args.sentences, args.names)
    server = OpenAIServer(responder, latency=args.latency, slots=args.slots)
    with server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # returns when the parent closes the pipe or exits


if __name__ == "__main__":
    main()
