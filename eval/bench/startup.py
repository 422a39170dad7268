"""Goal 4: how fast the CLI starts: ``doctor`` to its exit, and ``refine`` to its first progress line.

Each command runs in a fresh process on a pseudo-terminal (so rich draws its progress bars as a user sees them);
``doctor`` against a server that answers its one question, ``refine`` against the scripted server in a process
of its own, stopped once its first progress bar line is on the terminal. Times are from the process start.
"""

from __future__ import annotations

import json
import os
import pty
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from eval.bench import ROOT, checkout_env
from eval.bench.workload import ServerProcess
from storyjudge.core.scripted_server import OpenAIServer

DOCUMENT = ROOT / "examples" / "macbeth-witches.md"
PROGRESS_LINE = re.compile(rb"\d+/\d+\s+\d+:\d\d:\d\d")  # MofN then elapsed time: a progress bar
DOCTOR_ANSWER = json.dumps({"rationale": "The passage says so.", "supported": True})
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def timed(
    args: list[str], env: dict[str, str], marks: dict[str, re.Pattern[bytes]], stop_at: str = ""
) -> dict[str, Any]:
    """Run ``python -m storyjudge ARGS`` on a pty; seconds from start to each mark's first match, and to exit.

    With ``stop_at``, the process is stopped (SIGTERM) once that mark has been seen.
    """
    leader, follower = pty.openpty()
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "storyjudge", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    seen: dict[str, float] = {}
    output = b""
    watch = selectors.DefaultSelector()  # epoll/poll: select() refuses descriptors above 1023
    watch.register(leader, selectors.EVENT_READ)
    try:
        while True:
            ready = watch.select(0.05)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    data = b""
                if not data:
                    break
                output += data
                plain = ANSI.sub(b"", output)
                for name, pattern in marks.items():
                    if name not in seen and pattern.search(plain):
                        seen[name] = time.perf_counter() - started
                if stop_at and stop_at in seen:
                    process.send_signal(signal.SIGTERM)
                    break
            elif process.poll() is not None:
                break
        process.wait(timeout=120)
    finally:
        watch.close()
        os.close(leader)
        if process.poll() is None:
            process.kill()
    result: dict[str, Any] = {name: round(value, 2) for name, value in seen.items()}
    result["exit_s"] = round(time.perf_counter() - started, 2)
    result["rc"] = process.returncode
    if not stop_at and process.returncode != 0:
        result["tail"] = ANSI.sub(b"", output)[-800:].decode("utf-8", "replace")
    return result


def run_all(latency: float, repeat: int) -> dict[str, list[dict[str, Any]]]:
    """Both measurements ``repeat`` times, interleaved so that load on a shared machine hits each alike."""
    out: dict[str, list[dict[str, Any]]] = {"doctor": [], "refine": []}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = checkout_env(STORYJUDGE_CACHE_DIR=str(tmp / "cache"), COLUMNS="120")
        with (
            ServerProcess(latency, 16, tmp / "requests.jsonl") as server,
            OpenAIServer(lambda body: DOCTOR_ANSWER, latency=latency) as doctor_server,
        ):
            for i in range(repeat):
                doctor = ["doctor", "--model", "openai:scripted", "--base-url", doctor_server.base_url]
                out["doctor"].append(timed([*doctor, "--run-dir", str(tmp / f"doctor-{i}")], env, {}))
                refine = [
                    "refine",
                    str(DOCUMENT),
                    "--model",
                    "openai:scripted",
                    "--base-url",
                    server.base_url,
                ]
                out["refine"].append(
                    timed([*refine, "--run-dir", str(tmp / f"refine-{i}")], env,
                          {"first_progress_s": PROGRESS_LINE}, stop_at="first_progress_s")
                )  # fmt: skip
    return out
