"""Live progress of a graph's stages from the progress events its nodes emit: rich bars or plain lines."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

PLAIN_EVERY = 5.0  # seconds between two plain progress lines of one stage
HEARTBEAT_SECONDS = 30.0  # the longest silence: then the run says what it is still working on


@dataclass
class Stage:
    """One stage's count in its current round."""

    name: str
    total: int | None = None
    done: int = 0
    round: int = 0  # the refine loop's round (0: the first summary, or no loop)
    started: float = 0.0
    namespace: tuple[str, ...] = ()
    last_line: float = 0.0
    finished: bool = False

    @property
    def label(self) -> str:
        """Its name, with the refine loop's round from round 1 on."""
        return self.name if self.round == 0 else f"{self.name} (round {self.round})"


class StageTracker:
    """Turns progress events into stage rounds, and tells a view when a stage starts, advances, finishes."""

    def __init__(self, view: PlainView | BarsView, clock: Callable[[], float] = time.monotonic) -> None:
        self.view = view
        self.clock = clock
        self.stages: dict[str, Stage] = {}
        self.round = 0  # the latest round an event named
        self.last_step = clock()  # the last progress event
        self.last_said = self.last_step  # the last thing the view said (an event, or a heartbeat line)
        self._lock = threading.Lock()  # events come from the stream, heartbeats from their own thread

    def heartbeat(self, every: float = HEARTBEAT_SECONDS) -> None:
        """After ``every`` seconds of silence, the view says which stage is still working and for how long."""
        with self._lock:
            now = self.clock()
            if now - self.last_said < every:
                return
            working = [stage for stage in self.stages.values() if not stage.finished]
            latest = max(working or self.stages.values(), key=lambda s: s.started, default=None)
            self.view.waiting(latest, now - self.last_step)
            self.last_said = now

    def handle(self, event: dict[str, Any], namespace: tuple[str, ...] = ()) -> None:
        """One ``{"stage", "advance", "total", "message"}`` event from the graph (or subgraph) ``namespace``."""
        with self._lock:
            name = str(event.get("stage") or "work")
            total = event.get("total")
            message = str(event.get("message") or "")
            now = self.clock()
            self.last_step = self.last_said = now
            if event.get("round") is not None:
                self.round = int(event["round"])
            stage = self.stages.get(name)
            if stage is None or self._new_round(stage, namespace, total, event.get("advance", 0)):
                stage = self.stages[name] = Stage(
                    name, total, round=self.round, started=now, namespace=namespace
                )
                self.view.started(stage, message)
            elif total is not None:
                stage.total = total  # a stage that learns its size as it goes (the summarizer's next level)
                stage.finished = stage.done >= total
            stage.done += int(event.get("advance", 0) or 0)
            if stage.total is not None and stage.done >= stage.total and not stage.finished:
                stage.finished = True
                self.view.finished(stage, message)
            elif event.get("advance") or message:
                self.view.advanced(stage, message)

    @staticmethod
    def _new_round(stage: Stage, namespace: tuple[str, ...], total: int | None, advance: int) -> bool:
        """Another call of the stage's subgraph, or a finished stage sized again at most at its count.

        One sized again at most at its count is the same work once more (one refine call per round); one sized
        past it is growing, not restarting (the summarizer adds a level).
        """
        if namespace != stage.namespace:
            return True
        return stage.finished and total is not None and not advance and total <= stage.done


class PlainView:
    """Plain progress lines: a stage's start and finish, and between them at most one every ``every`` s."""

    def __init__(
        self, console: Console, clock: Callable[[], float] = time.monotonic, every: float = PLAIN_EVERY
    ) -> None:
        self.console = console
        self.clock = clock
        self.every = every
        self.begun = clock()

    def _say(self, text: str) -> None:
        self.console.print(
            f"[{self.clock() - self.begun:7.1f}s] {text}", markup=False, highlight=False, soft_wrap=True
        )

    def _line(self, stage: Stage, text: str, message: str) -> None:
        stage.last_line = self.clock()
        note = f" - {message}" if message else ""
        total = "" if stage.total is None else f"/{stage.total}"
        count = f" {stage.done}{total}" if total or stage.done else ""
        in_round = f" (round {stage.round})" if stage.round > 0 else ""
        self._say(f"{stage.name}{count} {text}{in_round}{note}")

    def started(self, stage: Stage, message: str) -> None:
        """Always a line."""
        self._line(stage, "started", message)

    def advanced(self, stage: Stage, message: str) -> None:
        """A line when the stage's last one is ``every`` seconds old: count, time so far, time left."""
        now = self.clock()
        if now - stage.last_line < self.every:
            return
        eta = ""
        if stage.total is not None and 0 < stage.done < stage.total:  # at the pace so far
            eta = f", about {(now - stage.started) / stage.done * (stage.total - stage.done):.0f}s left"
        self._line(stage, f"{now - stage.started:.1f}s so far{eta}", message)

    def finished(self, stage: Stage, message: str) -> None:
        """Always a line, with the stage's time."""
        self._line(stage, f"done in {self.clock() - stage.started:.1f}s", message)

    def waiting(self, stage: Stage | None, seconds: float) -> None:
        """A line saying what is still being worked on."""
        if stage is None:
            self._say(f"starting: {seconds:.0f}s without a step (loading models, checking the input)")
        else:
            self._line(stage, f"still working: {seconds:.0f}s since the last step", "")


class BarsView:
    """One rich progress bar per stage, reset for each round of it."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, TaskID] = {}

    def started(self, stage: Stage, message: str) -> None:
        """A new bar, or the stage's bar reset for its next round."""
        if stage.name not in self.tasks:
            self.tasks[stage.name] = self.progress.add_task(stage.label, total=stage.total, message=message)
        self.progress.reset(
            self.tasks[stage.name], total=stage.total, description=stage.label, message=message
        )

    def advanced(self, stage: Stage, message: str) -> None:
        """The bar at the stage's count."""
        self.progress.update(self.tasks[stage.name], total=stage.total, completed=stage.done, message=message)

    finished = advanced  # the bar full

    def waiting(self, stage: Stage | None, seconds: float) -> None:
        """The working stage's bar says how long it has been since its last step."""
        if stage is not None and stage.name in self.tasks:
            note = f"still working: {seconds:.0f}s since the last step"
            self.progress.update(self.tasks[stage.name], message=note)
        else:
            self.progress.console.print(f"starting: {seconds:.0f}s without a step", markup=False)


def bars(console: Console) -> Progress:
    """The rich progress display of the stages: name, bar, count, elapsed, left, message."""
    return Progress(
        TextColumn("[bold]{task.description:<18}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[message]}"),
        console=console,
    )
