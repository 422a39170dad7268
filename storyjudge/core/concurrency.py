"""How many things run at once, decided in one place: graph branch threads, LLM calls in flight, cancellation.

- **Branch threads**: graphs compile with ``BRANCH_THREADS`` (LangGraph's default pool, cores + 4, would cap the
  calls in flight on a small machine); ``graph_config(ctx)`` narrows it to twice the run's LLM budget (a branch
  waiting for a slot costs a thread, not a call), or to 2 for an in-process model (one call at a time).
- **LLM slots** (``llm_slot``): ``ctx.concurrency`` calls in flight, one semaphore per run (keyed by its run
  directory, cache directory, base URL and concurrency: two runs of one process never share slots, every node
  of one run does), waiters served by ``priority`` (a fact's decomposition before verdicts), then arrival.
  ``set_budget_factory`` puts another budget behind the same interface, a context manager held around each
  call: a Dask cluster's (``eval.cluster``).
- **Threads** live as long as their work: a branch's calls made at once (``in_parallel``) run on a pool that
  ends with them, and each HTTP call on a thread of its own (``within``), so a caller can give up on it at its
  deadline. No process-wide pool: its idle workers would never end, and a process that runs one run after
  another (the UI, an experiment, the test suite) would keep its busiest moment's threads; a thread takes well
  under a millisecond to start, an LLM call milliseconds at least. The LLM slots bound the calls in flight.
- **Cancellation** is process-wide: ``cancel()`` (Ctrl-C) makes every call not yet sent raise ``Cancelled`` and
  ends every wait for a slot, an answer or a retry. A ``BaseException``, so no ``except Exception`` counts a
  cancelled call as failed: LangGraph keeps the completed tasks' writes and ``--resume`` redoes only the rest.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, TypeVar

from storyjudge.core.context import Context

T = TypeVar("T")

BRANCH_THREADS = 64
"""Threads a compiled graph may use for its ``Send`` branches; the real bound is the run's LLM slots."""

LOCAL_BRANCH_THREADS = 2
"""Branch threads for an in-process model: nearly in order, a scene's samples reuse its prompt cache (not 1: a
streaming run's queue waiter holds one)."""


def branch_threads(ctx: Context, *, local: bool = False) -> int:
    """Branch threads for a run: twice its LLM budget, or ``LOCAL_BRANCH_THREADS`` for an in-process model."""
    return LOCAL_BRANCH_THREADS if local else max(ctx.concurrency, 1) * 2


def graph_config(ctx: Context, *, local: bool = False, **config: Any) -> dict[str, Any]:
    """A LangGraph run config (``configurable`` etc. from ``config``) with the run's branch threads."""
    return {**config, "max_concurrency": branch_threads(ctx, local=local)}


class Cancelled(BaseException):
    """The run was cancelled (Ctrl-C): an LLM call not sent, or no longer waited for."""


_cancel: Future[None] = Future()  # done once cancelled; every wait here waits on it too


def cancel() -> None:
    """Cancel every LLM call of this process not yet answered; calls from now on raise ``Cancelled``."""
    with suppress(InvalidStateError):
        _cancel.set_result(None)


def check_cancelled() -> None:
    """Raise ``Cancelled`` when the process's work was cancelled."""
    if _cancel.done():
        raise Cancelled("cancelled")


def wait_any(futures: Iterable[Future[Any]], timeout: float | None = None) -> set[Future[Any]]:
    """The futures that are done once any is (none only after a ``timeout``); ``Cancelled`` once cancelled.

    The wait sleeps until one of them, or the cancellation, is done: nothing polls.
    """
    stop = _cancel
    check_cancelled()
    done, _ = wait_futures([*futures, stop], timeout, FIRST_COMPLETED)
    done.discard(stop)
    if stop.done() or (timeout is None and not done):  # even one reset before this thread saw it
        raise Cancelled("cancelled")
    return done


