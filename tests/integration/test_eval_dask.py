"""An experiment grid on a real Dask cluster (a scheduler and two worker processes on 127.0.0.1).

The cluster runs the same grid as the local executor (two cells x two documents through the real refine graph,
the scripted story model over HTTP) and must give the same rows; its LLM calls share one budget across the
workers (the scripted server never sees more than ``--concurrency`` at once); and a worker killed mid-run loses
no item and runs none twice: the driver alone writes rows, the item is rerun on the other worker, and a rerun
of the experiment skips everything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import STORY, StoryResponder

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DASK = Path(sys.executable).parent / "dask"
LEASES = {  # a dead worker's leases come back after 3 s instead of 30 s
    "distributed.scheduler.locks.lease-timeout": "3s",
    "distributed.scheduler.locks.lease-validation-interval": "1s",
}
WAIT = 180.0  # seconds any start-up may take on a busy machine; only bounds how long a failure takes


class Cluster:
    """``dask scheduler`` and ``dask worker`` processes on 127.0.0.1, stopped by process id."""

    def __init__(self, tmp: Path, workers: int = 2) -> None:
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),  # workers import storyjudge, eval, graphs from this checkout
            "ANONYMIZED_TELEMETRY": "False",
            "HF_HUB_OFFLINE": "1",
            "DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_TIMEOUT": LEASES[
                "distributed.scheduler.locks.lease-timeout"
            ],
            "DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_VALIDATION_INTERVAL": LEASES[
                "distributed.scheduler.locks.lease-validation-interval"
            ],
        }
        self.tmp = tmp
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        scheduler_file = tmp / "scheduler.json"
        self.scheduler = self._start(
            "scheduler",
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"]
            + ["--scheduler-file", str(scheduler_file)],
        )
        deadline = time.monotonic() + WAIT
        while not scheduler_file.is_file() and time.monotonic() < deadline:
            assert self.scheduler.poll() is None, (tmp / "scheduler.log").read_text()
            time.sleep(0.2)
        self.address = str(json.loads(scheduler_file.read_text())["address"])
        for n in range(workers):
            name = f"w{n}"
            self.workers[name] = self._start(
                name,
                [str(DASK), "worker", self.address, "--host", "127.0.0.1", "--nthreads", "1"]
                + ["--no-dashboard", "--no-nanny", "--name", name],
            )
        with distributed.Client(self.address, timeout="60s") as client:
            client.wait_for_workers(workers, timeout=WAIT)

    def _start(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"{name}.log").open("wb")
        return subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def kill(self, name: str) -> None:
        """Kill one worker at once (no clean shutdown: its task and leases are simply lost)."""
        process = self.workers[name]
        os.kill(process.pid, signal.SIGKILL)
        process.wait()

    def stop(self) -> None:
        for process in [*self.workers.values(), self.scheduler]:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    import dask

    with dask.config.set(LEASES):  # the driver registers the budget: its lease timeout is the one used
        started = Cluster(tmp_path)
        try:
            yield started
        finally:
            started.stop()


def write_config(tmp_path: Path, server: OpenAIServer, name: str) -> Path:
    docs = []
    for stem in ("harbour-a", "harbour-b"):
        doc = tmp_path / f"{stem}.txt"
        doc.write_text(STORY)
        docs.append(str(doc))
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "dask-grid",
                "out_dir": str(tmp_path / name),
                "task": "refine",
                "metrics": ["factscore", "stats"],
                "datasets": [{"kind": "documents", "paths": docs}],
                "models": ["openai:scripted"],
                "base_url": server.base_url,
                "loops": [{"max_iterations": 0}, {"max_iterations": 1}],
                "context": {"ckg_samples": 1, "retry_budget_s": 0},
            }
        )
    )
    return config


def rows_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]


VARYING = ("wall_seconds", "finished", "timings", "usage", "usage_totals")
"""What differs between executors by design: timings, and cache hits (local items share one cache)."""


def comparable(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["cell"], r["item"]["id"]): {k: v for k, v in r.items() if k not in VARYING} for r in rows}


def requests_of(row: dict[str, Any]) -> int:
    """LLM requests an item made, answered by the model or by the cache."""
    return int(row["usage_totals"]["calls"]) + int(row["usage_totals"]["cache_hits"])


def test_dask_rows_equal_local_rows_and_one_budget_bounds_all_workers(
    tmp_path: Path,
    cluster: Cluster,
    scripted_server: Callable[..., OpenAIServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = scripted_server(StoryResponder(), latency=0.05)  # calls overlap: the budget is what bounds them
    monkeypatch.chdir(tmp_path)
    from storyjudge.apps.cli import app

    # one item at a time here: items in threads of one process can race in a shared tokenizer
    started = time.perf_counter()
    local = CliRunner().invoke(app, ["eval", "run", str(write_config(tmp_path, server, "local"))])
    local_seconds = time.perf_counter() - started
    assert local.exit_code == 0, local.output
    local_max = server.max_in_flight

    server.max_in_flight = 0
    started = time.perf_counter()
    on_dask = CliRunner().invoke(
        app,
        ["eval", "run", str(write_config(tmp_path, server, "dask")), "--executor", "dask"]
        + ["--scheduler", cluster.address, "--concurrency", "4"],
    )
    dask_seconds = time.perf_counter() - started
    assert on_dask.exit_code == 0, on_dask.output
    assert "[4/4]" in on_dask.output  # progress, row by row as items finish
    assert server.max_in_flight <= 4, server.max_in_flight  # the total across both workers
    print(
        f"in flight at most: local {local_max}, dask {server.max_in_flight}; "
        f"4 items: local {local_seconds:.1f}s, dask {dask_seconds:.1f}s"
    )

    local_rows, dask_rows = rows_of(tmp_path / "local"), rows_of(tmp_path / "dask")
    assert len(dask_rows) == 4 and all(r["status"] == "ok" for r in dask_rows)
    assert comparable(dask_rows) == comparable(local_rows)
    by_key = {(r["cell"], r["item"]["id"]): r for r in local_rows}
    for row in dask_rows:
        assert requests_of(row) == requests_of(by_key[(row["cell"], row["item"]["id"])])
    # each item's LLM cache is its own SQLite file in its run directory; no experiment-wide cache
    assert not (tmp_path / "dask" / "cache").exists()
    assert len(list((tmp_path / "dask" / "runs").glob("*/*/cache/*"))) == 4


def test_a_worker_killed_mid_run_loses_no_item_and_runs_none_twice(
    tmp_path: Path, cluster: Cluster, scripted_server: Callable[..., OpenAIServer]
) -> None:
    from eval.cluster import DaskExecutor
    from eval.grid import load_config
    from eval.runner import Experiment, RunOutcome

    server = scripted_server(StoryResponder(), latency=0.2)  # items last long enough to be killed mid-way
    config = load_config(write_config(tmp_path, server, "killed"))
    out = config.out_dir
    outcomes: list[RunOutcome] = []
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            outcomes.append(Experiment(config).run(executor=DaskExecutor(config, cluster.address)))
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    driver = threading.Thread(target=drive)
    driver.start()
    victim = ""
    with distributed.Client(cluster.address, timeout="60s") as watcher:
        deadline = time.monotonic() + WAIT
        while not victim and driver.is_alive() and time.monotonic() < deadline:
            busy = [address for address, keys in watcher.processing().items() if keys]
            names = {a: w["name"] for a, w in watcher.scheduler_info()["workers"].items()}
            if busy and (out / "runs").is_dir() and server.completions:  # a task is making LLM calls
                victim = str(names[busy[0]])
            else:
                time.sleep(0.1)
    assert victim, "no worker was ever busy"
    cluster.kill(victim)
    killed = time.monotonic()
    driver.join(timeout=600)
    assert not driver.is_alive() and not errors, errors
    outcome = outcomes[0]
    assert outcome.ran == 4 and outcome.stopped is None
    rows = rows_of(out)
    assert len(rows) == 4, rows  # one line per item: nothing lost, nothing written twice
    assert len({(r["cell"], r["item"]["id"]) for r in rows}) == 4
    assert all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
    # the dead worker's share of the budget comes back within seconds: no long pause without a call
    arrivals = [killed] + sorted(entry.arrived for entry in server.log if entry.arrived > killed)
    pause = max(later - earlier for earlier, later in zip(arrivals, arrivals[1:], strict=False))
    print(f"longest pause between calls after the kill: {pause:.1f}s")
    assert pause <= 15, pause

    before = len(server.completions)
    again = Experiment(config).run(executor=DaskExecutor(config, cluster.address))
    assert again.ran == 0 and again.skipped == 4
    assert len(server.completions) == before
    assert len(rows_of(out)) == 4


def test_the_executor_keeps_to_its_own_client(
    tmp_path: Path, cluster: Cluster, scripted_server: Callable[..., OpenAIServer]
) -> None:
    """A client the caller opens (and closes) while the executor lives is neither taken nor given its budget.

    A Semaphore left to bind itself takes whichever client is the default when it is first used; closing that
    client closed the loop under the experiment's budget ("IOLoop is closed" when the grid ended).
    """
    from eval.cluster import DaskExecutor
    from eval.grid import load_config

    config = load_config(write_config(tmp_path, scripted_server(StoryResponder()), "own-client"))
    with distributed.Client(cluster.address, timeout="60s") as callers:
        executor = DaskExecutor(config, cluster.address)
        assert distributed.get_client() is callers  # the caller's default client stays theirs
        with distributed.Client(cluster.address, timeout="60s", set_as_default=True):
            pass  # another client opened and closed, as a watcher would
        assert executor.semaphore.loop is executor.client.loop
        assert executor.semaphore.scheduler is executor.client.scheduler
    executor.close()  # the budget and the client outlive the caller's clients
    assert executor.client.status == "closed"


def test_without_a_scheduler_a_local_cluster_runs_the_grid(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--executor dask`` alone starts two worker processes on 127.0.0.1, runs every item, and stops them."""
    server = scripted_server(StoryResponder(), latency=0.05)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the worker processes import this checkout
    from storyjudge.apps.cli import app

    result = CliRunner().invoke(
        app,
        ["eval", "run", str(write_config(tmp_path, server, "local-cluster")), "--executor", "dask"]
        + ["--concurrency", "2"],
    )
    assert result.exit_code == 0, result.output
    assert "a local cluster on 127.0.0.1" in result.output
    rows = rows_of(tmp_path / "local-cluster")
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
    assert server.max_in_flight <= 2, server.max_in_flight
    assert len(list((tmp_path / "local-cluster" / "runs").glob("*/*/cache/*"))) == 4  # ran on the workers


