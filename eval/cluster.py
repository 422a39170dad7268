"""Experiments on a Dask cluster: a task per (cell, item), one budget of LLM calls in flight for all workers.

``DaskExecutor`` is an ``eval.runner.ItemExecutor``: the driver (``Experiment.run``) submits items and collects
their rows as they finish (``distributed.as_completed``) and alone writes ``rows.jsonl``, so a stopped
experiment resumes exactly as with local threads. Without a scheduler address it starts a small
``LocalCluster`` on 127.0.0.1 (2 worker processes, 1 thread each), whose workers load what items need
before they join (``eval.dask_preload``), so that one the nanny restarts after a kill is handed work warm.

On the workers every LLM call holds a lease of one ``distributed.Semaphore`` named after the experiment, with
``max_leases`` the experiment's ``concurrency``: the total in flight across the cluster, not per worker. It is
installed through ``storyjudge.core.concurrency.set_budget_factory`` for the run directories under the
experiment's output directory, so the core never imports Dask. Retries back off outside the lease.

Shared state: the output directory must be the same path on every machine (a shared file system); each item
gets an LLM cache of its own in its run directory (SQLite files are never written by two processes, which on a
network file system is unsafe), and the items of one narrative run one after another, since they share a run
directory (its embedded Chroma store). Dask is optional: ``pip install 'storyjudge[dask]'``.
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

LOCAL_WORKERS = 2
"""Worker processes of the LocalCluster started when no scheduler is given (1 thread each)."""

LEASES = {
    "distributed.scheduler.locks.lease-timeout": "6s",
    "distributed.scheduler.locks.lease-validation-interval": "1s",
}
"""How soon a dead worker's leases come back: Dask's defaults (30 s, checked every 10 s) hold a killed worker's
share of the budget for up to 40 s. The driver registers the budget with this timeout and the workers refresh
their leases at a fifth of it; the validation interval applies where the scheduler is started here (a
LocalCluster); an external scheduler uses its own
(``DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_VALIDATION_INTERVAL``)."""


PRELOAD = "eval.dask_preload"
"""The workers' preload module (``dask worker --preload eval.dask_preload --preload-argv EMBEDDER``)."""


def embedder_of(config: ExperimentConfig) -> str:
    """The embedder the experiment's items index their scenes with (every task indexes)."""
    return str(config.context.get("embedder") or Context.model_fields["embedder"].default)


def llm_total(config: ExperimentConfig) -> int:
    """The experiment's LLM calls in flight: its ``concurrency`` setting (``llm_concurrency`` when unset)."""
    return max(1, int(config.context.get("concurrency") or config.llm_concurrency))


def budget_name(config: ExperimentConfig) -> str:
    """The cluster-wide semaphore's name: the experiment, its output directory and its total."""
    digest = hashlib.sha256(str(Path(config.out_dir).resolve()).encode()).hexdigest()[:10]
    return f"storyjudge-llm-{slug(config.name)}-{digest}-{llm_total(config)}"


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigError(
            "--executor dask needs Dask: pip install 'storyjudge[dask]' (or 'dask[distributed]')"
        ) from None
    return distributed


class DaskExecutor:
    """Items as tasks on a Dask cluster (``scheduler``: its address; empty: a LocalCluster on 127.0.0.1)."""

    exclusive_groups = True

    def __init__(self, config: ExperimentConfig, scheduler: str = "", *, width: int | None = None) -> None:
        distributed = _import_distributed()
        import dask

        config.out_dir = Path(config.out_dir).resolve()  # workers resolve no relative path against our cwd
        self.config = config
        self.cluster: Any = None
        # not the process's default client: anything that binds to "the current client" later (another
        # Client the caller opens, then closes) must not take ours, nor ours theirs
        if scheduler:
            self.client = distributed.Client(scheduler, timeout="30s", set_as_default=False)
        else:
            with dask.config.set(LEASES):  # the scheduler's validation interval, the workers' refresh
                self.cluster = distributed.LocalCluster(
                    host="127.0.0.1",
                    n_workers=LOCAL_WORKERS,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    preload=[PRELOAD],  # a worker restarted after a kill joins warm
                    preload_argv=[[embedder_of(config)]],
                )
            self.client = distributed.Client(self.cluster, set_as_default=False)
        threads = sum(self.client.nthreads().values())
        self.width = max(1, width or threads)
        self.budget = (budget_name(config), llm_total(config))
        # bound to our client explicitly: left to itself a Semaphore binds to whichever client is the default
        # when first used, and closing that one (e.g. a second client opened by the caller) closes its loop
        with dask.config.set(LEASES):  # the first registration sets the budget's lease timeout
            self.semaphore = distributed.Semaphore(
                max_leases=self.budget[1],
                name=self.budget[0],
                scheduler_rpc=self.client.scheduler,
                loop=self.client.loop,
            )
            self.semaphore.register()
        self._done = distributed.as_completed(loop=self.client.loop)
        self._items: dict[str, tuple[Cell, EvalItem]] = {}
        self._futures: dict[str, Any] = {}

    @property
    def address(self) -> str:
        """The scheduler's address."""
        return str(self.client.scheduler.address)

    def submit(self, cell: Cell, item: EvalItem) -> None:
        """Submit the item as a task (never pure: it calls models and writes its run directory)."""
        key = f"item-{slug(cell.id)}-{slug(item.id)}-{os.urandom(4).hex()}"
        future = self.client.submit(run_on_worker, self.config, cell, item, self.budget, key=key, pure=False)
        self._items[future.key] = (cell, item)
        self._futures[future.key] = future
        self._done.add(future)

    def next_done(self) -> tuple[Cell, EvalItem, ItemOutcome]:
        """The next task to finish, and its outcome (a task that failed on the cluster is an ``error``)."""
        future = next(self._done)
        cell, item = self._items.pop(future.key)
        self._futures.pop(future.key, None)
        try:
            outcome: ItemOutcome = future.result()
        except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: the item's workers died too often
            outcome = ("error", f"{type(exc).__name__}: {exc}")
        future.release()
        return cell, item, outcome

    def close(self) -> None:
        """Cancel tasks not finished, drop the budget, and close the client (and the LocalCluster we started)."""
        try:
            if self._futures:
                self.client.cancel(list(self._futures.values()))
            self.semaphore.close()
        finally:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()


# ----------------------------------------------------------------------------------------------------------
# worker side

_worker_lock = threading.Lock()
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
    """Make every LLM call of runs under ``out_dir`` in this process hold a lease of the named semaphore.

    Called from a task's thread, where the semaphore finds its worker (LangGraph's branch threads do not).
    """
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
        experiment = _experiments.get(key)
        if experiment is None:
            experiment = _experiments[key] = Experiment(config)
    return experiment.attempt(cell, item, own_cache=True)
