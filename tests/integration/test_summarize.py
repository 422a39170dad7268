"""Both summarization strategies end to end: scripted server over HTTP, the CLI, the embedded model."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from graphs.summarize import build_graph
from storyjudge.apps.cli import app
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.scripted_server import OpenAIServer, all_text, last_user_text
from storyjudge.core.tokens import count_tokens

DATA = Path(__file__).parents[2].parent / "shared" / "data"
SQUALITY = DATA / "squality" / "dev.jsonl"
OUTPUT_KEYS = {"summary", "tree", "events", "usage", "timings"}


def squality_story() -> str:
    if not SQUALITY.is_file():
        pytest.skip(f"{SQUALITY} is not available")
    with SQUALITY.open(encoding="utf-8") as handle:
        return str(json.loads(handle.readline())["document"])


def extractive(body: dict[str, Any]) -> str:
    """A scripted summarizer: the first N words of what it was given, N the word limit it was asked for."""
    text = last_user_text(body)
    if "Edited summary:" in text:
        return re.findall(r"<summary>\n(.*?)\n</summary>", text, re.S)[0]
    limits = re.findall(r"(?:within|contain|less than) (\d+) words", text)
    data = " ".join(  # what came earlier in the story first: prior context, running summary, then the excerpt
        " ".join(re.findall(rf"<{tag}[^>]*>\n(.*?)\n</{tag}>", text, re.S))
        for tag in ("context", "summary", "excerpt")
    )
    words = data.split()[: max(1, int(limits[-1]) - 1)]
    return " ".join(words).rstrip(".,;:!?\"'") + "."


def requested_output(body: dict[str, Any]) -> int:
    return int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)


@pytest.mark.parametrize("strategy", ["hierarchical", "incremental"])
def test_squality_story_end_to_end_over_http(scripted_server: Any, ctx_for: Any, strategy: str) -> None:
    story = squality_story()
    server = scripted_server(extractive)
    ctx = ctx_for(server, strategy=strategy, chunk_size=1024, max_summary_tokens=400)
    out = build_graph().invoke({"document": story}, context=ctx)
    assert set(out) == OUTPUT_KEYS
    assert out["summary"] and count_tokens(out["summary"]) <= 400
    assert out["summary"].split()[:5] == story.split()[:5]  # the extractive script keeps the story's opening
    chunks = -(-count_tokens(story) // 1024)
    if strategy == "hierarchical":
        assert len(out["tree"][0]["summaries"]) >= chunks and len(out["tree"][-1]["summaries"]) == 1
    else:
        assert len(out["tree"]) >= chunks
    for body in server.completions:
        assert requested_output(body) > 0
        assert count_tokens(all_text(body)) + requested_output(body) <= ctx.context_window
    usage = out["usage"]["openai:scripted"]
    assert usage["calls"] == len(server.completions) and usage["input_tokens"] > 0
    # a rerun is answered from the cache
    again = build_graph().invoke({"document": story}, context=ctx)
    assert again["summary"] == out["summary"]
    assert len(server.completions) == usage["calls"]
    assert again["usage"]["openai:scripted"]["cache_hits"] == usage["calls"]


def test_cli_prints_summary_and_stats_and_writes_the_tree(scripted_server: Any, tmp_path: Path) -> None:
    story = squality_story()
    source = tmp_path / "story.txt"
    source.write_text(story, encoding="utf-8")
    server = scripted_server(extractive)
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "summarize",
            str(source),
            "--strategy",
            "incremental",
            "--chunk-size",
            "1024",
            "--max-summary-tokens",
            "300",
            "--model",
            "openai:scripted",
            "--base-url",
            server.base_url,
            "--run-dir",
            str(run_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "novel trigrams" in result.output and "repeated trigrams" in result.output
    record = json.loads((run_dir / "summary_tree.json").read_text(encoding="utf-8"))
    assert record["settings"]["strategy"] == "incremental" and record["settings"]["chunk_size"] == 1024
    assert record["summary"] in result.output.replace("\n", " ") or record["summary"][:40] in result.output
    assert len(record["tree"]) == record["shape"]["chunks"] >= 6
    assert record["stats"]["length_tokens"] == count_tokens(record["summary"]) <= 300
    assert set(record["prompts"]) >= {
        "incremental_init",
        "incremental_update",
        "compress",
        "remove_artifacts",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["summarize", "/nonexistent/story.txt"], "does not exist"),
        (["summarize", "{story}", "--strategy", "sideways"], "strategy"),
        (["summarize", "{story}", "--chunk-size", "4096", "--context-window", "2048"], "context window"),
    ],
)
def test_cli_bad_input_is_one_line(
    tmp_path: Path, args: list[str], message: str, scripted_server: Callable[..., OpenAIServer]
) -> None:
    server = scripted_server(lambda body: "unused")  # it answers the look at /models; no call is made
    story = tmp_path / "story.txt"
    story.write_text("Victor builds a creature. " * 400, encoding="utf-8")
    argv = [a.replace("{story}", str(story)) for a in args]
    argv += [
        "--model",
        "openai:scripted",
        "--base-url",
        server.base_url,
        "--run-dir",
        str(tmp_path / "r"),
    ]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
    assert server.completions == []


SHORT_STORY = (
    "Mara kept the lighthouse on Gull Island alone after her father died. Every night she climbed the iron "
    "stairs, trimmed the wick and watched the sea for ships.\n\n"
    "One winter night a storm drove a fishing boat onto the rocks below the tower. Mara rowed out through "
    "the waves and pulled two half-frozen brothers, Tom and Ned, into her little boat.\n\n"
    "She brought them to the lighthouse, dried their clothes by the stove and fed them soup. In the morning "
    "the storm had passed, and the brothers promised to bring supplies from the mainland every month.\n\n"
    "They kept their promise. By spring the island had visitors every week, and Mara was no longer alone."
)


@pytest.mark.slow
def test_embedded_model_summarizes_a_short_text(tmp_path: Path) -> None:
    """Hierarchical merging (level 0, one merge, the edit) on the embedded model; both strategies share the
    generation code that the scripted tests cover call by call."""
    pytest.importorskip("llama_cpp")
    from storyjudge.core.models import local_model_path

    try:
        local_model_path("smollm2")
    except ConfigError as exc:
        pytest.skip(str(exc))
    ctx = Context(
        model="local:smollm2",
        strategy="hierarchical",
        chunk_size=128,  # two chunks: level 0 and one merge, or one update
        max_summary_tokens=80,
        cache_dir=str(tmp_path / "cache"),
    )
    out = build_graph().invoke({"document": SHORT_STORY}, context=ctx)
    assert set(out) == OUTPUT_KEYS
    assert out["summary"].strip()
    assert out["usage"]["local:smollm2"]["calls"] >= 3
    assert len(out["tree"][0]["summaries"]) == 2 and len(out["tree"][-1]["summaries"]) == 1
