"""End to end: ``storyjudge eval storysumm FILE`` on 3 STORYSUMM items against a scripted OpenAI server.

The real factscore graph runs (segmentation, CKG extraction, the embedded-store index with the default
embedder, decomposition, retrieval, judging) and so does the coherence graph; only the model is scripted.
The scripted judge flags exactly the sentences the annotators labelled unfaithful, so the agreement table must
come out perfect, which checks the whole path from the graph's verdicts to the printed numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from eval.datasets import STORYSUMM_VAL
from storyjudge.core.scripted_server import OpenAIServer, all_text, last_user_text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not STORYSUMM_VAL.is_file(), reason="shared STORYSUMM val split not present"),
]


def _block(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}[^>]*>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return match.group(1).strip() if match else ""


class LabelledResponder:
    """Plays every role; its judge knows the human labels, so predictions equal labels."""

    def __init__(self, unfaithful_sentences: set[str]) -> None:
        self.unfaithful = unfaithful_sentences
        self.calls: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        self.calls[kind] = self.calls.get(kind, 0) + 1

    def __call__(self, body: dict[str, Any]) -> str:
        schema = str(((body.get("response_format") or {}).get("json_schema") or {}).get("name", ""))
        text = last_user_text(body)
        if schema == "SceneTriples" or "List the characters of one scene" in text:
            self._count("extraction")
            return json.dumps({"characters": [{"name": "Daniel", "aliases": []}], "triples": []})
        if schema == "AtomicFacts" or "split one sentence of a story summary" in text:
            self._count("decomposition")
            return json.dumps({"facts": [_block(text, "sentence")]})
        if schema == "Verdict" or "meticulous fact-checker" in text:
            self._count("judge")
            fact = _block(text, "fact")
            wrong = any(fact in s or s in fact for s in self.unfaithful)
            return json.dumps(
                {
                    "rationale": "Compared with the scene.",
                    "supported": not wrong,
                    "feedback": "",
                    "evidence": [],
                }
            )
        if "causes any confusion" in all_text(body):
            self._count("coherence")
            return "Questions: no confusion\nTypes: no confusion"
        self._count("other")
        return "{}"


def test_eval_storysumm_end_to_end(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    records = json.loads(STORYSUMM_VAL.read_text())
    keys = list(records)
    # two unfaithful summaries and one faithful one; the last two share a story (its index is built once)
    chosen = {k: records[k] for k in (keys[0], keys[3], keys[4])}
    assert sorted(r["label"] for r in chosen.values()) == [0, 0, 1]
    # write them in the upstream layout (list fields as strings) to exercise "other files of the same format"
    upstream = {
        k: {**r, "summary": repr(r["summary"]), "errors": str(r["errors"]), "label": str(r["label"])}
        for k, r in chosen.items()
    }
    data = tmp_path / "three.json"
    data.write_text(json.dumps(upstream))
    unfaithful = {
        s for r in chosen.values() for s, e in zip(r["summary"], r["errors"], strict=True) if e == 0
    }
    responder = LabelledResponder(unfaithful)
    server = scripted_server(responder)
    monkeypatch.chdir(tmp_path)
    out_dir = tmp_path / "exp"
    args = [
        "eval",
        "storysumm",
        str(data),
        "--model",
        "openai:scripted",
        "--base-url",
        server.base_url,
        "--out-dir",
        str(out_dir),
        "--limit",
        "3",
        "--ckg-samples",
        "1",
        "--coherence",
    ]
    from storyjudge.apps.cli import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    output = result.output
    assert "Agreement with human labels" in output
    assert {"extraction", "decomposition", "judge", "coherence"} <= set(responder.calls)
    assert responder.calls["extraction"] == 2  # two stories, one scene each, one sample

    rows = [json.loads(line) for line in (out_dir / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["status"] == "ok" for r in rows), rows
    for row in rows:
        assert row["factscore"]["predicted_unfaithful"] == (row["labels"]["summary"] == 0)
        predicted = [s["predicted_unfaithful"] for s in row["factscore"]["sentences"]]
        assert predicted == [label == 0 for label in row["labels"]["sentences"]]
        assert row["coherence"]["score"] == 1.0
        assert row["usage_totals"]["calls"] > 0
    report = json.loads((out_dir / "agreement.json").read_text())
    cell = next(iter(report.values()))
    assert cell["summary_level"]["table"]["balanced_accuracy"]["value"] == 1.0
    assert cell["sentence_level"]["table"]["cohens_kappa"]["value"] == 1.0
    assert "coherence was scored, but the dataset has no per-sentence coherence labels" in cell["notes"]
    assert re.search(r"balanced_accuracy\s+│\s+1\.000", output), output
    assert (out_dir / "summary.md").is_file() and (out_dir / "summary.csv").is_file()

    # a rerun resumes: nothing left to do, no request reaches the server
    before = len(server.completions)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "skipped 3 already done" in again.output
    assert len(server.completions) == before


def test_eval_storysumm_items_in_parallel_lose_none(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight items at once share the process's embedder and tokenizers: every one finishes ok."""
    records = json.loads(STORYSUMM_VAL.read_text())
    chosen = dict(list(records.items())[:8])
    data = tmp_path / "eight.json"
    data.write_text(json.dumps(chosen))
    unfaithful = {
        s for r in chosen.values() for s, e in zip(r["summary"], r["errors"], strict=True) if e == 0
    }
    server = scripted_server(LabelledResponder(unfaithful))
    monkeypatch.chdir(tmp_path)
    out_dir = tmp_path / "exp"
    args = [
        *("eval", "storysumm", str(data), "--model", "openai:scripted", "--base-url", server.base_url),
        *("--out-dir", str(out_dir), "--ckg-samples", "1", "--parallel-items", "8"),
    ]
    from storyjudge.apps.cli import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out_dir / "rows.jsonl").read_text().splitlines()]
    failed = [r.get("error") for r in rows if r["status"] != "ok"]
    assert len(rows) == len(chosen) and not failed, failed
