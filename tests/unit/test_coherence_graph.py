"""The coherence graph end to end against the scripted server: modes, failures, concurrency, caching, CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from graphs.coherence import build_graph, graph
from prompts import load
from storyjudge.apps.cli import app
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.scripted_server import OpenAIServer, last_user_text

CLEAN = "Questions: no confusion\nTypes: no confusion"
SUMMARY = (
    "Mara Vell inherits a lighthouse on a northern island. "
    "She finds a locked logbook in the lamp room. "
    "The Guild sends a clerk to buy the lighthouse. "
    "Mara refuses, and the clerk leaves angry. "
    "That winter, the lamp fails during a storm. "
    "Mara repairs it with help from a fisherman, Oren. "
    "The logbook reveals that her grandmother ran smugglers. "
    "Mara burns the logbook and keeps the lighthouse."
)


def first_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def target_number(body: dict[str, Any]) -> int:
    match = re.search(r'<sentence number="(\d+)">', first_user(body))
    assert match, "every per-sentence request names its target sentence"
    return int(match.group(1))


def per_sentence(answers: dict[int, str]) -> Callable[[dict[str, Any]], str]:
    """Answer each sentence (1-based number) from a script; unscripted sentences are clean."""
    return lambda body: answers.get(target_number(body), CLEAN)


def test_score_is_the_scripted_share_and_prompt_is_ordered(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(
        per_sentence(
            {
                3: "Questions: Who or what is the Guild?\nTypes: entity omission",
                7: "**Questions:** Which grandmother? Why does it matter?\n"
                "**Types:** Causal-Omission, salience",
            }
        )
    )
    out = graph.invoke({"summary": SUMMARY}, context=ctx_for(server))
    coherence = out["coherence"]
    assert coherence["score"] == pytest.approx(6 / 8)
    assert coherence["summaries"][0]["score"] == pytest.approx(6 / 8)
    assert coherence["mode"] == "per-sentence" and "paper_setting" not in coherence
    assert coherence["prompt_version"] == load("coherence").version_id
    assert coherence["prompt"] == load("coherence").record and len(coherence["prompt"]["sha256"]) == 64
    assert coherence["coverage"] == 1.0 and coherence["reliable"] is True
    assert coherence["per_type_rates"]["entity omission"] == pytest.approx(1 / 8)
    flagged = {a["index"]: a for a in out["annotations"] if a["confused"]}
    assert sorted(flagged) == [2, 6]
    assert flagged[6]["types"] == ["causal omission", "salience"]
    assert flagged[6]["questions"] == ["Which grandmother?", "Why does it matter?"]
    assert len(server.completions) == 8
    assert out["usage"]["openai:scripted"]["calls"] == 8
    assert set(out) == {"coherence", "annotations", "usage", "timings"}
    for body in server.completions:
        text = first_user(body)
        number = target_number(body)
        sentence = out["annotations"][0]["sentence"] if number == 1 else None
        definitions = text.index("Entity omission:")
        examples = text.index("[Example summary 1]")
        summary_at = text.index("<summary>\n" + SUMMARY + "\n</summary>")
        target_at = text.index(f'<sentence number="{number}">')
        assert definitions < examples < summary_at < target_at
        if sentence:
            assert f'<sentence number="1">\n{sentence}\n</sentence>' in text


def test_fixed_prefix_is_shared_by_every_sentence_of_a_summary(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: CLEAN)
    graph.invoke({"summary": SUMMARY}, context=ctx_for(server))
    texts = [first_user(body) for body in server.completions]
    prefix = texts[0][: texts[0].index("[Your sentence]")]
    assert all(text.startswith(prefix) for text in texts)
    assert len({text[len(prefix) :] for text in texts}) == len(texts)


def test_unreadable_answers_are_reasked_then_counted_not_clean(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(per_sentence({2: "I think the sentence is about a logbook.", 5: ""}))
    out = graph.invoke({"summary": SUMMARY}, context=ctx_for(server, parse_retries=1))
    card = out["coherence"]["summaries"][0]
    assert (card["scored"], card["unparsed"], card["clean"]) == (6, 2, 6)
    assert out["coherence"]["score"] == 1.0
    assert out["coherence"]["unparsed"] == 2
    unparsed = [a for a in out["annotations"] if a["confused"] is None]
    assert {a["index"] for a in unparsed} == {1, 4}
    assert all(a["attempts"] == 2 and a["error"] for a in unparsed)
    assert len(server.completions) == 8 + 2  # one re-ask each
    reasks = [b for b in server.completions if len(b["messages"]) == 3]
    assert all("could not be read" in b["messages"][-1]["content"] for b in reasks)
    assert out["usage"]["openai:scripted"]["failures"] == 2


def test_concurrency_is_bounded_by_the_context(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: CLEAN, latency=0.15)
    summary = " ".join(f"Event {i} happens to Mara." for i in range(12))
    out = graph.invoke({"summary": summary}, context=ctx_for(server, concurrency=3))
    assert len(out["annotations"]) == 12
    assert 1 < server.max_in_flight <= 3


def test_second_run_is_answered_from_the_cache(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(per_sentence({1: "Questions: Where is the island?\nTypes: entity omission"}))
    ctx = ctx_for(server)
    first = graph.invoke({"summary": SUMMARY}, context=ctx)
    second = graph.invoke({"summary": SUMMARY}, context=ctx)
    assert len(server.completions) == 8
    assert second["usage"]["openai:scripted"]["cache_hits"] == 8
    assert second["usage"]["openai:scripted"]["calls"] == 0
    assert second["coherence"]["score"] == first["coherence"]["score"] == pytest.approx(7 / 8)


def test_many_summaries_get_system_score_and_bootstrap(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    def responder(body: dict[str, Any]) -> str:
        text = first_user(body)
        if "<summary>\nTom runs." in text and target_number(body) == 1:
            return "Questions: Who is Tom?\nTypes: entity omission"
        return CLEAN

    server = scripted_server(responder)
    summaries = [
        {"id": "lighthouse", "summary": SUMMARY},
        {"id": "tom", "summary": "Tom runs. Tom stops."},
    ]
    out = graph.invoke({"summaries": summaries}, context={**ctx_for(server).public_dict()})
    coherence = out["coherence"]
    assert [s["id"] for s in coherence["summaries"]] == ["lighthouse", "tom"]
    assert [s["score"] for s in coherence["summaries"]] == [1.0, 0.5]
    assert coherence["system_score"] == pytest.approx(0.75) == coherence["score"]
    assert coherence["bootstrap"]["resamples"] == 1000
    assert coherence["bootstrap"]["ci95"] == [0.5, 1.0]


def batched_responder(body: dict[str, Any]) -> str:
    numbers = [int(n) for n in re.findall(r"^(\d+)\. ", first_user(body).split("[Your sentences]")[1], re.M)]
    listed = []
    if 3 in numbers:
        listed.append({"index": 3, "questions": ["Who is the Guild?"], "types": ["Entity-Omission"]})
    if 9 in numbers:
        listed.append({"index": 9, "questions": ["no confusion"], "types": ["no confusion"]})
    listed.append({"index": 99, "questions": ["Stray?"], "types": ["salience"]})  # outside every batch
    return json.dumps({"sentences": listed})


def test_batched_mode_is_marked_and_scored(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(batched_responder)
    summary = SUMMARY + " Oren sails south. Mara stays."
    out = graph.invoke({"summary": summary}, context=ctx_for(server, batched_coherence=True))
    coherence = out["coherence"]
    assert coherence["mode"] == "batched" and "paper_setting" not in coherence
    assert coherence["prompt"]["name"] == "coherence_batched"
    assert "not the paper" in coherence["note"]
    assert coherence["prompt_version"] == load("coherence_batched").version_id
    assert len(server.completions) == 2  # 10 sentences, 8 per call
    assert coherence["score"] == pytest.approx(9 / 10)
    flagged = [a for a in out["annotations"] if a["confused"]]
    assert [(a["index"], a["types"]) for a in flagged] == [(2, ["entity omission"])]


BATCH_CUT = '{"sentences": [{"index": 3, "questions": ["Who is the Guild?"], "types": ["entity om'


@pytest.mark.parametrize(
    "bad",
    [
        "I cannot answer in JSON, sorry.",
        BATCH_CUT,  # cut off, not said so: never "sentences=[]", which would count every sentence clean
        {"content": BATCH_CUT, "finish_reason": "length"},
        {"content": '{"sentences": []}', "finish_reason": "length"},  # parses, but was cut off
        '{"confusions": []}',  # wrong key
    ],
    ids=["prose", "truncated", "truncated-length", "parses-but-length", "wrong-key"],
)
def test_batched_mode_unparseable_answer_leaves_batch_unscored(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], bad: str | dict[str, Any]
) -> None:
    server = scripted_server(lambda body: bad)
    out = graph.invoke({"summary": SUMMARY}, context=ctx_for(server, batched_coherence=True, parse_retries=0))
    assert out["coherence"]["score"] is None
    assert out["coherence"]["unparsed"] == 8
    assert all(a["confused"] is None and a["error"] for a in out["annotations"])


GENERIC = (
    "This is an interesting summary. The story is told in a clear way and the reader can follow it, so there "
    "is no confusion in general, although some readers may want more detail."
)
LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et "
    "dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris."
)


@pytest.mark.parametrize(
    "babble",
    [
        lambda body: GENERIC,
        lambda body: LOREM,
        lambda body: last_user_text(body)[:300],  # the prompt's opening (then the format reminder) echoed
        lambda body: last_user_text(body),  # the whole request echoed
        lambda body: last_user_text(body)[last_user_text(body).find("If the given sentence") :][:400],
    ],
    ids=["generic-prose", "lorem-ipsum", "echo-opening", "echo-all", "echo-instructions"],
)
def test_babble_for_every_sentence_is_unparsed_and_gets_no_score(
    scripted_server: Callable[..., OpenAIServer],
    ctx_for: Callable[..., Context],
    babble: Callable[[dict[str, Any]], str],
) -> None:
    server = scripted_server(babble)
    summaries = [
        {"id": f"s{i}", "summary": SUMMARY.replace("Mara", name)} for i, name in enumerate(["Ada", "Ivo"])
    ]
    out = graph.invoke({"summaries": summaries}, context=ctx_for(server, parse_retries=1))
    coherence = out["coherence"]
    assert coherence["unparsed"] == coherence["sentences"] == 16
    assert coherence["scored"] == 0
    assert coherence["score"] is None and coherence["system_score"] is None
    assert all(s["score"] is None for s in coherence["summaries"])
    assert all(a["confused"] is None and a["error"] for a in out["annotations"])
    assert out["usage"]["openai:scripted"]["failures"] == 16


@pytest.mark.parametrize(
    ("graph_input", "message"),
    [
        ({}, "No summary"),
        ({"summary": "   "}, "No summary"),
        ({"summary": "A.", "summaries": [{"id": "x", "summary": "B."}]}, "not both"),
        ({"summaries": []}, "non-empty"),
        ({"summaries": [{"id": "x", "summary": "A."}, {"id": "x", "summary": "B."}]}, "twice"),
        ({"summaries": [{"id": "x", "summary": ""}]}, "empty"),
        ({"summaries": [{"id": "x"}]}, "'summary' string"),
    ],
)
def test_bad_input_says_what_to_do(
    graph_input: dict[str, Any],
    message: str,
    scripted_server: Callable[..., OpenAIServer],
    ctx_for: Callable[..., Context],
) -> None:
    server = scripted_server(lambda body: CLEAN)
    with pytest.raises(ValueError, match=message):
        graph.invoke(graph_input, context=ctx_for(server))
    assert server.completions == []


def test_rerun_on_a_checkpointed_thread_counts_only_its_own_annotations(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(per_sentence({1: "Questions: Who?\nTypes: entity omission"}))
    saved = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    ctx = ctx_for(server)
    saved.invoke({"summary": SUMMARY}, config=config, context=ctx)
    out = saved.invoke({"summary": "Tom runs. Tom stops."}, config=config, context=ctx)
    assert out["coherence"]["summaries"][0]["sentences"] == 2
    assert out["coherence"]["summaries"][0]["scored"] == 2
    assert out["coherence"]["score"] == 0.5


def test_progress_events_cover_every_sentence(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: CLEAN)
    events = [
        chunk["progress"]
        for chunk in graph.stream({"summary": SUMMARY}, context=ctx_for(server), stream_mode="custom")
        if "progress" in chunk
    ]
    assert [e.get("total") for e in events if "total" in e] == [8]
    assert sum(e["advance"] for e in events) == 8
    assert {e["stage"] for e in events} == {"coherence"}


def test_cli_scores_text_and_jsonl_and_writes_json(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_server(per_sentence({2: "Questions: What logbook?\nTypes: entity omission"}))
    monkeypatch.setenv("STORYJUDGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STORYJUDGE_RETRY_BUDGET_S", "0")
    text_file = tmp_path / "summary.txt"
    text_file.write_text(SUMMARY)
    out_file = tmp_path / "result.json"
    runner = CliRunner()
    common = ["--model", "openai:scripted", "--base-url", server.base_url]
    result = runner.invoke(app, ["coherence", str(text_file), *common, "--out", str(out_file)])
    assert result.exit_code == 0, result.output
    assert "0.875" in result.output
    assert "What logbook?" in result.output
    record = json.loads(out_file.read_text())
    assert record["score"] == pytest.approx(7 / 8)
    assert record["mode"] == "per-sentence"
    sentences = record["summaries"][0]["annotations"]
    assert [s["index"] for s in sentences] == list(range(8))
    assert {"sentence", "confused", "types", "questions", "raw"} <= set(sentences[1])
    assert sentences[1]["raw"].startswith("Questions: What logbook?")
    assert record["usage_totals"]["calls"] == 8

    jsonl = tmp_path / "many.jsonl"
    jsonl.write_text(
        json.dumps({"id": "a", "summary": SUMMARY})
        + "\n\n"
        + json.dumps({"id": "b", "summary": "Tom runs."})
        + "\n"
    )
    result = runner.invoke(app, ["coherence", str(jsonl), *common, "--concurrency", "2"])
    assert result.exit_code == 0, result.output
    assert (
        "System score" in result.output
        and "95% CI [" in result.output
        and "over 2 summaries (" in result.output
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "summary": "A."}\n{not json}\n', ":2 is not valid JSON"),
        ('{"id": "a", "text": "A."}\n', 'needs a "summary" string'),
    ],
)
def test_cli_bad_jsonl_is_one_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    result = CliRunner().invoke(
        app, ["coherence", str(path), "--model", "openai:x", "--base-url", "http://x"]
    )
    assert result.exit_code == 1
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_invoke_without_context_uses_defaults_from_the_environment(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_server(lambda body: CLEAN)
    monkeypatch.setenv("STORYJUDGE_MODEL", "openai:scripted")
    monkeypatch.setenv("STORYJUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("STORYJUDGE_CACHE_DIR", str(tmp_path / "cache"))
    out = graph.invoke({"summary": "Tom runs. Tom stops."})
    assert out["coherence"]["score"] == 1.0
    assert out["coherence"]["model"] == "openai:scripted"
    assert len(server.completions) == 2


def test_the_splitter_is_a_setting_and_given_sentences_are_not_split(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: CLEAN)
    headed = "Chapter One\n\nMara finds the logbook. She reads it."
    given = ["Mara Vell inherits a lighthouse.", " ", "The end."]
    summaries = [{"id": "split", "summary": headed}, {"id": "given", "summary": SUMMARY, "sentences": given}]
    expected = {
        "punkt": ["Chapter One\n\nMara finds the logbook.", "She reads it."],
        "pysbd": ["Chapter One", "Mara finds the logbook.", "She reads it."],
    }
    for splitter, split in expected.items():
        out = graph.invoke({"summaries": summaries}, context=ctx_for(server, sentence_splitter=splitter))
        coherence = out["coherence"]
        assert coherence["sentence_splitter"] == splitter and coherence["sentences_given"] == 1
        assert [s["split"] for s in coherence["summaries"]] == [splitter, "given"]
        asked = {
            sid: [a["sentence"] for a in out["annotations"] if a["summary_id"] == sid]
            for sid in ("split", "given")
        }
        assert asked == {"split": split, "given": ["Mara Vell inherits a lighthouse.", "The end."]}
    assert Context().sentence_splitter == "punkt"
    with pytest.raises(ConfigError, match="sentence_splitter"):
        Context(sentence_splitter="spacy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'sentences' must be a list of strings"):
        graph.invoke(
            {"summaries": [{"id": "x", "summary": "A.", "sentences": "A."}]}, context=ctx_for(server)
        )


def test_cli_takes_a_splitter_and_presplit_lines(
    tmp_path: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    server = scripted_server(lambda body: CLEAN)
    jsonl = tmp_path / "split.jsonl"
    jsonl.write_text(json.dumps({"id": "a", "summary": SUMMARY, "sentences": ["One.", "Two."]}) + "\n")
    out_file = tmp_path / "out.json"
    common = ["--model", "openai:scripted", "--base-url", server.base_url, "--out", str(out_file)]
    result = CliRunner().invoke(
        app,
        ["coherence", str(jsonl), *common, "--sentence-splitter", "pysbd"],
        env={"STORYJUDGE_CACHE_DIR": str(tmp_path)},
    )
    assert result.exit_code == 0, result.output
    record = json.loads(out_file.read_text())
    assert record["sentence_splitter"] == "pysbd" and record["summaries"][0]["split"] == "given"
    assert [a["sentence"] for a in record["summaries"][0]["annotations"]] == ["One.", "Two."]
    result = CliRunner().invoke(app, ["coherence", str(jsonl), *common, "--sentence-splitter", "spacy"])
    assert result.exit_code == 1 and "sentence_splitter must be 'punkt' or 'pysbd'" in result.output


def test_sentences_are_grouped_per_summary_and_each_still_gets_its_own_call(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    """Tasks hold up to SENTENCE_GROUP sentences of one summary; the calls stay one per sentence, in parallel."""
    from nodes.annotate import SENTENCE_GROUP, tasks_for

    six = " ".join(f"Mara lights lamp number {i}." for i in range(6))
    three = "Oren rows out. He finds the wreck. He returns at dawn."
    state: Any = {
        "run": "r",
        "to_score": [{"id": "a", "summary": six}, {"id": "b", "summary": three}],
        "sentences": {"a": six.split(". "), "b": three.split(". ")},
        "mode": "per-sentence",
    }
    groups = [(task["summary_id"], task["sentence_indices"]) for task in tasks_for(state)]
    assert SENTENCE_GROUP == 4
    assert groups == [("a", [0, 1, 2, 3]), ("a", [4, 5]), ("b", [0, 1, 2])]

    server = scripted_server(lambda body: CLEAN, latency=0.2)
    out = graph.invoke(
        {"summaries": [{"id": "a", "summary": six}, {"id": "b", "summary": three}]},
        context=ctx_for(server, concurrency=16),
    )
    assert len(server.completions) == 9, "one call per sentence"
    assert sorted(target_number(body) for body in server.completions) == [1, 1, 2, 2, 3, 3, 4, 5, 6]
    assert server.max_in_flight >= 4, "a group's sentences are asked at once"
    assert sorted((a["summary_id"], a["index"]) for a in out["annotations"]) == [
        *(("a", i) for i in range(6)),
        *(("b", i) for i in range(3)),
    ]
