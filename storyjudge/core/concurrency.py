"""How many things run at once, decided in one place: graph branch threads and LLM calls in flight.

Two bounds, one owner each:

- **Branch threads** (LangGraph's ``max_concurrency``): how many ``Send`` branches LangGraph runs at once. Every
  graph is compiled with ``BRANCH_THREADS`` (LangGraph's default pool, cores + 4 threads, would otherwise cap
  calls in flight on a small machine); callers that run a graph pass ``graph_config(ctx)``, which narrows it to
  twice the run's LLM budget (a branch waiting for a slot costs a thread, not a call), or to 2 when an
  in-process model serves the roles that fan out (it answers one call at a time; running branches nearly in
  order lets a scene's samples reuse its prompt cache; not 1, since a streaming run's queue waiter holds one).
- **LLM slots** (``llm_slots(ctx)``): the real bound, ``ctx.concurrency`` HTTP calls in flight, taken around
  every remote call in ``storyjudge.core.llm``. Slots belong to a run: a budget is keyed by the run's
  directory, its cache directory, the server's base URL and the concurrency, so two runs in one process (the
  web UI, an evaluation grid, tests) each get their own ``concurrency`` slots even when their numbers are
  equal, while every node and subgraph of one run, which all see the same settings, share one budget. Runs
  that set neither a run directory nor a cache directory are one run as far as slots go (they also share the
  default cache). A server that must be protected across runs needs its own limit; storyjudge's is per run.
  Waiters are served by ``priority`` (a sentence's decomposition before verdicts), then in arrival order. A
  call gives its slot back when the server's answer arrives (``answer_arrived``, the HTTP client's response
  hook), not after the client has parsed it; a chain's slot is kept from the join-only extraction samples
  for its next call (``Slots.KEEP_SECONDS``).

The slots are pluggable: ``set_budget_factory(factory)`` installs a function that maps a run's Context to the
context manager held around each call, or to None for the per-run semaphore above. An experiment on a Dask
cluster installs one on every worker so that its LLM calls share one cluster-wide budget (``eval.dask``); the
core never imports Dask.

**Worker threads** (``in_worker``, ``in_parallel``): a call that must be waited for with a deadline, or several
calls of one branch made at once, run on daemon threads that are kept between calls instead of one new thread
(or thread pool) per call: starting a thread costs a few milliseconds of the critical path on a busy small
machine, and a run makes thousands of calls. Daemon, so an abandoned call never holds up the process's exit.

**Cancellation** is process-wide: ``cancel()`` (the CLI's Ctrl-C handler calls it) makes every LLM call not yet
sent raise ``Cancelled`` at once, whether it is about to start or waiting for a slot, and ends the wait for
calls in flight. ``Cancelled`` is a ``BaseException``, like ``KeyboardInterrupt``: no ``except Exception`` in a
node or runner records a cancelled call as a failed one, so the task fails, LangGraph keeps the writes of the
tasks that completed, and ``--resume`` redoes only the cancelled work.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from storyjudge.core.context import Context

T = TypeVar("T")

BRANCH_THREADS = 64
"""Threads a compiled graph may use for its ``Send`` branches; the real bound is the run's LLM slots."""

LOCAL_BRANCH_THREADS = 2
"""Branch threads when an in-process model serves the fanned-out roles (see the module docstring)."""


def branch_threads(ctx: Context, *, local: bool = False) -> int:
    """Branch threads for a run: twice its LLM budget, or ``LOCAL_BRANCH_THREADS`` for an in-process model."""
    if local:
        return LOCAL_BRANCH_THREADS
    return max(ctx.concurrency, 1) * 2


def graph_config(ctx: Context, *, local: bool = False, **config: Any) -> dict[str, Any]:
    """A LangGraph run config (``configurable`` etc. from ``config``) with the run's branch threads."""
    return {**config, "max_concurrency": branch_threads(ctx, local=local)}


def _path(value: str) -> str:
    return os.path.abspath(value) if value else ""


def run_key(ctx: Context) -> tuple[str, str, str, int]:
    """What identifies a run's LLM budget: run directory, cache directory, base URL, concurrency."""
    return (_path(ctx.run_dir), _path(ctx.cache_dir), ctx.base_url.rstrip("/"), ctx.concurrency)


_budgets: dict[tuple[str, str, str, int], Slots] = {}
_budgets_lock = threading.Lock()


BudgetFactory = Callable[[Context], AbstractContextManager[Any] | None]
"""Maps a run's Context to the context manager held around each of its LLM calls (None: the per-run default)."""

