"""Dataset loaders: STORYSUMM (faithfulness labels), SQuALITY (reference plot summaries), plain documents.

A loader takes a path or a dataset name (``squality:dev``, :func:`resolve`); without one it reads the split
bundled in ``eval/data``. Items come with notes on whatever the loader repaired, so a glitch in the data is
said, not absorbed. STORYSUMM lists may be real lists or strings holding them; ``label`` and ``errors``:
1 faithful, 0 unfaithful (per summary, per sentence).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUNDLED_DATA = Path(__file__).resolve().parent / "data"
STORYSUMM_VAL = BUNDLED_DATA / "storysumm" / "val.json"
SQUALITY_DEV = BUNDLED_DATA / "squality" / "dev.jsonl"


@dataclass(frozen=True)
class Published:
    """A public dataset by name: its splits, the one a bare name means, and the suffix of a split's file."""

    splits: tuple[str, ...]
    default: str
    suffix: str


PUBLISHED = {
    "storysumm": Published(("val", "test"), "val", ".json"),
    "squality": Published(("train", "dev", "test"), "dev", ".jsonl"),
    "booookscore": Published(("chatgpt-2048-inc",), "chatgpt-2048-inc", ".jsonl"),
}
"""The datasets ``storyjudge data get`` fetches; a split lives at ``<folder>/<name>/<split><suffix>``."""


def data_home() -> Path:
    """The data cache: ``STORYJUDGE_DATA_DIR``, else ``$XDG_CACHE_HOME/storyjudge/data`` (``~/.cache/...``)."""
    if given := os.environ.get("STORYJUDGE_DATA_DIR", "").strip():
        return Path(given).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "storyjudge" / "data"


def split_name(spec: str) -> tuple[str, str] | None:
    """``(name, split)`` of a dataset name such as ``squality`` or ``squality:test``; None for anything else."""
    name, _, split = spec.strip().partition(":")
    if name.lower() not in PUBLISHED:
        return None
    return name.lower(), split.strip() or PUBLISHED[name.lower()].default


def split_file(name: str, split: str, home: Path | None = None) -> Path:
    """Where ``storyjudge data get`` writes a split (in the data cache, or ``home``)."""
    return (home or data_home()) / name / f"{split}{PUBLISHED[name].suffix}"


def resolve(spec: str | Path, kind: str | None = None, base: Path | None = None) -> Path:
    """The file a path (relative to ``base``) or dataset name (bundled, then cached) stands for, or a ValueError."""
    text = str(spec).strip()
    path = (base or Path()) / Path(text).expanduser()  # an absolute path stays as it is
    if text and path.is_file():
        return path
    named = split_name(text)
    if named is None:
        wanted = f"a {kind} file" if kind else "a dataset file"
        names = ", ".join(f"{name}[:{'|'.join(p.splits)}]" for name, p in PUBLISHED.items())
        raise ValueError(
            f"{path} does not exist and {text!r} is no dataset name; give the path of {wanted}, or a name "
            f"({names}; `storyjudge data get NAME --split SPLIT` fetches one)."
        )
    name, split = named
    if kind is not None and name != kind:
        raise ValueError(f"{text!r} is a {name} dataset, not {kind}; give a {kind} file or name.")
    if split not in PUBLISHED[name].splits:
        raise ValueError(f"{name} has no split {split!r}; its splits: {', '.join(PUBLISHED[name].splits)}.")
    places = [BUNDLED_DATA / name / f"{split}{PUBLISHED[name].suffix}", split_file(name, split)]
    if found := next((place for place in places if place.is_file()), None):
        return found
    raise ValueError(
        f"dataset {name}:{split} is not here (looked for {places[0]} and {places[1]}); "
        f"fetch it with `storyjudge data get {name} --split {split}`, or give the path of a {name} file."
    )


@dataclass
class EvalItem:
    """One unit of evaluation: a narrative and what is known about it (summary to judge, labels, references)."""

    id: str  # stable within its dataset
    dataset: str  # "storysumm", "squality" or "documents"
    document: str
    title: str = ""
    group: str = ""  # items that share one narrative share a group (their index is built once)
    summary: str = ""  # a given summary to score, "" when the summary is to be generated
    sentences: list[str] = field(default_factory=list)  # the given summary's, as the dataset splits it
    summary_label: int | None = None  # the whole summary's: 1 faithful, 0 unfaithful, None unknown
    sentence_labels: list[int] | None = None  # 1/0 per sentence of ``sentences``; None when unusable (notes)
    coherence_labels: list[int] | None = None  # 1 clear / 0 confusing per sentence, where a dataset has them
    references: list[str] = field(default_factory=list)  # reference summaries (ROUGE, BERTScore)
    meta: dict[str, Any] = field(default_factory=dict)  # all else the dataset says (model, difficulty, ...)
    notes: list[str] = field(default_factory=list)  # what the loader repaired or left out for this item


