"""Background work for the UI: one step at a time for the whole server, in a thread the page polls.

One at a time keeps a 2-core machine responsive and the embedded model (one llama.cpp context) uncontested.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from storyjudge.apps.ui.messages import for_ui
from storyjudge.apps.ui.session import RunSession
from storyjudge.apps.ui.steps import check_step, run_step
from storyjudge.core.context import ConfigError
from storyjudge.core.llm import ModelError
from storyjudge.core.memory import release_freed

log = logging.getLogger(__name__)


class Busy(RuntimeError):
    """Another step is running."""


@dataclass
class Job:
    """One step of one run, running or finished."""

    id: str
    run: str
    step: str
    status: str = "running"  # running | done | error
    error: str = ""
    started: float = field(default_factory=time.time)
    finished: float | None = None
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    current: str = ""
    given_summary: str = field(default="", repr=False)  # the summary step's own summary, if the user gave one
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def progress(self, event: dict[str, Any]) -> None:
        """Fold one progress event (``{stage, advance, total?, message?}``) into the stage counters."""
        stage = str(event.get("stage", "work"))
        with self.lock:
            entry = self.stages.setdefault(stage, {"done": 0, "total": None, "message": ""})
            if event.get("total") is not None:
                entry["total"] = int(event["total"])
            entry["done"] += int(event.get("advance", 0) or 0)
            if event.get("message"):
                entry["message"] = str(event["message"])
            self.current = stage

    def view(self) -> dict[str, Any]:
        """What the page shows."""
        with self.lock:
            return {
                "id": self.id,
                "run": self.run,
                "step": self.step,
                "status": self.status,
                "error": self.error,
                "elapsed": round((self.finished or time.time()) - self.started, 1),
                "current": self.current,
                "stages": {name: dict(entry) for name, entry in self.stages.items()},
            }


class JobRunner:
    """Starts steps in a background thread, one at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current: Job | None = None
        self.last: dict[str, Job] = {}  # run name -> its latest job

    def start(self, session: RunSession, step: str, given_summary: str = "") -> Job:
        """Check and start a step; raises Busy, or StepRefused/ConfigError with what to do."""
        with self.idle():
            check_step(session, step, given_summary)
            job = Job(id=uuid.uuid4().hex[:10], run=session.name, step=step, given_summary=given_summary)
            self.current = job
            self.last[session.name] = job
        session.update(last_job=job.view())
        threading.Thread(target=self._work, args=(session, job), name=f"ui-{step}", daemon=True).start()
        return job

    @contextmanager
    def idle(self) -> Iterator[None]:
        """Hold off new steps while something else changes a run; Busy while a step runs."""
        with self._lock:
            if self.current is not None and self.current.status == "running":
                raise Busy(
                    f"'{self.current.step}' is still running on {self.current.run}; wait for it to finish."
                )
            yield

    def job_view(self, session: RunSession) -> dict[str, Any] | None:
        """A run's latest step: this server's job, else the one saved in the run's state."""
        job = self.last.get(session.name)
        return job.view() if job else session.state.get("last_job")

    def _work(self, session: RunSession, job: Job) -> None:
        try:
            run_step(session, job.step, job.progress, job.given_summary)
            status, error = "done", ""
        except (ConfigError, ModelError, ValueError) as exc:
            status, error = "error", for_ui(str(exc))
        except Exception as exc:  # noqa: BLE001 - shown on the page, logged with its traceback
            log.exception("step %s failed", job.step)
            status, error = "error", f"{type(exc).__name__}: {exc}"
        release_freed()  # a server runs step after step: what this one freed goes back before the next
        with job.lock:
            job.status, job.error, job.finished = status, error, time.time()
        session.update(last_job=job.view())
