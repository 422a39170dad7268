"""Refinement cannot win NarrativeFactScore by deleting or copying, over real HTTP (scripted model).

The scripted story's summary has two supported sentences and one false one. A refiner that deletes sentences
(fewer supported facts, much shorter) or pastes the story's own sentences would score 1.0; the guard rejects
the round, records why in result.json, and the best summary stays the original. The web UI's refine step goes
through the same guard.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphs.refine import build_graph
from storyjudge.apps.ui.session import RunStore
from storyjudge.apps.ui.steps import STEPS, run_step
from storyjudge.core.context import Context
from storyjudge.core.scripted_server import OpenAIServer, all_text
from tests.scripted_story import FIRST_SUMMARY, FIXED_SUMMARY, STORY, StoryResponder, cli_refine

DELETED = "Alice finds the treasure on Gull Island."  # the flagged sentence and a supported one gone
KEPT_WRONG = "Bob steals the map from Alice. Alice finds the treasure on Gull Island."
COPIED = (
    "Alice waits at the harbour of Port Wren. Bob gives Alice an old map of Gull Island. "
    "On the island, Alice finds the treasure under the lighthouse, and Bob is amazed."
)  # the story's sentences word for word: every fact supported, within the length budget


class RefinerSays(StoryResponder):
    """The scripted story, with the refiner's answers given in turn (the last one repeats)."""

    def __init__(self, *answers: str) -> None:
        super().__init__()
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        if "You revise a summary" in all_text(body):
            self._count("refine")
            self.prompts.append(body["messages"][-1]["content"])
            return self.answers[min(len(self.prompts), len(self.answers)) - 1]
        return super().__call__(body)


def _cli_refine(server: OpenAIServer, tmp_path: Path, *options: str) -> dict[str, Any]:
    return cli_refine(
        server.base_url, tmp_path, *options, env={"OPENAI_API_KEY": "sk-test-secret-key-123456"}
    )[1]


def test_a_refiner_that_deletes_sentences_is_rejected(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    record = _cli_refine(scripted_server(RefinerSays(DELETED)), tmp_path)
    first, second = record["iterations"]
    assert second["factscore"]["score"] == 1.0  # what deleting would have won
    assert second["accepted"] is False
    assert second["note"].startswith("refinement guard: dropped supported facts (2 -> 1")
    assert "too short (7 words" in second["note"]
    guard = second["guard"]
    assert guard["revises"] == 0 and guard["supported_before"] == 2 and guard["supported_after"] == 1
    assert guard["length_ratio"] < 0.8 and guard["copy_rate"] is not None
    assert first["guard"]["copy_rate"] is not None and first["accepted"]
    assert record["best_iteration"] == 0 and record["best_summary"] == FIRST_SUMMARY
    assert [s["accepted"] for s in record["scores"]] == [True, False]


def test_the_stop_line_says_the_last_round_was_rejected_and_why_the_loop_stopped_early(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    """Not "saturated": the guard's rejection, its reason, and patience cutting max_iterations short."""
    server = scripted_server(RefinerSays(DELETED))
    env = {"OPENAI_API_KEY": "sk-test", "COLUMNS": "80"}
    result, _ = cli_refine(server.base_url, tmp_path, "--max-iterations", "2", env=env)
    err = " ".join(result.stderr.split())  # the console wraps at 80 columns
    assert (
        "Stopped after round 1: the last refinement (round 1) was rejected by the refinement guard: dropped "
        "supported facts (2 -> 1"
    ) in err
    assert (
        "patience 1 stops the loop after one round without a gain, before max_iterations 2 is reached" in err
    )
    assert (
        "round 1: refinement guard: dropped supported facts" in err
        and "Best: round 0, NFS 0.667 (coverage 100%)." in err
    )
    assert "NarrativeFactScore per round" in err and "iteration " not in err  # rounds, by one name
    assert FIRST_SUMMARY not in result.stderr  # round summaries only with --verbose
    assert result.stdout == FIRST_SUMMARY + "\n"
    # the finished run, shown again: with --verbose, every round's summary too
    again, _ = cli_refine(
        server.base_url, tmp_path, "--max-iterations", "2", "--resume", "--verbose", env=env
    )
    assert again.exit_code == 0, again.output
    shown = " ".join(again.stderr.replace("│", " ").split())
    assert "round 0: NFS 0.667" in shown and "round 1: NFS 1.000" in shown
    assert " ".join(FIRST_SUMMARY.split()) in shown and " ".join(DELETED.split()) in shown


def test_a_refiner_that_copies_the_story_is_rejected(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    record = _cli_refine(scripted_server(RefinerSays(COPIED)), tmp_path)
    second = record["iterations"][1]
    assert second["factscore"]["score"] == 1.0 and second["factscore"]["supported"] == 3
    assert second["accepted"] is False
    assert re.fullmatch(
        r"refinement guard: copies the narrative \(\d+% .*; not accepted as best", second["note"]
    )
    assert second["guard"]["copy_increase"] > 0.2
    assert record["best_iteration"] == 0 and record["best_summary"] == FIRST_SUMMARY


def test_after_a_rejected_round_the_best_summary_is_revised_again(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    responder = RefinerSays(KEPT_WRONG, FIXED_SUMMARY)
    server = scripted_server(responder)
    ctx = Context(
        model="openai:scripted",
        base_url=server.base_url,
        run_dir=str(tmp_path / "run"),
        cache_dir=str(tmp_path / "cache"),
        retry_budget_s=0,
        ckg_samples=1,
        patience=2,
    )
    out = build_graph().invoke({"document": STORY}, context=ctx)
    rounds = sorted(out["iterations"], key=lambda i: i["iteration"])
    assert [r["accepted"] for r in rounds] == [True, False, True]
    assert rounds[1]["summary"] == KEPT_WRONG and "dropped supported facts" in rounds[1]["note"]
    # round 2 revised round 0's summary (not the rejected one) and was told why round 1 was rejected
    assert rounds[2]["guard"]["revises"] == 0 and rounds[2]["guard"]["supported_before"] == 2
    second_prompt = responder.prompts[1]
    revised = re.search(r"<summary>\n(.*?)\n</summary>", second_prompt, re.DOTALL)
    assert revised is not None and revised.group(1) == FIRST_SUMMARY
    assert "Earlier revisions of this summary were rejected" in second_prompt
    assert "<outline " in second_prompt and "Chapter 2" in second_prompt
    assert out["best_iteration"] == 2 and out["summary"] == FIXED_SUMMARY
    assert out["stop_reason"].startswith("target reached")


def test_the_ui_refine_step_uses_the_same_guard(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(RefinerSays(DELETED))
    store = RunStore(tmp_path / "runs")
    settings = {"model": "openai:scripted", "base_url": server.base_url, "ckg_samples": 1}
    session = store.create("story", STORY, "test", settings)
    for step in STEPS:
        run_step(session, step, lambda event: None)
    first, second = session.state["iterations"]
    assert second["accepted"] is False and second["note"].startswith("refinement guard: dropped supported")
    assert second["guard"]["revises"] == 0 and first["guard"]["revises"] is None
    record = json.loads((session.rd.root / "result.json").read_text())
    assert record["best_iteration"] == 0 and record["iterations"][1]["note"] == second["note"]
    assert "refinement guard" in (session.rd.root / "report.html").read_text()
