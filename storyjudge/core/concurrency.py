"""How many things run at once: graph branch threads, LLM slots (``llm_slots``, by ``priority``), cancellation.

Threads live as long as their work: no process-wide pool, whose idle workers would never end in a process that
runs one run after another (the UI, the tests); the LLM slots bound the calls in flight. ``cancel()`` makes calls
raise ``Cancelled``, a ``BaseException`` so that no ``except Exception`` counts a cancelled call as failed
(LangGraph keeps the completed tasks' writes and ``--resume`` redoes only the rest).
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

BRANCH_THREADS = 64  # for a compiled graph's ``Send`` branches; the real bound is the run's LLM slots
LOCAL_BRANCH_THREADS = 2  # nearly in order for an in-process model (a streaming run's waiter holds one)


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
    """The futures that are done once any is (none only after a ``timeout``); ``Cancelled`` once cancelled."""
    stop = _cancel
    check_cancelled()
    done, _ = wait_futures([*futures, stop], timeout, FIRST_COMPLETED)
    done.discard(stop)
    if stop.done() or (timeout is None and not done):  # even one reset before this thread saw it
        raise Cancelled("cancelled")
    return done


def in_parallel(calls: Sequence[Callable[[], T]]) -> list[T]:
    """The calls' values in order, run at once (the rest on workers, in copies of the caller's context)."""
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(len(calls) - 1, thread_name_prefix="storyjudge-branch") as pool:
        rest = [pool.submit(contextvars.copy_context().run, call) for call in calls[1:]]
        first = calls[0]()
    return [first, *(future.result() for future in rest)]


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``'s value on a thread of its own, or ``TimeoutError`` after ``seconds`` in all (not per read)."""
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


# how many dependent LLM calls wait on the calls made in this context (higher is sent first)
call_priority: contextvars.ContextVar[int] = contextvars.ContextVar("call_priority", default=0)
AFTER_EVERY_OTHER = -(2**62)  # calls only a join over all of them waits on (a scene's extraction samples)


@contextmanager
def priority(level: int) -> Iterator[None]:
    """Calls made inside the block take slots before those of a lower level."""
    token = call_priority.set(level)
    try:
        yield
    finally:
        call_priority.reset(token)


class Slots:
    """A run's LLM slots: a semaphore whose release wakes only the waiter it serves, the best by priority."""

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
        return _budgets.setdefault(key, Slots(max(ctx.concurrency, 1)))


def llm_slots(ctx: Context) -> AbstractContextManager[Any]:
    """The run's budget of LLM calls in flight: an installed factory's, else the run's own ``Slots``."""
    slot = _factory(ctx) if _factory is not None else None
    return slot if slot is not None else run_semaphore(ctx)
