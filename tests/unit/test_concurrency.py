"""LLM slots belong to a run: two runs in one process never share them, the calls of one run always do."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from graphs import coherence, factscore, index, refine, summarize
from storyjudge.core import concurrency
from storyjudge.core.context import Context
from storyjudge.core.llm import ask_text
from storyjudge.core.scripted_server import OpenAIServer


@dataclass(frozen=True)
class Plain:
    text: str = "Answer."
    version_id: str = "plain@1"


def ask_in_threads(calls: list[tuple[Context, str]]) -> list[str]:
    """Ask every (context, question) at once, each from its own thread; returns the answers in order."""
    answers = [""] * len(calls)

    def one(i: int, ctx: Context, question: str) -> None:
        answers[i] = ask_text(ctx, "summarizer", Plain(), [("user", question)]).text

    threads = [threading.Thread(target=one, args=(i, *call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def meeting(parties: int, wait: float) -> Callable[[dict[str, Any]], str]:
    """A responder that answers once ``parties`` requests are in flight together, "alone" after ``wait`` s."""
    barrier = threading.Barrier(parties, timeout=wait)

    def respond(body: dict[str, Any]) -> str:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return "alone"
        return "together"

    return respond


def test_two_runs_with_the_same_concurrency_do_not_share_slots(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(meeting(2, wait=30))  # generous: it only bounds how long a failure takes
    runs = [
        Context(
            model="openai:scripted",
            base_url=server.base_url,
            run_dir=str(tmp_path / name),
            concurrency=1,
            retry_budget_s=0,
        )
        for name in ("first", "second")
    ]
    # one slot each: the second run's call is in flight while the first run's holds its slot
    assert ask_in_threads([(runs[0], "one"), (runs[1], "two")]) == ["together", "together"]
    assert server.max_in_flight == 2


def test_the_calls_of_one_run_share_its_slots(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(meeting(2, wait=1))  # the slot forbids a meeting however long it waits
    ctx = ctx_for(server, concurrency=1)
    same_run = Context(**{**ctx.public_dict()})  # the settings rebuilt, as a node given a dict context does
    assert ask_in_threads([(ctx, "one"), (same_run, "two")]) == ["alone", "alone"]
    assert server.max_in_flight == 1


def test_a_budget_is_keyed_by_run_directory_cache_server_and_concurrency(tmp_path: Path) -> None:
    base = Context(run_dir=str(tmp_path / "run"), base_url="http://127.0.0.1:1/v1", concurrency=3)
    assert concurrency.llm_slots(base) is concurrency.llm_slots(base.replace())
    for changed in (
        base.replace(run_dir=str(tmp_path / "other")),
        base.replace(cache_dir=str(tmp_path / "cache")),
        base.replace(base_url="http://127.0.0.1:2/v1"),
        base.replace(concurrency=4),
    ):
        assert concurrency.llm_slots(changed) is not concurrency.llm_slots(base)


def test_branch_threads_follow_the_run_budget() -> None:
    assert concurrency.graph_config(Context(concurrency=5)) == {"max_concurrency": 10}
    assert concurrency.graph_config(Context(concurrency=5), local=True) == {"max_concurrency": 2}
    config = concurrency.graph_config(Context(), configurable={"thread_id": "t"})
    assert config == {"configurable": {"thread_id": "t"}, "max_concurrency": 8}
    for module in (coherence, factscore, index, refine, summarize):
        assert module.graph.config["max_concurrency"] == concurrency.BRANCH_THREADS


def test_an_installed_budget_factory_gives_the_slots_and_none_falls_back(tmp_path: Path) -> None:
    class Counting:
        entered = 0

        def __enter__(self) -> None:
            Counting.entered += 1

        def __exit__(self, *exc: object) -> None:
            return None

    ours = Context(run_dir=str(tmp_path / "exp" / "run"))
    other = Context(run_dir=str(tmp_path / "elsewhere"))
    slot = Counting()
    previous = concurrency.set_budget_factory(lambda ctx: slot if ctx.run_dir == ours.run_dir else None)
    try:
        assert concurrency.llm_slots(ours) is slot
        assert concurrency.llm_slots(other) is concurrency.run_semaphore(other)
        with concurrency.llm_slots(ours):
            pass
        assert Counting.entered == 1
    finally:
        concurrency.set_budget_factory(previous)
    assert concurrency.llm_slots(ours) is concurrency.run_semaphore(ours)


@pytest.fixture
def uncancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancel future of the test's own: what it cancels, the next test does not inherit."""
    monkeypatch.setattr(concurrency, "_cancel", Future())


def test_cancel_stops_calls_not_yet_sent_and_waits_for_a_slot(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], uncancelled: None
) -> None:
    """After cancel(), no request reaches the server, and a call waiting for a slot gives up its wait."""
    server = scripted_server(lambda body: "fine")
    ctx = ctx_for(server, concurrency=1)
    slots = concurrency.run_semaphore(ctx)
    slots.acquire()  # the run's one slot is taken: the next call waits for it
    outcome: list[BaseException | str] = []

    def waiting_call() -> None:
        try:
            outcome.append(ask_text(ctx, "judge", Plain(), [("user", "waits")]).text)
        except BaseException as exc:  # noqa: BLE001 - Cancelled is what the test expects
            outcome.append(exc)

    thread = threading.Thread(target=waiting_call)
    try:
        thread.start()
        concurrency.cancel()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the call still waits for its slot after cancel()"
        with pytest.raises(concurrency.Cancelled):
            ask_text(ctx, "judge", Plain(), [("user", "after cancel")])
    finally:
        slots.release()
    assert len(outcome) == 1 and isinstance(outcome[0], concurrency.Cancelled)
    assert not server.completions, "a cancelled call reached the server"