@dataclass
class Dataset:
    """Items of one file, with the loader's notes about the whole file."""

    name: str
    path: Path
    items: list[EvalItem]
    notes: list[str] = field(default_factory=list)

    def limited(self, limit: int | None) -> Dataset:
        """The first ``limit`` items (all when None); the note says a subset was used."""
        if limit is None or limit >= len(self.items):
            return self
        notes = [*self.notes, f"using the first {limit} of {len(self.items)} items (--limit)"]
        return Dataset(self.name, self.path, self.items[:limit], notes)


def parse_listish(value: Any, what: str) -> list[Any]:
    """A list from a real list or from a string holding a JSON or Python list literal."""
    if isinstance(value, list):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            try:
                parsed = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                raise ValueError(f"{what} is neither a JSON nor a Python list: {value[:80]!r}") from None
        if isinstance(parsed, (list, tuple)):
            return list(parsed)
    raise ValueError(f"{what} must be a list (or a string holding one), not {type(value).__name__}")


def _binary(value: Any, what: str) -> int:
    if isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    raise ValueError(f"{what} must be 0 or 1, not {value!r}")


def _labels(record: dict[str, Any], key: str, where: str, what: str) -> list[int] | None:
    """The 0/1 labels a record lists under ``key``; None when it has none."""
    if record.get(key) in (None, ""):
        return None
    return [_binary(v, f"{where} {what}") for v in parse_listish(record[key], f"{where} {key}")]