def _loaded() -> list[str]:
    """On a worker: which of what an item needs is imported already."""
    wanted = ("eval.runner", "graphs.refine", "chromadb", "torch")
    return [name for name in wanted if name in sys.modules]


def test_a_local_cluster_worker_killed_mid_run_is_restarted_warm_and_loses_no_item(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The LocalCluster's workers load what items need before they join (``eval.dask_preload``).

    So the worker its nanny starts again after a kill is handed work warm, not seconds of imports and the
    embedder away from its first call; killed with no call in flight, no item is lost or run twice.
    """
    from eval.cluster import DaskExecutor
    from eval.grid import load_config
    from eval.runner import Experiment, RunOutcome

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the worker processes import this checkout
    server = scripted_server(StoryResponder(), latency=0.2)
    config = load_config(write_config(tmp_path, server, "local-killed"))
    executor = DaskExecutor(config)
    warm = ["eval.runner", "graphs.refine", "chromadb", "torch"]
    assert list(executor.client.run(_loaded).values()) == [warm, warm]  # before any item, each worker is warm
    outcomes: list[RunOutcome] = []
    driver = threading.Thread(target=lambda: outcomes.append(Experiment(config).run(executor=executor)))
    driver.start()
    victim, deadline = 0, time.monotonic() + WAIT
    while not victim and driver.is_alive() and time.monotonic() < deadline:
        busy = [address for address, keys in executor.client.processing().items() if keys]
        idle = all(entry.answered for entry in list(server.log))  # no call in flight
        if busy and len(server.completions) > 10 and idle:
            victim = executor.client.run(os.getpid, workers=busy[:1])[busy[0]]
        else:
            time.sleep(0.02)
    assert victim, "no worker was ever busy"
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    driver.join(timeout=600)
    assert not driver.is_alive() and outcomes and outcomes[0].ran == 4
    rows = rows_of(config.out_dir)
    assert len({(r["cell"], r["item"]["id"]) for r in rows}) == len(rows) == 4
    assert all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
    arrivals = [killed] + sorted(entry.arrived for entry in server.log if entry.arrived > killed)
    pause = max(later - earlier for earlier, later in zip(arrivals, arrivals[1:], strict=False))
    print(f"longest pause between calls after the kill: {pause:.1f}s")