def in_parallel(calls: Sequence[Callable[[], T]]) -> list[T]:
    """The calls' values in order, the calls run at once: the first in this thread, the rest on workers.

    Each call runs in a copy of the caller's context (progress still reaches the stream). The workers end with
    the calls; the first exception, in call order, is raised once all have ended.
    """
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(len(calls) - 1, thread_name_prefix="storyjudge-branch") as pool:
        rest = [pool.submit(contextvars.copy_context().run, call) for call in calls[1:]]
        first = calls[0]()
    return [first, *(future.result() for future in rest)]


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``'s value, or ``TimeoutError`` once ``seconds`` have passed in all, or ``Cancelled`` at once.

    An HTTP client's timeout bounds each read, not the request: a server that trickles bytes could hold a call
    far longer. So the call runs on a thread of its own, in a copy of the caller's context, and is abandoned at
    its deadline (its own read timeout ends it soon after, and the thread with it).
    """
    answer: Future[T] = Future()

    def run() -> None:
        try:
            answer.set_result(call())
        except BaseException as exc:  # noqa: BLE001 - the caller raises it
            answer.set_exception(exc)

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(run,), name="storyjudge-call", daemon=True).start()
    if not wait_any([answer], seconds):
        raise TimeoutError(f"no answer within the request timeout of {seconds:g}s")
    return answer.result()


call_priority: contextvars.ContextVar[int] = contextvars.ContextVar("call_priority", default=0)
"""How many dependent LLM calls wait on the calls made in this context (higher is sent first)."""

AFTER_EVERY_OTHER = -(2**62)
"""The level of calls that only a join over all of them waits on (a scene's extraction samples, joined by the
CKG build): sending one early brings nothing forward until the last is answered, so every other call goes first."""


@contextmanager
def priority(level: int) -> Iterator[None]:
    """Calls made inside the block take slots before those of a lower level."""
    token = call_priority.set(level)
    try:
        yield
    finally:
        call_priority.reset(token)


class Slots:
    """A run's LLM slots: a semaphore whose release wakes only the waiter it serves, the best by priority.

    The critical-path bound assumes the calls with the longest chain of dependent calls after them go first.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, int, Future[None]]] = []
        self._order = itertools.count()

    def acquire(self, priority: int = 0) -> None:
        """Take a slot, waiting for one if none is free; ``Cancelled`` if the work is cancelled meanwhile."""
        with self._lock:
            if self._free:
                self._free -= 1
                return
            ticket: Future[None] = Future()
            heapq.heappush(self._waiting, (-priority, next(self._order), ticket))
        try:
            wait_any([ticket])
        except BaseException:
            with self._lock:
                if ticket.done():
                    self._release_locked()  # handed a slot while being cancelled: pass it on
                else:
                    self._waiting = [entry for entry in self._waiting if entry[2] is not ticket]
                    heapq.heapify(self._waiting)
            raise

    def release(self) -> None:
        """Give a slot back: to the best waiter, or to the free ones."""
        with self._lock:
            self._release_locked()

    def _release_locked(self) -> None:
        if self._waiting:
            heapq.heappop(self._waiting)[2].set_result(None)
        elif self._free >= self.size:
            raise ValueError("a slot was released more often than it was taken")
        else:
            self._free += 1

    def __enter__(self) -> Slots:
        self.acquire(call_priority.get())
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


BudgetFactory = Callable[[Context], AbstractContextManager[Any] | None]  # None: the run's own slots
_factory: BudgetFactory | None = None
_budgets: dict[tuple[str, str, str, int], Slots] = {}
_budgets_lock = threading.Lock()


def set_budget_factory(factory: BudgetFactory | None) -> BudgetFactory | None:
    """Install ``factory`` as the source of LLM slots for this process (None: per-run only); returns the old one."""
    global _factory
    previous, _factory = _factory, factory
    return previous


def run_semaphore(ctx: Context) -> Slots:
    """The run's own ``ctx.concurrency`` LLM slots, keyed by run directory, cache directory, URL, concurrency."""
    run_dir, cache_dir = (os.path.abspath(path) if path else "" for path in (ctx.run_dir, ctx.cache_dir))
    key = (run_dir, cache_dir, ctx.base_url.rstrip("/"), ctx.concurrency)
    with _budgets_lock:
        if key not in _budgets:
            _budgets[key] = Slots(max(ctx.concurrency, 1))
        return _budgets[key]


def llm_slots(ctx: Context) -> AbstractContextManager[Any]:
    """The run's budget of LLM calls in flight: an installed factory's, else the run's own ``Slots``."""
    slot = _factory(ctx) if _factory is not None else None
    return slot if slot is not None else run_semaphore(ctx)


@contextmanager
def llm_slot(ctx: Context) -> Iterator[None]:
    """Hold one of the run's LLM slots around a call; waiting for it ends with ``Cancelled`` on cancellation."""
    check_cancelled()
    with llm_slots(ctx):
        check_cancelled()
        yield
