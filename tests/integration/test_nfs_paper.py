"""The nfs-paper preset end to end over HTTP: no refinement guard, the paper's indicator, BGE-M3 or a named choice."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from storyjudge.apps.cli import app
from storyjudge.core.scripted_server import OpenAIServer, all_text
from tests.scripted_story import STORY, StoryResponder, _block, schema_name


class UnreadTreasure(StoryResponder):
    """The story's model, except that the judge's verdict on the treasure fact can never be read."""

    def __call__(self, body: dict[str, Any]) -> str:
        # the first request and its retries, which repeat it with the failed answer and a reminder
        if schema_name(body) == "Verdict" and "treasure" in _block(all_text(body), "fact"):
            return "I would rather not say."
        return super().__call__(body)


@pytest.mark.slow
def test_nfs_paper_run_records_no_guard_the_indicator_and_the_embedder(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(UnreadTreasure())
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    args = ["refine", str(story), "--model", "openai:scripted", "--base-url", server.base_url]
    args += ["--preset", "nfs-paper", "--ckg-samples", "1", "--max-iterations", "1"]

    missing = CliRunner().invoke(app, [*args, "--run-dir", str(tmp_path / "none")])
    assert missing.exit_code == 1
    assert "bge_m3_path" in " ".join(missing.output.split())  # BGE-M3 is asked for by name, nothing run
    assert server.completions == []

    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, [*args, "--embedder", "minilm", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    record = json.loads((run_dir / "result.json").read_text())
    context = record["context"]
    assert context["preset"] == "nfs-paper"
    assert context["refine_guard"] is False and context["nfs_unjudged"] == "unsupported"
    # the embedder the user chose, not one the preset filled in
    assert context["embedder"] == "minilm" and "embedder" not in context["preset_applied"]
    applied = context["preset_applied"]
    assert applied["retrieval_k"] == 1 and applied["refine_guard"] is False
    first = record["iterations"][0]["factscore"]
    assert (first["supported"], first["unsupported"], first["unjudged"]) == (1, 1, 1)
    assert first["unjudged_rule"] == "unsupported"
    assert first["score"] == pytest.approx(1 / 3)  # the unread verdict is a 0, not left out (1/2)
    assert first["coverage"] == pytest.approx(2 / 3) and first["reliable"] is False  # and still reported
    second = record["iterations"][1]
    assert second["factscore"]["score"] == pytest.approx(2 / 3)
    assert second["accepted"] is True  # no guard: the refinement is taken as it is
    print(
        f"\nnfs-paper run: refine_guard {context['refine_guard']}, nfs_unjudged {context['nfs_unjudged']}, "
        f"embedder {context['embedder']}, scores {[s['nfs'] for s in record['scores']]}, "
        f"coverage {[s['nfs_coverage'] for s in record['scores']]}"
    )
