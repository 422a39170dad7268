"""Experiment runner: resume without repeated LLM calls, budgets, failures, tables, plots, dry run, CLI.

The graphs are replaced by a small stand-in that makes its LLM calls through ``storyjudge.core.llm`` against the
scripted HTTP server, so caching and request counting are real while the test stays fast and independent of
the index/embedder stack.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import prompts
from eval.estimate import estimate, estimate_item
from eval.grid import ExperimentConfig, cells, load_config
from eval.runner import Experiment, RowLog, finish
from prompts.schemas import AtomicFacts, SceneTriples, Verdict
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.llm import ask_structured
from storyjudge.core.scripted_server import OpenAIServer, last_user_text
from storyjudge.core.textsplit import sentences
from storyjudge.core.usage import Usage, merge_usage

STORIES = {
    "1": "Ann sails to the island. Ann finds a chest of gold.",
    "2": "Bo runs to town. Bo buys bread.",
}
RECORDS = {
    "s1a": {
        "story-id": 1,
        "story": STORIES["1"],
        "summary": ["Ann sails to the island.", "Ann sinks."],
        "label": 0,
        "errors": [1, 0],
    },
    "s1b": {
        "story-id": 1,
        "story": STORIES["1"],
        "summary": ["Ann sails.", "Ann finds gold."],
        "label": 1,
        "errors": [1, 1],
    },
    "s2a": {
        "story-id": 2,
        "story": STORIES["2"],
        "summary": ["Bo runs to town.", "Bo buys bread."],
        "label": 1,
        "errors": [1, 1],
    },
}


def schema_of(body: dict[str, Any]) -> str:
    return str(((body.get("response_format") or {}).get("json_schema") or {}).get("name", ""))


def responder(body: dict[str, Any]) -> str:
    """Decomposer: the sentence is its one fact; judge: everything but sinking is supported."""
    name, text = schema_of(body), last_user_text(body)
    if name == "SceneTriples":
        return json.dumps({"characters": [{"name": "Ann", "aliases": []}], "triples": []})
    if name == "AtomicFacts":
        return json.dumps({"facts": [text.split("SENTENCE: ", 1)[1].split("\n")[0]]})
    if name == "Verdict":
        supported = "sinks" not in text
        return json.dumps({"rationale": "r", "supported": supported, "feedback": "", "evidence": []})
    return "{}"


def stand_in(fail_on: set[str] | None = None) -> Callable[[str, dict[str, Any], Context], dict[str, Any]]:
    """A factscore stand-in: extraction without an index, a decomposition per sentence, a judge per fact."""
    calls: list[dict[str, Any]] = []

    def invoke(name: str, graph_input: dict[str, Any], ctx: Context) -> dict[str, Any]:
        assert name == "factscore"
        calls.append(graph_input)
        usage: Usage = {}
        out: dict[str, Any] = {}
        if "index" not in graph_input:
            scene = graph_input["scenes"][0]["text"]
            extracted = ask_structured(
                ctx, "extractor", prompts.load("extract_triples"), [("user", scene)], SceneTriples
            )
            usage = merge_usage(usage, extracted.usage)
            out.update(index={"store_dir": ""}, scenes=graph_input["scenes"], ckg={"nodes": []})
        per_sentence, supported_total, judged_total = [], 0, 0
        for i, sentence in enumerate(sentences(graph_input["summary"])):
            facts = ask_structured(
                ctx,
                "decomposer",
                prompts.load("decompose"),
                [("user", f"SENTENCE: {sentence}\n")],
                AtomicFacts,
            )
            usage = merge_usage(usage, facts.usage)
            if fail_on and sentence in fail_on:
                fail_on.discard(sentence)  # fail once, after the call was made (and cached)
                raise RuntimeError("worker died mid-item")
            supported = 0
            for fact in facts.value.facts if facts.value else []:
                verdict = ask_structured(
                    ctx, "judge", prompts.load("judge"), [("user", f"FACT: {fact}")], Verdict
                )
                usage = merge_usage(usage, verdict.usage)
                supported += bool(verdict.value and verdict.value.supported)
            judged = len(facts.value.facts) if facts.value else 0
            per_sentence.append(
                {
                    "index": i,
                    "sentence": sentence,
                    "facts": judged,
                    "supported": supported,
                    "judged": judged,
                    "score": supported / judged if judged else None,
                }
            )
            supported_total += supported
            judged_total += judged
        card = {
            "iteration": 0,
            "score": supported_total / judged_total if judged_total else None,
            "supported": supported_total,
            "unsupported": judged_total - supported_total,
            "unjudged": 0,
            "facts": judged_total,
            "per_sentence": per_sentence,
            "verdicts": [],
            "decompose_failures": 0,
        }
        return {**out, "factscore": card, "usage": usage, "timings": {"judge": 0.01}}

    invoke.calls = calls  # type: ignore[attr-defined]
    return invoke


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_storysumm.json"
    path.write_text(json.dumps(RECORDS))
    return path


def make_config(tmp_path: Path, data_file: Path, server: OpenAIServer, **extra: Any) -> ExperimentConfig:
    data: dict[str, Any] = {
        "name": "resume-test",
        "out_dir": str(tmp_path / "exp"),
        "task": "score",
        "metrics": ["factscore", "stats"],
        "datasets": [{"kind": "storysumm", "path": str(data_file)}],
        "models": ["openai:scripted-a", "openai:scripted-b"],
        "base_url": server.base_url,
        "context": {"retry_budget_s": 0, "ckg_samples": 1},
    }
    data.update(extra)
    return ExperimentConfig.from_dict(data)


def bodies(server: OpenAIServer, start: int = 0) -> list[str]:
    return [json.dumps(b, sort_keys=True) for b in server.completions[start:]]


def test_resume_after_k_cells_makes_no_repeated_llm_call(
    tmp_path: Path, data_file: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    server = scripted_server(responder)
    config = make_config(tmp_path, data_file, server)
    assert len(cells(config)) == 2

    first = Experiment(config, invoke=stand_in()).run(max_cells=1)  # "killed" after the first cell
    assert first.ran == 3 and first.stopped is None
    seen = bodies(server)
    assert seen and all('"scripted-a"' in b for b in seen)

    second = Experiment(config, invoke=stand_in()).run()
    assert second.skipped == 3 and second.ran == 3
    new = bodies(server, len(seen))
    assert new and all('"scripted-b"' in b for b in new)
    assert not set(new) & set(seen), "a finished cell's LLM calls were made again"
    assert len(second.rows) == 6 and all(r["status"] == "ok" for r in second.rows)

    before = len(server.completions)
    third = Experiment(config, invoke=stand_in()).run()
    assert third.ran == 0 and third.skipped == 6
    assert len(server.completions) == before  # nothing left to do, nothing asked
    # a smaller plan reports only its own rows, though the log holds more
    assert len(Experiment(config, invoke=stand_in()).run(max_cells=1).rows) == 3


def test_item_that_died_is_retried_from_the_cache(
    tmp_path: Path, data_file: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    server = scripted_server(responder)
    config = make_config(tmp_path, data_file, server, models=["openai:scripted"])
    first = Experiment(config, invoke=stand_in(fail_on={"Ann finds gold."})).run()
    statuses = {r["item"]["id"]: r["status"] for r in first.rows}
    assert statuses == {"s1a": "ok", "s1b": "error", "s2a": "ok"}
    failed = next(r for r in first.rows if r["status"] == "error")
    assert "worker died" in failed["error"]
    seen = bodies(server)

    second = Experiment(config, invoke=stand_in()).run()
    assert second.ran == 1 and second.skipped == 2
    new = bodies(server, len(seen))
    assert new, "the retried item still had calls to make"
    assert not set(new) & set(seen), "the calls the failed item had already made were repeated"
    assert all(r["status"] == "ok" for r in second.rows)
    # the log keeps the failure; the latest row per item is what counts
    assert len(RowLog(config.out_dir / "rows.jsonl").read()) == 4


def test_rows_carry_parameters_scores_usage_and_predictions(
    tmp_path: Path, data_file: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    server = scripted_server(responder)
    config = make_config(tmp_path, data_file, server, models=["openai:scripted"])
    invoke = stand_in()
    outcome = Experiment(config, invoke=invoke).run()
    rows = {r["item"]["id"]: r for r in outcome.rows}
    row = rows["s1a"]
    assert row["model"] == "openai:scripted" and row["task"] == "score" and row["dataset"] == "storysumm"
    assert row["context"]["ckg_samples"] == 1 and "cache_dir" not in row["context"]
    assert row["labels"] == {"summary": 0, "sentences": [1, 0], "coherence": None}
    assert row["factscore"]["score"] == 0.5 and row["factscore"]["predicted_unfaithful"] is True
    assert [s["predicted_unfaithful"] for s in row["factscore"]["sentences"]] == [False, True]
    assert rows["s2a"]["factscore"]["predicted_unfaithful"] is False
    assert row["usage_totals"]["calls"] > 0 and row["wall_seconds"] >= 0 and row["timings"]
    assert row["stats"]["length_tokens"] > 0
    assert (config.out_dir / row["record"]).is_file()
    # the second summary of story 1 reused the first one's index: one extraction per story
    assert sum("index" not in call for call in invoke.calls) == 2  # type: ignore[attr-defined]
    assert rows["s1b"].get("index_reused") is True


def test_budget_stops_new_items(
    tmp_path: Path, data_file: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    server = scripted_server(responder)
    config = make_config(tmp_path, data_file, server, models=["openai:scripted"], budget={"max_calls": 2})
    outcome = Experiment(config, invoke=stand_in()).run()
    assert outcome.stopped and "budget" in outcome.stopped
    assert len(outcome.rows) == 1


def test_unreachable_model_stops_the_run(tmp_path: Path, data_file: Path) -> None:
    config = ExperimentConfig.from_dict(
        {
            "out_dir": str(tmp_path / "exp"),
            "task": "score",
            "datasets": [{"kind": "storysumm", "path": str(data_file)}],
            "models": ["openai:scripted"],
            "base_url": "http://127.0.0.1:9/v1",
            "context": {"retry_budget_s": 0, "request_timeout": 2},
        }
    )
    outcome = Experiment(config, invoke=stand_in()).run()
    assert outcome.stopped and "ModelError" in outcome.stopped
    assert outcome.rows == []


def test_finish_writes_tables_agreement_and_plots(
    tmp_path: Path, data_file: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    server = scripted_server(responder)
    config = make_config(tmp_path, data_file, server)
    outcome = Experiment(config, invoke=stand_in()).run()
    result = finish(outcome, config)
    out = config.out_dir
    summary, _, paired = (out / "summary.md").read_text().partition("\n\n")
    assert summary.count("\n") == 1 + len(cells(config))
    assert (
        "Paired differences" in paired and (out / "differences.csv").is_file()
    )  # the two models, item by item
    header = (out / "summary.csv").read_text().splitlines()[0]
    assert "balanced_accuracy" in header and "calls" in header and "nfs" in header
    agreement = json.loads((out / "agreement.json").read_text())
    report = agreement[cells(config)[0].id]
    # the stand-in judge flags exactly the unfaithful sentence: perfect agreement
    assert report["summary_level"]["table"]["balanced_accuracy"]["value"] == 1.0
    assert report["sentence_level"]["table"]["cohens_kappa"]["value"] == 1.0
    cost = out / "cost_vs_score.png"
    assert cost in result["files"] and cost.read_bytes()[:4] == b"\x89PNG"
    assert not (out / "score_per_iteration.png").exists()
    assert any("no refine rows" in note for note in result["plot_notes"])


def refine_stand_in(name: str, graph_input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if name == "coherence":
        summaries = graph_input["summaries"]
        scores = [{"id": s["id"], "score": 0.9 - 0.1 * n} for n, s in enumerate(summaries)]
        return {"coherence": {"summaries": scores}, "usage": {}}
    assert name == "refine"
    iterations = [
        {
            "iteration": i,
            "summary": text,
            "accepted": True,
            "note": "",
            "factscore": {
                "score": score,
                "supported": 1,
                "unsupported": 1,
                "unjudged": 0,
                "facts": 2,
                "decompose_failures": 0,
            },
        }
        for i, (text, score) in enumerate([("Ann sails away.", 0.5), ("Ann sails to the island.", 1.0)])
    ]
    usage = {
        ctx.model: {
            "calls": 5,
            "cache_hits": 0,
            "input_tokens": 500,
            "output_tokens": 50,
            "failures": 0,
            "cost_usd": 0.0,
        }
    }
    return {"iterations": iterations, "best_iteration": 1, "stop_reason": "target reached", "usage": usage}


def test_refine_task_rows_and_plots(tmp_path: Path) -> None:
    squality = tmp_path / "sq.jsonl"
    record = {
        "metadata": {"uid": "u1"},
        "document": "Ann sails to the island and finds gold.",
        "questions": [
            {
                "question_number": 1,
                "question_text": "What is the plot?",
                "responses": [{"response_text": "Ann sails to the island."}],
            }
        ],
    }
    squality.write_text(json.dumps(record) + "\n")
    config = ExperimentConfig.from_dict(
        {
            "out_dir": str(tmp_path / "exp"),
            "task": "refine",
            "metrics": ["factscore", "coherence", "rouge", "stats"],
            "datasets": [{"kind": "squality", "path": str(squality)}],
            "models": ["local:smollm2"],
            "strategies": ["hierarchical", "incremental"],
            "loops": [{"max_iterations": 1}],
        }
    )
    assert len(cells(config)) == 2
    outcome = Experiment(config, invoke=refine_stand_in).run()
    row = outcome.rows[0]
    scores = {k: v for k, v in row["scores"].items() if "coverage" not in k and "reliable" not in k}
    assert scores == {
        "nfs_initial": 0.5,
        "nfs_best": 1.0,
        "coherence_initial": 0.9,
        "coherence_best": 0.8,
    }
    assert row["rouge"]["best"]["rouge1"] == 1.0 and row["rouge"]["initial"]["rouge1"] < 1.0
    assert row["loop"] == {"max_iterations": 1} and row["context"]["max_iterations"] == 1
    assert row["stats"]["best"]["novel_trigrams_pct"] == 0.0
    result = finish(outcome, config)
    names = {p.name for p in result["files"]}
    assert {"score_per_iteration.png", "nfs_vs_booookscore.png", "cost_vs_score.png"} <= names
    line = result["table"][0]
    assert line["nfs_initial"] == 0.5 and line["nfs_best"] == 1.0 and line["rouge1_best"] == 1.0


def test_dry_run_counts_each_story_index_once(tmp_path: Path, data_file: Path) -> None:
    data = {
        "out_dir": str(tmp_path / "exp"),
        "task": "score",
        "datasets": [{"kind": "storysumm", "path": str(data_file)}],
        "models": ["openai:gpt-4o-mini", "local:smollm2"],
        "base_url": "",
        "context": {"ckg_samples": 2},
    }
    config = ExperimentConfig.from_dict(data)
    result = estimate(config)
    first = result["cells"][0]
    items = config.datasets[0].load().items
    expected = sum(
        estimate_item(config, cells(config)[0], item, indexed=item.id == "s1b")["calls"] for item in items
    )
    assert first["calls"] == expected
    unindexed = sum(estimate_item(config, cells(config)[0], item)["calls"] for item in items)
    assert unindexed - expected == 2  # story 1's extraction (2 samples of its one scene) is counted once
    assert first["usd"] is not None and first["usd"] > 0
    assert result["cells"][1]["usd"] is None  # no price for the embedded model
    assert result["assumptions"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, "there is no setting 'colour'; known: name, out_dir"),
        ({"metrics": ["bleu"]}, r"metrics\[0\] must be 'factscore', .* not 'bleu'"),
        ({"loops": [{"max_rounds": 2}]}, r"loops\[0\] key 'max_rounds' must be 'max_iterations'"),
        ({"context": {"retrieval_k": 0}}, "retrieval_k must be >= 1, not 0"),
        ({"context": {"no_such_field": 1}}, "there is no setting 'no_such_field'"),
        ({"task": "score", "datasets": [{"kind": "squality"}]}, "needs datasets that give summaries"),
        ({"datasets": []}, r"datasets is missing \(.*e\.g\. datasets: \[\{kind: storysumm"),
    ],
)
def test_config_errors_are_clear(
    tmp_path: Path, data_file: Path, change: dict[str, Any], message: str
) -> None:
    data: dict[str, Any] = {
        "out_dir": str(tmp_path),
        "datasets": [{"kind": "storysumm", "path": str(data_file)}],
    }
    data.update(change)
    with pytest.raises(ConfigError, match=message) as raised:
        ExperimentConfig.from_dict(data)
    assert "\n" not in str(raised.value)


def test_config_file_paths_resolve_against_the_config(tmp_path: Path, data_file: Path) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    config_path = folder / "exp.yaml"
    config_path.write_text(
        yaml.safe_dump({"datasets": [{"kind": "storysumm", "path": "../tiny_storysumm.json"}]})
    )
    config = load_config(config_path)
    assert Path(config.datasets[0].path) == data_file.resolve()


def test_torn_last_row_is_ignored(tmp_path: Path) -> None:
    log = RowLog(tmp_path / "rows.jsonl")
    log.append({"cell": "c", "item": {"id": "a"}, "status": "ok"})
    with (tmp_path / "rows.jsonl").open("a") as handle:
        handle.write('{"cell": "c", "item": {"id": "b"}, "sta')
    assert [r["item"]["id"] for r in log.read()] == ["a"]


def test_cli_accepts_config_as_first_argument(tmp_path: Path, data_file: Path) -> None:
    from storyjudge.apps.cli import app

    config_path = tmp_path / "exp.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "out_dir": str(tmp_path / "exp"),
                "task": "score",
                "datasets": [{"kind": "storysumm", "path": str(data_file)}],
                "models": ["openai:gpt-4o-mini"],
                "base_url": "http://127.0.0.1:9/v1",
            }
        )
    )
    runner = CliRunner()
    short = runner.invoke(app, ["eval", str(config_path), "--dry-run"])
    long = runner.invoke(app, ["eval", "run", str(config_path), "--dry-run"])
    assert short.exit_code == 0, short.output
    assert long.exit_code == 0, long.output
    assert "Dry run" in short.output and "gpt-4o-mini" in short.output
    assert not (tmp_path / "exp" / "rows.jsonl").exists()  # a dry run calls nothing and writes no rows
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets: [{kind: nope}]\n")
    failed = runner.invoke(app, ["eval", str(bad)])
    assert failed.exit_code == 1
    assert "Traceback" not in failed.output


def test_cli_shortcuts_dry_run(tmp_path: Path, data_file: Path) -> None:
    from storyjudge.apps.cli import app

    squality = tmp_path / "sq.jsonl"
    record = {
        "metadata": {"uid": "u1"},
        "document": "Ann sails to the island and finds gold. " * 50,
        "questions": [{"question_number": 1, "responses": [{"response_text": "Ann sails."}]}],
    }
    squality.write_text(json.dumps(record) + "\n")
    runner = CliRunner()
    common = ["--dry-run", "--model", "openai:gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1"]
    for args in (
        ["eval", "storysumm", str(data_file)],
        ["eval", "squality", str(squality), "--max-iterations", "1"],
    ):
        result = runner.invoke(
            app, [*args, *common, "--out-dir", str(tmp_path / "exp")], env={"COLUMNS": "80"}
        )
        assert result.exit_code == 0, result.output
        assert "Dry run" in result.output and "total" in result.output
        # at 80 columns a cell's name is folded onto lines, never cut to "squality-…"
        assert "…" not in result.output
        first_column = "".join(
            line.split("│")[1].strip() for line in result.output.splitlines() if line.count("│") > 2
        )
        cell = "storysumm" if "storysumm" in args else "squality"
        assert f"{cell}-" in first_column and "gpt-4o-mini" in first_column
    missing = runner.invoke(app, ["eval", "storysumm", str(tmp_path / "nope.json")])
    assert missing.exit_code == 1 and "does not exist" in missing.output


class DeferredExecutor:
    """An executor that holds submitted items and finishes them later, newest first; one 'dies' once."""

    exclusive_groups = True

    def __init__(self, experiment: Experiment, width: int, lose: str = "") -> None:
        self.experiment, self.width, self.lose = experiment, width, lose
        self.held: list[Any] = []
        self.in_flight_groups: list[list[tuple[str, str]]] = []
        self.closed = False

    def submit(self, cell: Any, item: Any) -> None:
        self.held.append((cell, item))
        self.in_flight_groups.append([(c.id, i.group) for c, i in self.held])

    def next_done(self) -> tuple[Any, Any, Any]:
        cell, item = self.held.pop()
        if item.id == self.lose:
            self.lose = ""
            return cell, item, ("error", "KilledWorker: the item's worker died")
        return cell, item, self.experiment.attempt(cell, item, own_cache=True)

    def close(self) -> None:
        self.closed = True


def test_an_executor_runs_items_the_driver_writes_rows_and_groups_stay_exclusive(
    tmp_path: Path, data_file: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    server = scripted_server(responder)
    config = make_config(tmp_path, data_file, server, models=["openai:scripted"])
    experiment = Experiment(config, invoke=stand_in())
    lost = experiment.plan()[0][1].id
    runner = DeferredExecutor(experiment, width=3, lose=lost)
    first = experiment.run(executor=runner)
    assert runner.closed and first.ran == 3
    for in_flight in runner.in_flight_groups:  # two summaries of story 1 never ran at once
        assert len(in_flight) == len(set(in_flight)) and len(in_flight) <= 3
    by_id = {r["item"]["id"]: r for r in first.rows}
    assert by_id[lost]["status"] == "error" and "KilledWorker" in by_id[lost]["error"]
    assert sum(r["status"] == "ok" for r in first.rows) == 2
    assert not (config.out_dir / "cache").exists()  # no one cache for the experiment: one per item
    assert len({p.name for p in (config.out_dir / "runs").glob("*/*/cache/*")}) == 2

    second = Experiment(config, invoke=stand_in()).run(executor=DeferredExecutor(experiment, width=3))
    assert second.ran == 1 and second.skipped == 2
    assert all(r["status"] == "ok" for r in second.rows) and len(second.rows) == 3
    lines = (config.out_dir / "rows.jsonl").read_text().splitlines()
    assert len(lines) == 4  # 3 rows, then the retried one: nothing ran twice


def test_item_ids_that_read_alike_get_folders_of_their_own(tmp_path: Path) -> None:
    """Ids "../../x", "x" and "X" all slug to "x": each item still gets its own run directory and record."""
    from storyjudge.core.rundir import RunDir, document_hash

    squality = tmp_path / "sq.jsonl"
    lines = []
    for n, uid in enumerate(["../../x", "x", "X"]):
        record = {
            "metadata": {"uid": uid},
            "document": f"Story {n}: Ann sails to the island and finds gold.",
            "questions": [
                {
                    "question_number": 1,
                    "question_text": "What is the plot?",
                    "responses": [{"response_text": "Ann sails to the island."}],
                }
            ],
        }
        lines.append(json.dumps(record))
    squality.write_text("\n".join(lines) + "\n")
    run_dirs: list[str] = []

    def claiming(name: str, graph_input: dict[str, Any], ctx: Context) -> dict[str, Any]:
        if name == "refine":  # as the index's first node does: the folder belongs to one document
            RunDir(Path(ctx.run_dir)).claim(document_hash(graph_input["document"]), graph_input["title"])
            run_dirs.append(ctx.run_dir)
        return refine_stand_in(name, graph_input, ctx)

    config = ExperimentConfig.from_dict(
        {
            "out_dir": str(tmp_path / "exp"),
            "task": "refine",
            "metrics": ["factscore", "stats"],
            "datasets": [{"kind": "squality", "path": str(squality)}],
            "models": ["local:smollm2"],
            "loops": [{"max_iterations": 1}],
        }
    )
    outcome = Experiment(config, invoke=claiming).run()
    assert [r["status"] for r in outcome.rows] == ["ok", "ok", "ok"], [r.get("error") for r in outcome.rows]
    assert len(set(run_dirs)) == 3
    assert len({r["record"] for r in outcome.rows}) == 3
    assert all(Path(d).parent.name == outcome.rows[0]["cell"] for d in run_dirs)
