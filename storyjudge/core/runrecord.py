"""The run record (``result.json``) as typed models, and ``load_run``, its one reader.

A record of the wrong shape is one line naming the file and field, not a traceback in a renderer. Extra fields
are allowed where records grow; ``result.schema.json`` ships the models' JSON Schema. ``load_run`` reads old shapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SCHEMA_VERSION = 1
"""Raise it when a change to result.json's shape needs ``migrate`` to read the records written before it."""

SCHEMA_FILE = Path(__file__).with_name("result.schema.json")

Interval = list[float] | None  # a 95% interval, [low, high]; None when there is none


class _Part(BaseModel):
    """A part of the record: typed fields, and any other field kept as it is (older or newer records)."""

    model_config = ConfigDict(extra="allow")


class Fact(_Part):
    """A summary fact (or a planted one) with where it came from."""

    id: str
    iteration: int | None = None
    sentence_index: int | None = None
    text: str


class EvidenceSpan(_Part):
    """A scene the judge saw: ``[start, end)`` of its text, kept once in the record's ``passages``."""

    id: str
    title: str = ""
    start: int | None = None
    end: int | None = None
    score: float | None = None
    excerpt: bool = False
    text: str | None = None  # records written before evidence was referenced hold the text itself


class Evidence(_Part):
    """What the judge saw for a fact."""

    query: str = ""
    scenes: list[EvidenceSpan] = []
    ckg_lines: list[str] = []


class Verdict(_Part):
    """A judged (or unjudged) fact."""

    fact: Fact
    status: Literal["supported", "unsupported", "unjudged"]
    rationale: str = ""
    feedback: str = ""
    evidence: Evidence | None = None
    raw: str = ""


class Tally(_Part):
    """Planted items of one kind: planted, judged (a readable verdict) and accepted."""

    planted: int
    judged: int
    accepted: int


class JudgeCheck(_Part):
    """The judge's record on the facts planted in one round (``core.planted``)."""

    planted: int
    easy: Tally
    hard: Tally
    true: Tally
    false_acceptance: float | None
    true_acceptance: float | None
    false_acceptance_ci95: Interval = None
    true_acceptance_ci95: Interval = None
    decision: Literal["passed", "failed", "undecided"] | None = (
        None  # absent in older records: read ``passed``
    )
    rule: dict[str, Any] | None = None
    passed: bool
    note: str
    verdicts: list[Verdict] = []


class FactScoreCard(_Part):
    """NarrativeFactScore of one summary, with how much of it was judged and how far it can be trusted."""

    score: float | None
    supported: int
    unsupported: int
    unjudged: int
    facts: int
    judged: int | None = None
    coverage: float | None = None
    coverage_floor: float | None = None
    reliable: bool | None = None
    per_sentence: list[dict[str, Any]] = []
    verdicts: list[Verdict] = []
    judge_check: JudgeCheck | None = None
    score_ci95: Interval = None
    score_ci95_over: str | None = None
    score_corrected: float | None = None
    score_corrected_ci95: Interval = None
    score_corrected_ci95_over: str | None = None
    score_corrected_note: str | None = None


class CoherenceCard(_Part):
    """BooookScore of one round (``core.records.CoherenceReport``)."""

    score: float | None = None
    coverage: float | None = None
    reliable: bool | None = None
    summaries: list[dict[str, Any]] = []


class MetricCard(_Part):
    """An added metric's card of one round (``core.metrics``): its score, its words, and whatever else it keeps."""

    score: float | None
    coverage: float | None = None
    reliable: bool | None = None
    headline: str = ""  # the card in words, as every surface shows it
    error: str = ""  # the metric failed on this round: why (its score is None)


class Round(_Part):
    """One round of a run: its summary and the metric cards scored on it."""

    iteration: int
    summary: str
    factscore: FactScoreCard
    coherence: CoherenceCard | None = None
    metrics: dict[str, MetricCard] = {}  # added metrics' cards by name; the surfaces list them all
    accepted: bool | None = None
    note: str = ""


class ModelUsage(_Part):
    """Requests to one model (or all of them): calls, tokens, estimated cost."""

    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    failures: int = 0
    cost_usd: float | None = None


class Usage(_Part):
    """Every request of the run, by model, and their total."""

    by_model: dict[str, ModelUsage] = {}
    total: ModelUsage = ModelUsage()


class Document(_Part):
    """The story scored: its title, its content hash, how it was split."""

    title: str = ""
    hash: str = ""
    segmentation: str = ""
    scenes: int = 0


class ScoreRow(_Part):
    """A round's headline numbers, as ``scores`` lists them (the cards in ``iterations`` hold the detail)."""

    iteration: int
    nfs: float | None = None


class Run(_Part):
    """A run record: what ``result.json`` holds."""

    schema_version: int = Field(
        SCHEMA_VERSION, description="The shape of this record (``runrecord.SCHEMA_VERSION``)."
    )
    kind: str = "refine"
    storyjudge_version: str = ""
    created: str = ""
    document: Document = Document()
    run_dir: str = ""
    context: dict[str, Any] = {}
    prompts: dict[str, str] = {}
    ckg_stats: dict[str, Any] = {}
    iterations: list[Round]
    passages: dict[str, str] = {}
    scores: list[ScoreRow] = []
    best_iteration: int | None = None
    best_summary: str = ""
    best_reliable: bool | None = None
    stop_reason: str = ""
    usage: Usage = Usage()
    timings: dict[str, float] = {}

    def record(self) -> dict[str, Any]:
        """The record as the plain JSON its readers render: the fields it had, none added."""
        return self.model_dump(mode="json", exclude_unset=True)


class RunRecordError(ValueError):
    """A file that is not a run record storyjudge can read; its message is one line naming the file and field."""


def run_file(path: str | Path) -> Path:
    """The result.json a path names: the file itself, or the one in a run folder."""
    path = Path(path)
    return path if path.name == "result.json" or path.is_file() else path / "result.json"


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """An older record in today's shape: version 0 (no ``schema_version``) only lacks optional fields."""
    return {**data, "schema_version": SCHEMA_VERSION} if data.get("schema_version", 0) == 0 else data


def load_run(path: str | Path) -> Run:
    """The run record at ``path`` (a run folder or its result.json), validated and read from older shapes.

    Raises:
        RunRecordError: no readable run record there; one line naming the file (and the field).
    """
    file = run_file(path)
    if not file.is_file():
        raise RunRecordError(
            f"{path} has no result.json; name a run folder (a story's runs/<id>/) or a result.json."
        )
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunRecordError(f"{file} is not a readable run record ({exc}).") from None
    if not isinstance(data, dict):
        raise RunRecordError(f"{file} is not a run record (it holds no JSON object).")
    version = data.get("schema_version", 0)
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise RunRecordError(
            f"{file} was written by a newer storyjudge (record version {version}); upgrade storyjudge to read it."
        )
    try:
        return Run.model_validate(migrate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(the record)"
        raise RunRecordError(
            f"{file}: field '{field}': {first['msg']}; it is not a run record storyjudge reads."
        ) from None


def write_schema() -> Path:
    """Regenerate the shipped ``result.schema.json`` after changing the models."""
    SCHEMA_FILE.write_text(json.dumps(Run.model_json_schema(), indent=2) + "\n", encoding="utf-8")
    return SCHEMA_FILE