_factory: BudgetFactory | None = None


def set_budget_factory(factory: BudgetFactory | None) -> BudgetFactory | None:
    """Install ``factory`` as the source of LLM slots for this process (None: per-run only); returns the old one."""
    global _factory
    previous, _factory = _factory, factory
    return previous


def llm_slots(ctx: Context) -> AbstractContextManager[Any]:
    """The run's budget of LLM calls in flight; hold it (``with``) around each remote call.

    By default a semaphore of ``ctx.concurrency`` slots per run; an installed budget factory may give another.
    """
    factory = _factory
    if factory is not None:
        slot = factory(ctx)
        if slot is not None:
            return slot
    return run_semaphore(ctx)


def run_semaphore(ctx: Context) -> Slots:
    """The run's own ``ctx.concurrency`` LLM slots."""
    key = run_key(ctx)
    with _budgets_lock:
        if key not in _budgets:
            _budgets[key] = Slots(max(ctx.concurrency, 1))
        return _budgets[key]


class _Ticket:
    """One caller waiting for a slot; ``granted`` once a release handed it one."""

    __slots__ = ("event", "granted")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.granted = False


class Slots:
    """A run's LLM slots: a semaphore that serves waiters by priority, then arrival, and wakes none in vain.

    A release hands its slot straight to the best waiter and wakes only that one; waiters sleep without
    polling (``cancel()`` wakes them). Sixteen calls in flight and as many branches waiting would otherwise
    wake every 50 ms to look, which on a small machine costs a noticeable share of the one interpreter lock.
    Priority is what the caller's context says (``call_priority``): the critical-path bound assumes the calls
    with the longest chain of dependent calls after them are sent first (a fact's decomposition before
    other facts' verdicts).

    One exception to handing a slot straight on: a call above ``AFTER_EVERY_OTHER`` whose slot would go to a
    call at that level keeps it for ``KEEP_SECONDS``, for the next call above that level (``_keep``).
    """

    KEEP_SECONDS = 0.1
    """How long a kept slot waits for the next call of a chain before it goes to the join-only calls. The next
    call of a chain asks a few milliseconds after the answer (the summarizer's artifact removal 7 ms after its
    chunk summary, measured at 16 in flight); at a hosted model's latency 0.1 s is a small share of a call."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, int, _Ticket]] = []
        self._order = itertools.count()
        # deadlines (time.monotonic()) of the slots kept for a chain's next call, oldest first
        self._kept: list[float] = []

    def acquire(self, priority: int = 0) -> None:
        """Take a slot, waiting for one if none is free; ``Cancelled`` if the work is cancelled meanwhile."""
        with self._lock:
            self._expire_locked()
            if self._kept and priority > AFTER_EVERY_OTHER:
                self._kept.pop(0)
                return
            if self._free:
                self._free -= 1
                return
            ticket = _Ticket()
            heapq.heappush(self._waiting, (-priority, next(self._order), ticket))
        try:
            wait_cancellable(ticket.event)
            if not ticket.granted:  # woken by a cancellation that was reset before it was seen
                raise Cancelled("cancelled")
        except BaseException:
            with self._lock:
                if ticket.granted:
                    self._release_locked()  # handed a slot while being cancelled: pass it on
                else:
                    self._waiting = [entry for entry in self._waiting if entry[2] is not ticket]
                    heapq.heapify(self._waiting)
            raise

    def release(self, priority: int | None = None) -> None:
        """Give back a slot taken at ``priority`` (None: unknown): to the best waiter, or to the free ones."""
        with self._lock:
            self._expire_locked()
            if priority is not None and self._keep(priority):
                return
            self._release_locked()

    def _keep(self, priority: int) -> bool:
        """Keep the slot of a call above ``AFTER_EVERY_OTHER`` from the join-only calls for a while.

        Why: a chain beside the index (the summarizer's steps, each waiting on the one before) asks for its
        next slot a few milliseconds after its answer, and by then an extraction sample waiting at the lowest
        level has taken the slot, and the chain waits a whole latency for the next answer. The critical-path
        bound gives the chain one slot in each wave, as this does. Kept only from calls at the lowest level,
        which nothing waits on but their join: a verdict waiting for a slot freed by a decomposition gets it.
        """
        if priority <= AFTER_EVERY_OTHER or not self._waiting or -self._waiting[0][0] > AFTER_EVERY_OTHER:
            return False
        self._kept.append(time.monotonic() + self.KEEP_SECONDS)
        timer = threading.Timer(self.KEEP_SECONDS, self._expire)
        timer.daemon = True
        timer.start()
        return True

    def _expire(self) -> None:
        with self._lock:
            self._expire_locked()

    def _expire_locked(self) -> None:
        """Hand on the kept slots whose time is up."""
        now = time.monotonic()
        while self._kept and self._kept[0] <= now:
            self._kept.pop(0)
            self._release_locked()

    def _release_locked(self) -> None:
        if self._waiting:
            _, _, ticket = heapq.heappop(self._waiting)
            ticket.granted = True
            ticket.event.set()
            return
        if self._free >= self.size:
            raise ValueError("a slot was released more often than it was taken")
        self._free += 1

    def __enter__(self) -> Slots:
        self.acquire(call_priority.get())
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


call_priority: contextvars.ContextVar[int] = contextvars.ContextVar("call_priority", default=0)
"""How many dependent LLM calls wait on the calls made in this context (higher is sent first)."""


AFTER_EVERY_OTHER = -(2**62)
"""The level of calls that only a join over all of them waits on (a scene's extraction samples, joined by the CKG
build): sending one early brings nothing forward until the last is answered, so any call beside them goes first,
the summarizer's chain that runs beside the index above all (each of its calls waits on the one before): a
slot that a call above this level gives back while only these wait is kept for a moment for the next such
call (``Slots._keep``)."""


@contextmanager
def priority(level: int) -> Iterator[None]:
    """Calls made inside the block take slots before those of a lower level."""
    token = call_priority.set(level)
    try:
        yield
    finally:
        call_priority.reset(token)


class Cancelled(BaseException):
    """The run was cancelled (Ctrl-C): an LLM call not sent, or no longer waited for."""


_cancel = threading.Event()
_wakers: set[threading.Event] = set()  # events waited on by ``wait_cancellable`` now
_wakers_lock = threading.Lock()


def cancel() -> None:
    """Cancel every LLM call of this process not yet answered; calls from now on raise ``Cancelled``."""
    _cancel.set()
    with _wakers_lock:  # wake every cancellable wait, which then sees the cancellation
        for event in _wakers:
            event.set()


def cancelled() -> bool:
    """Whether ``cancel()`` was called (and not ``reset_cancel()`` since)."""
    return _cancel.is_set()


def reset_cancel() -> None:
    """Allow LLM calls again (for a process that goes on after a cancelled run, e.g. tests)."""
    _cancel.clear()


def check_cancelled() -> None:
    """Raise ``Cancelled`` when the process's work was cancelled."""
    if _cancel.is_set():
        raise Cancelled("cancelled")


_failures: dict[str, tuple[float, BaseException]] = {}
_failures_lock = threading.Lock()


def note_failure(run: str, error: BaseException) -> None:
    """Remember that the run ``run`` (its cache directory) is ending with ``error``, raised by one of its calls.

    LangGraph raises a branch's error only once the other branches of its step have finished, so a long branch
    beside a failed one (the index, embedding a novel beside its extraction calls) would keep the user waiting
    for minutes before the error shows; it asks ``failure_since`` between its batches instead.
    """
    with _failures_lock:
        _failures[run] = (time.monotonic(), error)


def failure_since(run: str, started: float) -> BaseException | None:
    """The error the run ``run`` is ending with, if one was noted after ``started`` (``time.monotonic()``).

    A failure noted before a branch started belongs to an earlier attempt (a resume in the same process).
    """
    with _failures_lock:
        noted = _failures.get(run)
    return noted[1] if noted is not None and noted[0] >= started else None


def wait_cancellable(event: threading.Event, timeout: float | None = None) -> bool:
    """Wait for ``event`` (at most ``timeout`` seconds), or raise ``Cancelled`` as soon as the work is cancelled.

    The wait sleeps until one of the two happens, instead of waking every few milliseconds to look: ``cancel()``
    sets the event of every wait in progress. Returns whether the event is set.
    """
    with _wakers_lock:
        _wakers.add(event)
    try:
        check_cancelled()
        done = event.wait(timeout)
        check_cancelled()
        return done
    finally:
        with _wakers_lock:
            _wakers.discard(event)


def pause(seconds: float) -> None:
    """Sleep (a retry's back-off), cut short by ``Cancelled`` when the work is cancelled."""
    if _cancel.wait(seconds):
        raise Cancelled("cancelled")


@contextmanager
def llm_slot(ctx: Context) -> Iterator[None]:
    """Hold one of the run's LLM slots; waiting for it ends with ``Cancelled`` when the work is cancelled.

    The run's own slots (``Slots``) are waited for without polling, in priority order (``priority``), and one is
    given back as soon as the server has answered (``answer_arrived``); an installed budget (a cluster-wide one)
    is entered as the context manager it is and held to the end of the call. Either way the cancellation is
    looked at once more after the slot is taken.
    """
    check_cancelled()
    slots = llm_slots(ctx)
    if not isinstance(slots, Slots):
        with slots:
            check_cancelled()
            yield
        return
    held = _HeldSlot(slots)
    with held:
        token = _on_answer.set(held.release)
        try:
            check_cancelled()
            yield
        finally:
            _on_answer.reset(token)


class _HeldSlot:
    """One of the run's slots, given back once: when the server's answer arrives, or when the call ends."""

    def __init__(self, slots: Slots) -> None:
        self._slots = slots
        self._lock = threading.Lock()
        self._held = False
        self._priority = 0

    def __enter__(self) -> _HeldSlot:
        self._priority = call_priority.get()
        self._slots.acquire(self._priority)
        self._held = True
        return self

    def release(self) -> None:
        """Give the slot back, if this has not done so already (safe from any thread)."""
        with self._lock:
            if not self._held:
                return
            self._held = False
        self._slots.release(self._priority)

    def __exit__(self, *exc: object) -> None:
        self.release()


_on_answer: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "on_answer", default=None
)
"""What gives the current call's slot back; the HTTP client's response hook calls it."""


