"""Dataset loaders on the bundled splits, on the upstream string-encoded layout, and on the glitch; names resolve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.datasets import (
    SQUALITY_DEV,
    STORYSUMM_VAL,
    load,
    load_squality,
    load_storysumm,
    parse_listish,
    resolve,
)

ROOT = Path(__file__).resolve().parents[2]


def test_parse_listish_accepts_lists_json_and_python_literals() -> None:
    assert parse_listish([1, 0], "x") == [1, 0]
    assert parse_listish("[1, 0, 1]", "x") == [1, 0, 1]
    assert parse_listish("['He said \"no\".', 'It\\'s late.']", "x") == ['He said "no".', "It's late."]
    assert parse_listish("", "x") == []
    with pytest.raises(ValueError, match="neither a JSON nor a Python list"):
        parse_listish("[unclosed", "summary")


def test_real_val_split() -> None:
    data = load_storysumm()
    assert len(data.items) == 33
    stories = {item.group for item in data.items}
    assert len(stories) == 11  # three summaries per story
    for item in data.items:
        assert item.document and item.sentences and item.summary == " ".join(item.sentences)
        assert item.summary_label in (0, 1)
        assert item.sentence_labels is not None and len(item.sentence_labels) == len(item.sentences)
        # the summary label is the conjunction of the sentence labels on this split
        assert (0 in item.sentence_labels) == (item.summary_label == 0)
    assert sum(item.summary_label == 0 for item in data.items) == 25
    assert sum(label == 0 for item in data.items for label in item.sentence_labels or []) == 41
    # this copy of the split has no label-count glitch; the loader says nothing it did not do
    assert data.notes == []


def _upstream_layout(records: dict[str, dict], drop_last_label_of: list[str]) -> dict[str, dict]:
    """The upstream file's layout: list fields as Python-literal strings, labels as strings."""
    out = {}
    for key, record in records.items():
        errors = list(record["errors"])
        if key in drop_last_label_of:
            errors = errors[:-1]
        out[key] = {
            **record,
            "label": str(record["label"]),
            "summary": repr(list(record["summary"])),
            "errors": str(errors),
            "claims": repr(list(record["claims"])),
            "explanations": json.dumps(record["explanations"]),
            "story-id": str(record["story-id"]),
        }
    return out


def test_glitch_one_label_fewer_than_sentences(tmp_path: Path) -> None:
    records = json.loads(STORYSUMM_VAL.read_text())
    unfaithful = next(k for k, r in records.items() if r["label"] == 0)
    faithful = next(k for k, r in records.items() if r["label"] == 1)
    path = tmp_path / "storysumm_upstream.json"
    path.write_text(json.dumps(_upstream_layout(records, [unfaithful, faithful])))

    data = load_storysumm(path)
    by_id = {item.id: item for item in data.items}
    assert len(data.items) == 33
    # an unfaithful summary whose labels cannot be aligned keeps its summary label but no sentence labels
    assert by_id[unfaithful].sentence_labels is None
    assert by_id[unfaithful].summary_label == 0
    # a faithful summary's missing label can only be "faithful"
    assert by_id[faithful].sentence_labels == [1] * len(by_id[faithful].sentences)
    # and both repairs are said, per item and for the file
    assert len(data.notes) == 2
    assert any(unfaithful in note and "left out of sentence-level" in note for note in data.notes)
    assert any(faithful in note and "set to faithful" in note for note in data.notes)
    assert by_id[unfaithful].notes and by_id[faithful].notes
    # every other field parsed from its string form
    other = next(item for item in data.items if item.id not in (unfaithful, faithful))
    assert other.sentences == records[other.id]["summary"]
    assert other.sentence_labels == records[other.id]["errors"]
    assert other.meta["claims"] == records[other.id]["claims"]