def test_parallel_calls_keep_their_order_and_leave_no_threads() -> None:
    """Values come back in call order, and a thousand calls leave no thread behind."""

    def call(round_: int, i: int) -> Callable[[], tuple[int, int]]:
        return lambda: (round_, i)

    before = threading.active_count()
    for round_ in range(100):
        values = concurrency.in_parallel([call(round_, i) for i in range(10)])
        assert values == [(round_, i) for i in range(10)]
    # each round's nine workers end with its calls
    assert threading.active_count() == before


def test_parallel_calls_raise_the_first_error_once_every_call_has_ended() -> None:
    ended: list[int] = []
    release = threading.Event()

    def slow() -> int:
        release.wait(5)
        ended.append(2)
        return 2

    def failing() -> int:
        release.set()
        raise ValueError("first")

    def later_failing() -> int:
        raise KeyError("second")

    try:
        concurrency.in_parallel([failing, slow, later_failing])
    except ValueError as exc:
        assert str(exc) == "first"
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("the first call's error was not raised")
    assert ended == [2], "the slow call had not ended when the error was raised"


def test_a_worker_runs_in_the_callers_context() -> None:
    import contextvars

    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")
    seen.set("branch")
    assert concurrency.in_parallel([seen.get, seen.get]) == ["branch", "branch"]  # the second on a worker
    assert concurrency.within(5, seen.get) == "branch"
    with pytest.raises(ZeroDivisionError):
        concurrency.in_parallel([lambda: 0, lambda: 1 / 0])


def test_a_call_past_its_deadline_is_given_up_and_a_cancelled_wait_ends_at_once(uncancelled: None) -> None:
    release = threading.Event()
    try:
        with pytest.raises(TimeoutError):
            concurrency.within(0.2, lambda: release.wait(30))
        assert concurrency.within(5, lambda: "answer") == "answer"
        threading.Timer(0.2, concurrency.cancel).start()
        with pytest.raises(concurrency.Cancelled):
            concurrency.within(30, lambda: release.wait(30))
    finally:
        release.set()


def test_slots_go_to_the_highest_priority_waiter_then_in_arrival_order() -> None:
    slots = concurrency.Slots(1)
    slots.acquire()
    order: list[str] = []
    threads = []
    for name, level in (("judge-1", 0), ("judge-2", 0), ("decompose", 1)):

        def take(name: str = name, level: int = level) -> None:
            slots.acquire(level)
            order.append(name)
            slots.release()

        thread = threading.Thread(target=take)
        thread.start()
        threads.append(thread)
        while len(slots._waiting) < len(threads):  # each waits before the next arrives
            threading.Event().wait(0.001)
    slots.release()
    for thread in threads:
        thread.join(10)
    assert order == ["decompose", "judge-1", "judge-2"]
    assert slots._free == 1, "every slot came back"


def test_a_cancelled_wait_for_a_slot_leaves_the_slots_whole(uncancelled: None) -> None:
    slots = concurrency.Slots(1)
    slots.acquire()
    outcome: list[BaseException] = []

    def waiting() -> None:
        try:
            slots.acquire()
        except BaseException as exc:  # noqa: BLE001 - Cancelled is what the test expects
            outcome.append(exc)

    thread = threading.Thread(target=waiting)
    thread.start()
    while not slots._waiting:
        threading.Event().wait(0.001)
    concurrency.cancel()
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], concurrency.Cancelled)
    assert not slots._waiting, "the cancelled waiter is still queued"
    slots.release()
    slots.acquire()  # the slot is free again, and only one
    with pytest.raises(ValueError):
        slots.release()
        slots.release()


def test_waiting_for_a_slot_or_an_answer_does_not_poll(monkeypatch: Any) -> None:
    """Waits sleep until woken: over two seconds each looks at the cancellation only before and after."""
    looks: list[str] = []
    real_check = concurrency.check_cancelled

    def counted() -> None:
        looks.append(threading.current_thread().name)
        real_check()

    monkeypatch.setattr(concurrency, "check_cancelled", counted)
    slots = concurrency.Slots(1)
    slots.acquire()
    answer: Future[None] = Future()

    def wait_for_slot() -> None:
        slots.acquire()
        slots.release()

    waiters = [
        threading.Thread(target=wait_for_slot, name="slot-waiter"),
        threading.Thread(target=concurrency.wait_any, args=([answer], 30), name="answer-waiter"),
    ]
    for waiter in waiters:
        waiter.start()
    threading.Event().wait(2.0)
    slots.release()
    answer.set_result(None)
    for waiter in waiters:
        waiter.join(10)
    # a 50 ms poll would have looked about 40 times each
    assert looks.count("slot-waiter") <= 2
    assert looks.count("answer-waiter") <= 2
