"""Stage progress: rounds of a stage, plain lines at start, finish and at most one per interval."""

from __future__ import annotations

import io

from rich.console import Console

from storyjudge.apps.cli.stages import BarsView, PlainView, StageTracker, bars


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _tracker() -> tuple[StageTracker, io.StringIO, Clock]:
    buffer, clock = io.StringIO(), Clock()
    console = Console(file=buffer, width=200)
    return StageTracker(PlainView(console, clock, every=5.0), clock), buffer, clock


def test_plain_lines_at_start_finish_and_at_most_one_per_interval() -> None:
    tracker, buffer, clock = _tracker()
    tracker.handle({"stage": "judge", "advance": 0, "total": 10})
    for step in range(10):
        clock.now = step + 1.0  # one item a second
        tracker.handle({"stage": "judge", "advance": 1})
    lines = buffer.getvalue().splitlines()
    assert "judge 0/10 started" in lines[0]
    assert "judge 5/10 5.0s so far, about 5s left" in lines[1]
    assert "judge 10/10 done in 10.0s" in lines[-1]
    assert len(lines) == 3  # items 6-9 came within 5 s of the line before


def test_a_stage_called_again_starts_anew_labelled_with_the_loops_round() -> None:
    """Round 0 (the first summary) has no label; round n is the n-th refinement, as the rounds table says."""
    tracker, buffer, _ = _tracker()
    tracker.handle({"stage": "index", "message": "loading the embedding model"})
    tracker.handle({"stage": "index", "advance": 0, "total": 2}, ("index:x",))  # the same stage, not a round
    for n, call in enumerate(("factscore:a", "factscore:b")):
        if n:  # the refine call that writes round n, in the top graph
            tracker.handle({"stage": "refine", "advance": 0, "total": 1, "round": n})
            tracker.handle({"stage": "refine", "advance": 1})
        tracker.handle({"stage": "decompose", "advance": 0, "total": 3, "round": n}, (call,))
        for _ in range(3):
            tracker.handle({"stage": "decompose", "advance": 1}, (call,))
        tracker.handle({"stage": "coherence", "advance": 0, "total": 1}, (f"coherence:{call}",))  # no round
        tracker.handle({"stage": "coherence", "advance": 1}, (f"coherence:{call}",))
    text = buffer.getvalue()
    assert "(round 2)" not in text and "index 0/2 started\n" in text
    assert "decompose 3/3 done in 0.0s\n" in text and "decompose 3/3 done in 0.0s (round 1)" in text
    assert "refine 1/1 done in 0.0s (round 1)" in text
    assert "coherence 1/1 done in 0.0s\n" in text and "coherence 1/1 done in 0.0s (round 1)" in text
    assert tracker.stages["decompose"].round == 1


def test_a_stage_that_grows_stays_in_its_round() -> None:
    tracker, buffer, _ = _tracker()
    tracker.handle({"stage": "summarize", "advance": 0, "total": 2})
    tracker.handle({"stage": "summarize", "advance": 2})
    tracker.handle({"stage": "summarize", "total": 3})  # the next level: one merge more
    tracker.handle({"stage": "summarize", "advance": 1})
    stage = tracker.stages["summarize"]
    assert (stage.round, stage.done, stage.total) == (0, 3, 3)
    assert "summarize 3/3 done" in buffer.getvalue()


def test_bars_reset_for_each_round() -> None:
    progress = bars(Console(file=io.StringIO(), width=200))
    tracker = StageTracker(BarsView(progress))
    for n, call in enumerate(("factscore:a", "factscore:b")):
        tracker.handle({"stage": "judge", "advance": 0, "total": 4, "round": n}, (call,))
        tracker.handle({"stage": "judge", "advance": 1}, (call,))
    (task,) = progress.tasks
    assert (task.description, task.completed, task.total) == ("judge (round 1)", 1, 4)


def test_a_silence_of_thirty_seconds_gets_a_line_saying_what_is_still_working() -> None:
    """One slow call (the embedded model on a long prompt) never leaves a person minutes without a word."""
    tracker, buffer, clock = _tracker()
    clock.now = 29.0
    tracker.heartbeat()
    assert buffer.getvalue() == ""  # under 30 s: quiet
    clock.now = 31.0
    tracker.heartbeat()
    assert "starting: 31s without a step" in buffer.getvalue()
    tracker.handle({"stage": "extract", "advance": 0, "total": 4})
    tracker.handle({"stage": "extract", "advance": 1})
    before = len(buffer.getvalue().splitlines())
    for second in range(32, 200):  # the heartbeat thread asks every few seconds
        clock.now = float(second)
        tracker.heartbeat()
    lines = buffer.getvalue().splitlines()[before:]
    assert len(lines) == 5 and all("extract 1/4 still working: " in line for line in lines)
    assert [line.split("still working: ")[1].split("s ")[0] for line in lines] == [
        "30",
        "60",
        "90",
        "120",
        "150",
    ]