def answer_arrived(_response: object = None) -> None:
    """The HTTP client's response hook: the server has answered, so the call's slot is free.

    Reading and parsing the answer (a few milliseconds of LangChain and SDK code under the interpreter lock)
    no longer keeps the next call waiting: the slot bounds what is in flight at the server, and the server
    is done. Installed on the OpenAI-compatible client (``storyjudge.core.models``); runs on the thread that
    sent the request, which carries the caller's context.
    """
    release = _on_answer.get()
    if release is not None:
        release()


WORKER_IDLE_SECONDS = 30.0
"""How long a worker thread waits for more work before it ends."""


class _Workers:
    """Daemon threads that run submitted functions and wait, idle, for more (a pool that grows on demand).

    Never bounded: a caller that waits for a worker while every worker waits for that caller would deadlock
    (a branch's parallel judge calls each run their HTTP call on a worker). The run's LLM slots bound the work.
    """

    def __init__(self) -> None:
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0  # workers waiting in ``_tasks.get``, less the tasks queued for them
        self._lock = threading.Lock()

    def submit(self, task: Callable[[], None]) -> None:
        """Run ``task`` on an idle worker, or on a new one when none is idle."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._tasks.put(task)
                return
        threading.Thread(target=self._work, args=(task,), name="storyjudge-worker", daemon=True).start()

    def _work(self, task: Callable[[], None]) -> None:
        while True:
            task()
            with self._lock:
                self._idle += 1
            while True:
                try:
                    task = self._tasks.get(timeout=WORKER_IDLE_SECONDS)
                    break
                except queue.Empty:
                    with self._lock:
                        if self._tasks.empty():  # nothing was queued for this worker: end it
                            self._idle -= 1
                            return


_workers = _Workers()


class Pending:
    """The outcome of a function running on a worker thread."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            self._error = exc
        finally:
            self.done.set()

    def result(self) -> Any:
        """The function's value, or its exception raised here; call after ``done`` is set."""
        if self._error is not None:
            raise self._error
        return self._value


def in_worker(fn: Callable[[], Any]) -> Pending:
    """Start ``fn()`` on a worker thread; wait on ``Pending.done``, then read ``Pending.result()``.

    It runs in a copy of the caller's context, so progress events still reach the graph's stream.
    """
    pending = Pending()
    context = contextvars.copy_context()
    _workers.submit(lambda: context.run(pending._run, fn))
    return pending


def in_parallel(calls: Sequence[Callable[[], T]]) -> list[T]:
    """The calls' values in order, the calls run at once: all but the first on worker threads.

    The first runs in the caller's thread. The first exception, in call order, is raised once all have ended.
    """
    if len(calls) <= 1:
        return [call() for call in calls]
    pending = [in_worker(call) for call in calls[1:]]
    first: list[T] = []
    error: BaseException | None = None
    try:
        first.append(calls[0]())
    except BaseException as exc:  # noqa: BLE001 - raised below, after the others end
        error = exc
    for item in pending:
        item.done.wait()
    if error is not None:
        raise error
    return first + [item.result() for item in pending]
