"""The main job end to end over real HTTP: index, summarize, judge, refine, stop on target; resume; no leakage."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from graphs.refine import build_graph
from storyjudge.core.context import Context
from storyjudge.core.llm import ModelError
from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import FIRST_SUMMARY, FIXED_SUMMARY, STORY, StoryResponder, cli_refine, schema_name


def test_cli_refine_raises_the_score_and_stops_on_target(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(StoryResponder())
    run_dir = tmp_path / "run"
    result, record = cli_refine(
        server.base_url, tmp_path, env={"OPENAI_API_KEY": "sk-test-secret-key-123456"}
    )
    assert [s["nfs"] for s in record["scores"]] == pytest.approx([2 / 3, 1.0])
    assert record["stop_reason"].startswith("target reached")
    assert record["best_iteration"] == 1 and record["best_summary"] == FIXED_SUMMARY
    flagged = [v for v in record["iterations"][0]["factscore"]["verdicts"] if v["status"] == "unsupported"]
    assert [v["fact"]["text"] for v in flagged] == ["Bob steals the map from Alice."]
    assert flagged[0]["feedback"] and flagged[0]["evidence"]["scenes"], "feedback and evidence are recorded"
    assert record["context"]["resolved_models"]["judge"] == "openai:scripted"
    assert record["prompts"]["judge"].startswith("judge@")
    assert record["usage"]["total"]["calls"] > 0
    assert "Bob gives Alice the map" in result.output and "target reached" in result.output
    for name in ("result.json", "ckg.json", "checkpoints.sqlite", "meta.json"):
        assert (run_dir / name).exists(), name
    everything = "".join(p.read_text(errors="ignore") for p in run_dir.rglob("*") if p.is_file())
    assert "sk-test-secret-key-123456" not in everything


def _ctx(server: OpenAIServer, tmp_path: Path, **fields: Any) -> Context:
    return Context(
        model="openai:scripted",
        base_url=server.base_url,
        run_dir=str(tmp_path / "run"),
        cache_dir=str(tmp_path / "cache"),
        retry_budget_s=0,
        parse_retries=0,
        **{"ckg_samples": 1, **fields},
    )


def test_invoke_with_dict_context_and_rounds_do_not_leak(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    responder = StoryResponder()
    server = scripted_server(responder)
    graph = build_graph()
    out = graph.invoke({"document": STORY}, context=_ctx(server, tmp_path).public_dict())
    first, second = sorted(out["iterations"], key=lambda i: i["iteration"])
    assert first["summary"] == FIRST_SUMMARY and second["summary"] == FIXED_SUMMARY
    for it in (first, second):
        card = it["factscore"]
        assert {v["fact"]["iteration"] for v in card["verdicts"]} == {it["iteration"]}
        assert card["facts"] == len(card["verdicts"]) == 3
    # one judge request per fact (fan-out width = fact count); round 2 re-reads 2 unchanged facts from the cache
    assert responder.calls["judge"] == 3 + 1


def test_the_summarizer_works_while_the_scenes_are_extracted(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    """Each extraction answer waits here until the summarizer has asked: a graph that summarizes after the index
    fails (each wait then ends at its 30 s guard)."""
    story = StoryResponder()
    summarizing = threading.Event()
    began: list[bool] = []

    def responder(body: dict[str, Any]) -> Any:
        if schema_name(body) == "SceneTriples":
            began.append(summarizing.wait(timeout=30))
        elif not schema_name(body) and "You revise a summary" not in json.dumps(body):
            summarizing.set()
        return story(body)

    server = scripted_server(responder)
    out = build_graph().invoke({"document": STORY}, context=_ctx(server, tmp_path))
    assert began and all(began), began
    assert [i["iteration"] for i in out["iterations"]] == [0, 1]  # factscore started once, after both
    assert out["iterations"][0]["summary"] == FIRST_SUMMARY and out["stop_reason"].startswith(
        "target reached"
    )
    assert story.calls["summarize"] >= 1 and story.calls["extract"] == len(began)


def test_the_summarizers_calls_take_a_free_slot_before_the_extraction_samples_waiting_for_it(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    """Factscore waits for the CKG and the summary: the summarizer's second call, queued behind every extraction
    sample, would add the extraction's length to the summary's chain.

    One slot: the first of the summarizer's calls may find it taken, and the second waits while a sample it
    gave the slot to is answered; behind the queued samples, every one of them would come between the two.
    """
    server = scripted_server(StoryResponder(), latency=0.05)
    build_graph().invoke(
        {"document": STORY}, context=_ctx(server, tmp_path, ckg_samples=3, concurrency=1, max_iterations=0)
    )
    kinds = ["extract" if schema_name(body) == "SceneTriples" else "other" for body in server.completions]
    first_summary_call = kinds.index("other")
    second_summary_call = kinds.index("other", first_summary_call + 1)
    extraction_samples = kinds.count("extract")
    assert extraction_samples >= 6
    assert first_summary_call <= 1, kinds
    assert second_summary_call - first_summary_call <= 2, kinds
    assert kinds[: first_summary_call + extraction_samples + 2].count("extract") == extraction_samples, kinds


def test_loop_stops_on_saturation_and_keeps_best(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(StoryResponder(fix=False))
    out = build_graph().invoke({"document": STORY}, context=_ctx(server, tmp_path, max_iterations=3))
    assert "patience 1 stops the loop after one round without a gain" in out["stop_reason"]
    assert [i["iteration"] for i in out["iterations"]] == [0, 1]
    assert out["best_iteration"] == 1  # a tie goes to the later round


def test_resume_after_judge_failure_repeats_no_finished_judge(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    story = StoryResponder()
    judged: list[str] = []
    state = {"fail": True}

    def responder(body: dict[str, Any]) -> Any:
        if schema_name(body) == "Verdict":
            judged.append(body["messages"][-1]["content"])
            if state["fail"] and "treasure" in body["messages"][-1]["content"].split("<fact>")[-1]:
                # permanent: the run ends. Answered last, so the other sentences' tasks have finished and been
                # checkpointed: a task still running when LangGraph ends the step on an error keeps no writes
                time.sleep(1.0)
                return {"status": 400, "error": "injected failure"}
        return story(body)

    server = scripted_server(responder)
    graph = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    with pytest.raises(ModelError):
        graph.invoke({"document": STORY}, config=config, context=_ctx(server, tmp_path))
    before = len(judged)
    assert before == 3
    state["fail"] = False
    # a fresh cache: only the checkpoint can spare the finished judge calls
    out = graph.invoke(None, config=config, context=_ctx(server, tmp_path / "fresh"))
    resumed = judged[before:]
    # round 0: only the failed fact is judged again; round 1: its 3 facts, of which the treasure fact is now
    # in the fresh cache
    assert len(resumed) == 1 + 2
    assert "treasure" in resumed[0].split("<fact>")[-1]
    assert out["stop_reason"].startswith("target reached")


def test_the_finish_node_records_wall_time_from_the_start_mark(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    """result.json has one writer, the finish node; given when the run started, it records the wall time."""
    server = scripted_server(StoryResponder())
    started = time.time() - 100
    build_graph().invoke({"document": STORY, "started_at": started}, context=_ctx(server, tmp_path))
    record = json.loads((tmp_path / "run" / "result.json").read_text())
    assert record["wall_seconds"] >= 100 and record["best_summary"] == FIXED_SUMMARY


def test_cli_refine_result_is_the_finish_nodes(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refine command writes no result.json of its own: every write comes from the finish node."""
    import nodes.finish
    import storyjudge.apps.cli.refine

    writers: list[str] = []
    real = nodes.finish.write_result

    def counting(who: str) -> Callable[[Any, dict[str, Any]], Path]:
        def write(run_dir: Any, result: dict[str, Any]) -> Path:
            writers.append(who)
            return real(run_dir, result)

        return write

    monkeypatch.setattr(nodes.finish, "write_result", counting("finish"))
    monkeypatch.setattr(storyjudge.apps.cli.refine, "write_result", counting("cli"))
    server = scripted_server(StoryResponder())
    before = time.perf_counter()
    _, record = cli_refine(server.base_url, tmp_path)
    took = time.perf_counter() - before
    # the command's own start mark: more than nothing, and no more than the command took here
    assert writers == ["finish"] and 0 < record["wall_seconds"] <= took + 0.01
