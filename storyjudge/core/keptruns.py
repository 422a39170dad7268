"""A story's runs, kept beside each other in ``runs/<id>/``: nothing scored is ever replaced.

``RUN#N`` names round N of a run, so the rounds of a refinement can be compared like runs.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from storyjudge.core.coverage import describe
from storyjudge.core.rundir import RunDir
from storyjudge.core.runrecord import RunRecordError, load_run, run_file
from storyjudge.core.summary_stats import words

RUNS_FOLDER = "runs"
RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,80}$")


def new_run_id(kind: str) -> str:
    """A new run's id: its kind, its start to the millisecond (ids sort by time) and a few random characters."""
    return f"{kind}-{datetime.now().strftime('%Y%m%d-%H%M%S%f')[:-3]}-{uuid.uuid4().hex[:6]}"


def runs_folder(story: str | Path) -> Path:
    """Where a story's runs are kept."""
    return Path(story) / RUNS_FOLDER


def keep_run(story: str | Path, run_id: str, record: dict[str, Any]) -> RunDir:
    """Keep a run's record in its own folder of the story (created, or updated when the run goes on)."""
    if not RUN_ID.match(run_id):
        raise ValueError(f"Invalid run id {run_id!r}: use lower-case letters, digits and dashes.")
    rd = RunDir(runs_folder(story) / run_id)
    record = {**record, "run_id": run_id}
    rd.write_json(rd.result, record)
    best = str(record.get("best_summary") or "").strip()
    if best:
        rd.summary.write_text(best + "\n", encoding="utf-8")
    return rd


def _round_of(record: dict[str, Any], number: int | None) -> dict[str, Any] | None:
    rounds = record.get("iterations") or []
    wanted = record.get("best_iteration") if number is None else number
    chosen = next((it for it in rounds if it.get("iteration") == wanted), None)
    if chosen is None and number is None and rounds:
        chosen = max(rounds, key=lambda it: int(it.get("iteration", 0)))
    return chosen


def run_row(record: dict[str, Any], run_id: str) -> dict[str, Any]:
    """One line of a story's list of runs: its best round's score and coverage, its models and its date."""
    best = _round_of(record, None) or {}
    card = best.get("factscore") or {}
    models = (record.get("context") or {}).get("resolved_models") or {}
    return {
        "id": run_id,
        "kind": record.get("kind", ""),
        "summary_source": record.get("summary_source", ""),
        "created": record.get("created", ""),
        "rounds": len(record.get("iterations") or []),
        "best_round": best.get("iteration"),
        "nfs": card.get("score"),
        "coverage": card.get("coverage"),
        "reliable": card.get("reliable"),
        "nfs_text": describe(card.get("score"), None, card.get("reliable")),  # or why it does not count
        "words": len(words(str(best.get("summary") or ""))),
        "summarizer": models.get("summarizer", "") if record.get("summary_source") != "given" else "",
        "judge": models.get("judge", ""),
        "stop_reason": record.get("stop_reason", ""),
    }


def story_runs(story: str | Path) -> list[dict[str, Any]]:
    """Every run kept for a story, newest first; a folder whose record cannot be read is left out."""
    rows = []
    for result in runs_folder(story).glob("*/result.json"):
        if not (RUN_ID.match(result.parent.name) and result.is_file()):
            continue
        try:
            rows.append(run_row(load_run(result).record(), result.parent.name))
        except RunRecordError:
            continue
    return sorted(rows, key=lambda r: (str(r["created"]), r["id"]), reverse=True)


@dataclass(frozen=True)
class RunRef:
    """A run named on a command line: its folder (or ``result.json``) and, after ``#``, one of its rounds."""

    path: Path
    round: int | None = None

    @classmethod
    def parse(cls, text: str) -> RunRef:
        """``PATH`` or ``PATH#N``; ValueError with what to write when N is not a round number."""
        path, sep, number = text.rpartition("#") if "#" in text else (text, "", "")
        if sep and not number.isdigit():
            raise ValueError(f"{text}: write RUN#N with N a round number (0 is the first summary).")
        return cls(Path(path), int(number) if sep else None)

    @property
    def label(self) -> str:
        """How the run is named in a comparison."""
        name = self.path.parent.name if self.path.name == "result.json" else self.path.name
        return f"{name}#{self.round}" if self.round is not None else name


@dataclass(frozen=True)
class Summary:
    """One scored summary: a round of a run, with the run's record around it."""

    ref: RunRef
    record: dict[str, Any]
    round: dict[str, Any]


def load_summary(ref: RunRef) -> Summary:
    """The round a reference names (the run's best when it names none); ValueError saying what is wrong."""
    record = load_run(ref.path).record()  # RunRecordError (a ValueError): one line naming the file and field
    if not record["iterations"]:
        raise ValueError(f"{run_file(ref.path)} holds no scored summary.")
    chosen = _round_of(record, ref.round)
    if chosen is None:
        have = ", ".join(str(it.get("iteration")) for it in record["iterations"])
        raise ValueError(f"{ref.path} has no round {ref.round}; its rounds are {have}.")
    return Summary(ref, record, chosen)