def _read_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(id, record) pairs from a JSON object keyed by id, a JSON list, or JSON lines."""
    if not path.is_file():
        raise ValueError(f"{path} does not exist or is not a file; give the path of a dataset file.")
    text = path.read_text(encoding="utf-8-sig")
    data: Any = None
    if path.suffix != ".jsonl":
        with contextlib.suppress(json.JSONDecodeError):
            data = json.loads(text)
    if data is None:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is neither JSON nor JSON lines: {exc}") from None
    if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
        return [(str(k), v) for k, v in data.items()]
    if isinstance(data, dict):
        data = [data]  # a single record
    if isinstance(data, list):
        records = []
        for n, record in enumerate(data):
            if not isinstance(record, dict):
                raise ValueError(f"{path}: record {n} is not an object")
            # ids must be non-empty strings or integers (null, NaN, objects would print alike); else the position
            value = record.get("id", record.get("uid", n))
            if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
                raise ValueError(
                    f"{path}: record {n}: the id {value!r} is not a non-empty string or an integer; give it one."
                )
            records.append((str(value).strip(), record))
        return records
    raise ValueError(f"{path}: expected a JSON object or list of records")


def _sentence_labels(
    item_id: str, sentences: list[str], errors: list[int] | None, summary_label: int
) -> tuple[list[int] | None, list[str]]:
    """Sentence labels that line up with the sentences (or None), and notes on what did not.

    Upstream sometimes has one label too few: in a faithful summary every sentence is faithful, so it is 1.
    """
    if errors is None:
        return None, []
    said = f"{item_id}: {len(sentences)} sentences but {len(errors)} sentence labels; "
    left_out = "left out of sentence-level agreement (summary-level label kept)"
    notes = []
    if len(errors) == len(sentences) - 1 and summary_label == 1 and all(e == 1 for e in errors):
        errors = [*errors, 1]
        notes.append(said + "the summary is labelled faithful, so the missing label was set to faithful")
    elif len(errors) == len(sentences) - 1:
        return None, [said + f"which sentence lost its label is unknown, so this summary is {left_out}"]
    elif len(errors) != len(sentences):
        return None, [said + left_out]
    if (0 in errors) == bool(summary_label):
        notes.append(
            f"{item_id}: summary label {summary_label} disagrees with its sentence labels {errors}; both kept"
        )
    return errors, notes


STORYSUMM_META = ("model", "difficulty", "split", "story-id", "explanations", "claims")


def load_storysumm(path: str | Path | None = None) -> Dataset:
    """Load a STORYSUMM-format file (default: the bundled val split); items are grouped by story.

    Records (an object keyed by id, a list or JSON lines) hold ``story``, ``summary`` (sentences), ``label``,
    and optionally ``errors``, ``story-id``, ``model``, ``difficulty``, ``explanations``, ``claims``.
    """
    file = resolve(path, "storysumm") if path else STORYSUMM_VAL
    items: list[EvalItem] = []
    notes: list[str] = []
    for item_id, record in _read_records(file):
        missing = [key for key in ("story", "summary", "label") if key not in record]
        if missing:
            raise ValueError(f"{file}: record {item_id} lacks {missing}; is this a STORYSUMM-format file?")
        where = f"{file.name} record {item_id}"
        raw_summary = record["summary"]
        if isinstance(raw_summary, str) and not raw_summary.lstrip().startswith("["):
            sentences = [raw_summary.strip()]  # a plain-text summary: one unsplit "sentence"
        else:
            sentences = [str(s).strip() for s in parse_listish(raw_summary, f"{where} summary")]
        sentences = [s for s in sentences if s]
        if not sentences:
            raise ValueError(f"{where}: the summary is empty")
        label = _binary(record["label"], f"{where} label")
        errors = _labels(record, "errors", where, "sentence label")
        sentence_labels, item_notes = _sentence_labels(item_id, sentences, errors, label)
        notes.extend(item_notes)
        coherence = _labels(record, "coherence", where, "coherence label")  # 1 clear, 0 confusing
        story = str(record["story"])
        story_id = str(record.get("story-id", record.get("story_id", "")) or "")
        meta = {key: record[key] for key in STORYSUMM_META if record.get(key) not in (None, "")}
        for key in {"explanations", "claims"} & set(meta):  # lists where they parse as lists, else as given
            with contextlib.suppress(ValueError):
                meta[key] = parse_listish(meta[key], f"{where} {key}")
        items.append(
            EvalItem(
                id=item_id,
                dataset="storysumm",
                document=story,
                title=f"story {story_id}" if story_id else item_id,
                group=story_id or "doc-" + hashlib.sha256(story.encode("utf-8")).hexdigest()[:12],
                summary=" ".join(sentences),
                sentences=sentences,
                summary_label=label,
                sentence_labels=sentence_labels,
                coherence_labels=coherence if len(coherence or ()) == len(sentences) else None,
                meta=meta,
                notes=item_notes,
            )
        )
    if not items:
        raise ValueError(f"{file} holds no records")
    return Dataset("storysumm", file, items, notes)


def load_squality(path: str | Path | None = None, question: int = 1) -> Dataset:
    """Load a SQuALITY-format file (default: bundled dev); ``question``'s answers (1: the plot) are references."""
    file = resolve(path, "squality") if path else SQUALITY_DEV
    items: list[EvalItem] = []
    notes: list[str] = []
    for item_id, record in _read_records(file):
        if "document" not in record or "questions" not in record:
            raise ValueError(
                f"{file}: record {item_id} lacks document/questions; is this a SQuALITY-format file?"
            )
        metadata = record.get("metadata") or {}
        if isinstance(metadata, str):
            metadata = ast.literal_eval(metadata)
        uid = str(metadata.get("uid") or metadata.get("passage_id") or item_id)
        questions = parse_listish(record["questions"], f"{file.name} record {uid} questions")
        chosen = next((q for q in questions if int(q.get("question_number", -1)) == question), None)
        if chosen is None:
            notes.append(f"{uid}: no question {question}; item skipped")
            continue
        references = [str(r.get("response_text", "")).strip() for r in chosen.get("responses") or []]
        references = [r for r in references if r]
        if not references:
            notes.append(f"{uid}: question {question} has no answers; item skipped")
            continue
        document = str(record["document"])
        items.append(
            EvalItem(
                id=uid,
                dataset="squality",
                document=document,
                title=next((line.strip()[:80] for line in document.splitlines() if line.strip()), ""),
                group=uid,
                references=references,
                meta={"passage_id": metadata.get("passage_id"), "question": chosen.get("question_text", "")},
            )
        )
    if not items:
        raise ValueError(f"{file} holds no usable SQuALITY records")
    return Dataset("squality", file, items, notes)


def load_documents(paths: list[str | Path]) -> Dataset:
    """Plain narrative files (.txt / .md) as items to summarize, one item per file."""
    items = []
    for p in paths:
        file = Path(p)
        if not file.is_file():
            raise ValueError(f"{file} does not exist; give paths of .txt or .md narratives.")
        text = file.read_text(encoding="utf-8-sig")
        if not text.strip():
            raise ValueError(f"{file} is empty")
        items.append(
            EvalItem(id=file.stem, dataset="documents", document=text, title=file.stem, group=file.stem)
        )
    return Dataset("documents", Path(paths[0]) if paths else Path("."), items)


LOADERS = {"storysumm": load_storysumm, "squality": load_squality}


def load(kind: str, path: str | Path | None = None, *, paths: list[str | Path] | None = None) -> Dataset:
    """Load a dataset by kind ("storysumm", "squality" or "documents")."""
    if kind == "documents":
        return load_documents(list(paths or ([path] if path else [])))
    if kind not in LOADERS:
        raise ValueError(f"unknown dataset kind {kind!r}; known: storysumm, squality, documents")
    return LOADERS[kind](path)