def test_other_files_of_the_format(tmp_path: Path) -> None:
    records = [
        {
            "id": "a",
            "story": "Ann sails.",
            "summary": "['Ann sails.', 'Ann sinks.']",
            "label": "0",
            "errors": "[1, 0]",
        },
        {"id": "b", "story": "Bo runs.", "summary": ["Bo runs."], "label": 1},
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    data = load_storysumm(path)
    assert [i.id for i in data.items] == ["a", "b"]
    assert data.items[0].sentence_labels == [1, 0]
    assert data.items[1].sentence_labels is None  # no sentence labels given
    assert data.items[0].group != data.items[1].group  # no story id: grouped by story text
    assert data.limited(1).items == data.items[:1]
    assert "first 1 of 2" in data.limited(1).notes[-1]


def test_bad_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        load_storysumm(tmp_path / "missing.json")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([{"text": "no story field"}]))
    with pytest.raises(ValueError, match="STORYSUMM-format"):
        load_storysumm(wrong)
    bad_label = tmp_path / "label.json"
    bad_label.write_text(json.dumps([{"story": "s", "summary": ["x"], "label": "maybe"}]))
    with pytest.raises(ValueError, match="must be 0 or 1"):
        load_storysumm(bad_label)


def test_real_squality_dev_split() -> None:
    data = load_squality()
    assert len(data.items) == 25
    for item in data.items:
        assert len(item.references) == 4 and all(len(r.split()) > 20 for r in item.references)
        assert "plot" in item.meta["question"].lower()
        assert len(item.document.split()) > 2000
    assert data.items[0].title == "Jinx Ship To The Rescue"


def test_squality_other_question(tmp_path: Path) -> None:
    record = {
        "metadata": {"uid": "u1", "passage_id": "1"},
        "document": "Title\n\nA story.",
        "questions": [
            {
                "question_number": 1,
                "question_text": "What is the plot?",
                "responses": [{"response_text": "P."}],
            },
            {
                "question_number": 2,
                "question_text": "Who is Ann?",
                "responses": [{"response_text": "A sailor."}],
            },
        ],
    }
    path = tmp_path / "sq.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert load_squality(path).items[0].references == ["P."]
    assert load_squality(path, question=2).items[0].references == ["A sailor."]


def test_names_resolve_to_the_bundled_splits_then_the_data_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORYJUDGE_DATA_DIR", str(tmp_path / "cache"))
    assert resolve("squality") == SQUALITY_DEV == resolve("squality:dev", "squality")
    assert resolve("storysumm", "storysumm") == STORYSUMM_VAL
    assert len(load("squality", "squality:dev").items) == 25
    with pytest.raises(ValueError) as missing:
        resolve("squality:test", "squality")
    said = str(missing.value)
    assert "\n" not in said and "storyjudge data get squality --split test" in said
    assert str(tmp_path / "cache" / "squality" / "test.jsonl") in said  # where it looked
    fetched = tmp_path / "cache" / "squality" / "test.jsonl"
    fetched.parent.mkdir(parents=True)
    fetched.write_text(SQUALITY_DEV.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    assert resolve("squality:test") == fetched
    assert [item.dataset for item in load_squality("squality:test").items] == ["squality"]
    with pytest.raises(ValueError, match="is a squality dataset, not storysumm"):
        load_storysumm("squality")
    with pytest.raises(ValueError, match="no split 'nope'"):
        resolve("squality:nope")
    with pytest.raises(ValueError, match="is no dataset name; give the path of a squality file"):
        resolve(tmp_path / "missing.jsonl", "squality")
    own = tmp_path / "squality"  # a file of that name wins over the name
    own.write_text("{}", encoding="utf-8")
    assert resolve("squality", base=tmp_path) == own


def test_no_product_file_points_outside_the_repository() -> None:
    """The configs, loaders, help texts and docs name data inside the repository (or a name), never ../shared."""
    files = [
        ROOT / name for name in ("README.md", "DEVELOPING.md", "pyproject.toml", "Makefile", "langgraph.json")
    ]
    for folder, pattern in (
        ("eval", "*.py"),
        ("eval", "*.yaml"),
        ("storyjudge", "*.py"),
        ("examples", "*.md"),
    ):
        files += sorted((ROOT / folder).rglob(pattern))
    files += sorted((ROOT / "storyjudge" / "apps").rglob("*.html")) + sorted(
        (ROOT / "storyjudge").rglob("*.js")
    )
    outside = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in files
        if path.is_file()
        for line in path.read_text(encoding="utf-8").splitlines()
        if "../shared" in line or "shared/data" in line or 'shared" / "data' in line
    ]
    assert outside == []
