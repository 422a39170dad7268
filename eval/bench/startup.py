"""Goal 4: how fast the CLI starts, each command in a fresh process, timed from its start.

``doctor`` to its exit and ``refine`` to its first progress line run on a pseudo-terminal (rich draws as for a
user); ``summarize --strategy incremental`` of a novel is timed to its first request at the server. With
``--baseline DIR`` another checkout's ``summarize`` is timed alternately, under the same load.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import selectors
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from eval.bench import ROOT, checkout_env, cli
from eval.bench.workload import BenchResponder, ServerProcess
from storyjudge.core.scripted_server import OpenAIServer

DOCUMENT = ROOT / "examples" / "macbeth-witches.md"
NOVEL = Path("examples") / "frankenstein.txt"
"""The book ``summarize`` reads (49 chunks of 2,048 tokens), relative to the checkout timed."""
PROGRESS_LINE = re.compile(rb"\d+/\d+\s+\d+:\d\d:\d\d")  # MofN then elapsed time: a progress bar
DOCTOR_ANSWER = json.dumps({"rationale": "The passage says so.", "supported": True})
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def timed(args: list[str], env: dict[str, str], *, to_progress: bool = False) -> dict[str, Any]:
    """Run ``args`` on a pty: seconds to its exit or, ``to_progress``, to its first progress line (then stopped)."""
    leader, follower = pty.openpty()
    started = time.perf_counter()
    process = subprocess.Popen(
        args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
    )
    os.close(follower)
    result: dict[str, Any] = {}
    output = b""
    watch = selectors.DefaultSelector()  # epoll/poll: select() refuses descriptors above 1023
    watch.register(leader, selectors.EVENT_READ)
    try:
        while True:
            if watch.select(0.05):
                data = b""
                with contextlib.suppress(OSError):  # the child closed the terminal
                    data = os.read(leader, 65536)
                if not data:
                    break
                output += data
                if to_progress and PROGRESS_LINE.search(ANSI.sub(b"", output)):
                    result["first_progress_s"] = round(time.perf_counter() - started, 2)
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
    result["exit_s"] = round(time.perf_counter() - started, 2)
    result["rc"] = process.returncode
    if not to_progress and process.returncode != 0:
        result["tail"] = ANSI.sub(b"", output)[-800:].decode("utf-8", "replace")
    return result


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds a running process has used (None without /proc): work that others' load does not inflate."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_request(server: OpenAIServer, root: Path, run_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """``summarize NOVEL --strategy incremental`` of the checkout at ``root``: seconds to its first request.

    The server stamps requests with ``time.monotonic`` (one clock for both processes); ``cpu_s``: the command's
    CPU seconds by then. It is stopped then, or gives ``rc`` and its last words when no request came.
    """
    before = len(server.log)
    started = time.monotonic()
    process = subprocess.Popen(
        cli("summarize", str(root / NOVEL), "--strategy", "incremental", base_url=server.base_url, run_dir=run_dir),
        cwd=root, env={**env, "PYTHONPATH": str(root), "STORYJUDGE_CACHE_DIR": f"{run_dir}-cache"},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    while len(server.log) == before and process.poll() is None:
        time.sleep(0.005)
    result: dict[str, Any] = {}
    if len(server.log) > before:
        result["first_request_s"] = round(server.log[before].arrived - started, 2)
        if (cpu := cpu_seconds(process.pid)) is not None:
            result["cpu_s"] = round(cpu, 2)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    result["rc"] = process.returncode
    if "first_request_s" not in result:
        result["tail"] = err[-800:].decode("utf-8", "replace")
    return result


def run_all(latency: float, repeat: int, baseline: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every measurement ``repeat`` times, interleaved so that load hits each alike (a baseline's runs first)."""
    out: dict[str, list[dict[str, Any]]] = {"doctor": [], "refine": [], "summarize": []}
    checkouts = {"summarize_baseline": baseline} if baseline is not None else {}  # a baseline's runs first
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = checkout_env(STORYJUDGE_CACHE_DIR=str(tmp / "cache"), COLUMNS="120")
        with (
            ServerProcess(latency, 16, tmp / "requests.jsonl") as server,
            OpenAIServer(lambda body: DOCTOR_ANSWER, latency=latency) as doctor_server,
            OpenAIServer(BenchResponder(), latency=latency, slots=16) as book_server,
        ):
            for i in range(repeat):
                for key, root in {**checkouts, "summarize": ROOT}.items():
                    out.setdefault(key, []).append(first_request(book_server, root, tmp / f"{key}-{i}", env))
                doctor = cli("doctor", base_url=doctor_server.base_url, run_dir=tmp / f"doctor-{i}")
                out["doctor"].append(timed(doctor, env))
                refine = cli("refine", str(DOCUMENT), base_url=server.base_url, run_dir=tmp / f"refine-{i}")
                out["refine"].append(timed(refine, env, to_progress=True))
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m eval.bench.startup [--baseline DIR] [--repeat N]``: the start-up numbers as JSON."""
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per call at the scripted servers")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to time summarize with")
    args = parser.parse_args(argv)
    print(json.dumps(run_all(args.latency, args.repeat, args.baseline), indent=2))


if __name__ == "__main__":
    main()
