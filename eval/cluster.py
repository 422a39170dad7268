"""Experiments on a Dask cluster: a task per (cell, item), one budget of LLM calls in flight for all workers.

``DaskExecutor`` is an ``eval.runner.ItemExecutor``; the driver alone writes rows, so resuming is as with
threads. Without a scheduler it starts a LocalCluster (2 preloaded workers). Every LLM call on the workers
holds a lease of one ``distributed.Semaphore`` (the experiment's ``concurrency``, cluster-wide), installed
through ``core.concurrency.set_budget_factory`` so the core never imports Dask. The output directory must be
shared; each item gets its own LLM cache (no SQLite file written by two processes) and a narrative's items run
one after another (they share a Chroma store). Dask is optional: ``pip install 'storyjudge[dask]'``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

from eval.datasets import EvalItem
from eval.grid import Cell, ExperimentConfig
from eval.runner import Experiment, ItemOutcome
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.rundir import slug

LEASES = {
    "distributed.scheduler.locks.lease-timeout": "6s",
    "distributed.scheduler.locks.lease-validation-interval": "1s",
}
"""A dead worker's leases come back in seconds (Dask's defaults hold them up to 40 s); an external scheduler
uses its own validation interval (``DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_VALIDATION_INTERVAL``)."""


def llm_total(config: ExperimentConfig) -> int:
    """The experiment's LLM calls in flight: its ``concurrency`` setting (``llm_concurrency`` when unset)."""
    return max(1, int(config.context.get("concurrency") or config.llm_concurrency))


class DaskExecutor:
    """Items as tasks on a Dask cluster (``scheduler``: its address; empty: a LocalCluster on 127.0.0.1)."""

    exclusive_groups = True

    def __init__(self, config: ExperimentConfig, scheduler: str = "", *, width: int | None = None) -> None:
        try:
            import dask
            import distributed
        except ImportError:
            raise ConfigError(
                "--executor dask needs Dask: pip install 'storyjudge[dask]' (or 'dask[distributed]')"
            ) from None
        config.out_dir = Path(config.out_dir).resolve()  # workers resolve no relative path against our cwd
        self.config = config
        self.cluster: Any = None
        # not the default client: a Client the caller opens and closes later must not take ours, nor ours theirs
        if scheduler:
            self.client = distributed.Client(scheduler, timeout="30s", set_as_default=False)
        else:
            embedder = str(config.context.get("embedder") or Context.model_fields["embedder"].default)
            with dask.config.set(LEASES):  # the scheduler's validation interval, the workers' refresh
                self.cluster = distributed.LocalCluster(
                    host="127.0.0.1",
                    n_workers=2,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    preload=["eval.dask_preload"],  # a worker restarted after a kill joins warm
                    preload_argv=[[embedder]],
                )
            self.client = distributed.Client(self.cluster, set_as_default=False)
        self.width = max(1, width or sum(self.client.nthreads().values()))
        digest = hashlib.sha256(str(config.out_dir).encode()).hexdigest()[:10]
        self.budget = (f"storyjudge-llm-{slug(config.name)}-{digest}-{llm_total(config)}", llm_total(config))
        # bound to our client: left to itself it binds to the default client, whose closing closes its loop
        with dask.config.set(LEASES):  # the first registration sets the budget's lease timeout
            self.semaphore = distributed.Semaphore(
                max_leases=self.budget[1],
                name=self.budget[0],
                scheduler_rpc=self.client.scheduler,
                loop=self.client.loop,
            )
            self.semaphore.register()
        self._done = distributed.as_completed(loop=self.client.loop)
        self._pending: dict[Any, tuple[Cell, EvalItem, Any]] = {}  # by task key: the item and its future

    def submit(self, cell: Cell, item: EvalItem) -> None:
        """Submit the item as a task (never pure: it calls models and writes its run directory)."""
        key = f"item-{slug(cell.id)}-{slug(item.id)}-{os.urandom(4).hex()}"
        future = self.client.submit(run_on_worker, self.config, cell, item, self.budget, key=key, pure=False)
        self._pending[future.key] = (cell, item, future)
        self._done.add(future)

    def next_done(self) -> tuple[Cell, EvalItem, ItemOutcome]:
        """The next task to finish, and its outcome (a task that failed on the cluster is an ``error``)."""
        future = next(self._done)
        cell, item, _ = self._pending.pop(future.key)
        try:
            outcome: ItemOutcome = future.result()
        except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: the item's workers died too often
            outcome = ("error", f"{type(exc).__name__}: {exc}")
        future.release()
        return cell, item, outcome

    def close(self) -> None:
        """Cancel tasks not finished, drop the budget, and close the client (and the LocalCluster we started)."""
        try:
            if self._pending:
                self.client.cancel([future for _, _, future in self._pending.values()])
            self.semaphore.close()
        finally:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()


_worker_lock = threading.Lock()  # the worker side from here on
_semaphores: dict[str, Any] = {}  # output directory (absolute) -> its experiment's distributed.Semaphore
_experiments: dict[tuple[str, str], Experiment] = {}


def _budget_for(ctx: Any) -> Any:
    """The budget factory installed on workers: the semaphore of the experiment the run belongs to."""
    run_dir = os.path.abspath(ctx.run_dir) if ctx.run_dir else ""
    with _worker_lock:
        for out_dir, semaphore in _semaphores.items():
            if run_dir.startswith(out_dir + os.sep):
                return semaphore
    return None


def install_budget(out_dir: Path, name: str, total: int) -> None:
    """Make every LLM call of runs under ``out_dir`` hold a lease (called from a task's thread: it finds its worker)."""
    import dask
    import distributed

    from storyjudge.core import concurrency

    key = str(Path(out_dir).resolve())
    with _worker_lock:
        semaphore = _semaphores.get(key)
        if semaphore is None or semaphore.name != name:
            with dask.config.set(LEASES):  # leases refreshed at a fifth of the driver's timeout
                semaphore = distributed.Semaphore(max_leases=total, name=name)
                semaphore.register()  # binds it to this worker's scheduler connection and loop
            _semaphores[key] = semaphore
        concurrency.set_budget_factory(_budget_for)


def run_on_worker(
    config: ExperimentConfig, cell: Cell, item: EvalItem, budget: tuple[str, int]
) -> ItemOutcome:
    """The task: one item of the experiment, under the cluster-wide LLM budget, with a cache of its own."""
    install_budget(config.out_dir, *budget)
    key = (str(config.out_dir), config.name)
    with _worker_lock:
        if key not in _experiments:  # built once per worker process, not once per task
            _experiments[key] = Experiment(config)
        experiment = _experiments[key]
    return experiment.attempt(cell, item, own_cache=True)
