"""A judge that checks itself, over real HTTP: planted control facts and sentences measure every run's judge.

A scripted judge that calls every fact supported (and an annotator that finds every sentence clear) makes no
reliable score; one that answers correctly does, with the same score as without planting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from graphs.coherence import build_graph as build_coherence_graph
from graphs.factscore import build_graph as build_factscore_graph
from storyjudge.apps.cli import app
from storyjudge.core.context import Context
from storyjudge.core.scripted_server import OpenAIServer, all_text, last_user_text
from tests.scripted_story import FIRST_SUMMARY, STORY, TRIPLES, StoryResponder, cli_refine, schema_name

pytestmark = pytest.mark.usefixtures("planting")

LONELY = STORY + (
    "\nChapter 3\n\nFar to the north, Carol keeps the lamp of the old lighthouse at Fog Point.\n"
    "Carol writes long letters to the harbour master that nobody ever answers.\n"
)
"""The story with a third character whom no scene names together with Alice or Bob."""


class YesJudge(StoryResponder):
    """A lenient judge: every fact supported, every sentence clear."""

    def __call__(self, body: dict[str, Any]) -> str:
        if schema_name(body) == "Verdict":
            self._count("judge")
            return json.dumps({"rationale": "Plausible.", "supported": True, "feedback": "", "evidence": []})
        if "causes any confusion" in all_text(body):
            self._count("coherence")
            return "Questions: no confusion\nTypes: no confusion"
        return super().__call__(body)


class LonelyStory(StoryResponder):
    """Extraction of ``LONELY`` (Carol added), and a judge that knows who meets whom.

    Its judge rejects, as the story requires, a fact that puts Carol with Alice or Bob: no chapter has both.
    """

    def __init__(self, *, lenient: bool = False) -> None:
        super().__init__()
        self.lenient = lenient

    def __call__(self, body: dict[str, Any]) -> str:
        name = schema_name(body)
        if name == "SceneTriples":
            found: dict[str, Any] = json.loads(json.dumps(TRIPLES))
            found["characters"].append({"name": "Carol", "aliases": []})
            found["triples"].append({"subject": "Carol", "predicate": "keeps", "object": None})
            return json.dumps(found)
        if name == "Verdict":
            fact = last_user_text(body).split("<fact>")[-1]
            together = "Carol" in fact and re.search(r"\b(Alice|Bob)\b", fact)
            if together and not self.lenient:
                self._count("judge")
                return json.dumps(
                    {
                        "rationale": "Carol never meets them.",
                        "supported": False,
                        "feedback": "No.",
                        "evidence": [],
                    }
                )
            if self.lenient:
                self._count("judge")
                return json.dumps({"rationale": "Fine.", "supported": True, "feedback": "", "evidence": []})
        return super().__call__(body)


def _score(
    server: OpenAIServer, ctx_for: Callable[..., Context], document: str = STORY, **fields: Any
) -> Any:
    return build_factscore_graph().invoke(
        {"summary": FIRST_SUMMARY, "document": document, "title": "t"},
        context=ctx_for(server, ckg_samples=1, **fields),
    )["factscore"]


def test_a_correct_judge_passes_and_keeps_the_score_of_an_unplanted_run(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], tmp_path: Path
) -> None:
    server = scripted_server(StoryResponder())
    card = _score(server, ctx_for)
    plain = _score(server, ctx_for, planted_facts=0, cache_dir=str(tmp_path / "other-cache"))
    assert "judge_check" not in plain
    check = card["judge_check"]
    assert check["passed"] is True and card["reliable"] is True
    assert check["false_acceptance"] == 0.0 and check["true_acceptance"] == 1.0
    # 0 of the first 8 planted false facts accepted decides "passed": no second batch
    assert (check["easy"]["planted"], check["hard"]["planted"], check["true"]["planted"]) == (8, 0, 4)
    assert check["decision"] == "passed" and check["false_acceptance_ci95"] == pytest.approx([0.0, 0.369417])
    assert (card["score"], card["facts"], card["supported"]) == (
        plain["score"],
        plain["facts"],
        plain["supported"],
    )
    assert card["score"] == pytest.approx(2 / 3) and len(card["verdicts"]) == 3, (
        "planted verdicts never count"
    )
    assert check["calls"] == 12 and check["input_tokens"] > 0
    assert card["score_corrected"] == pytest.approx(2 / 3) and card["score_corrected_ci95"] is not None
    for verdict in check["verdicts"]:
        planted = verdict["planted"]
        assert planted["built"] and verdict["evidence"]["scenes"], "how it was built and what the judge saw"
        if planted["kind"] == "invented":
            name = re.search(r'"([A-Z]\w+ [A-Z]\w+)"', planted["built"])
            assert name and name.group(1) in planted["text"]
            assert all(word.lower() not in STORY.lower() for word in name.group(1).split())
        else:
            assert planted["text"] in " ".join(STORY.split()), "a true one is a sentence of the story"
    asked = [all_text(body) for body in server.completions if schema_name(body) == "Verdict"]
    assert not any("planted" in text or "control" in text for text in asked), "nothing marks a planted fact"


def test_an_always_supported_judge_makes_no_reliable_score(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    card = _score(scripted_server(YesJudge()), ctx_for)
    assert card["score"] == 1.0 and card["coverage"] == 1.0, "coverage alone sees nothing wrong"
    check = card["judge_check"]
    assert card["reliable"] is False and check["passed"] is False and check["false_acceptance"] == 1.0
    assert (
        check["note"].startswith("the judge accepted 8 of 8 planted false facts")
        and check["decision"] == "failed"
    )
    assert card["score_corrected"] is None and "does not tell true from false" in card["score_corrected_note"]


def test_swapped_roles_are_planted_only_where_the_story_keeps_the_characters_apart(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], tmp_path: Path
) -> None:
    careful = _score(scripted_server(LonelyStory()), ctx_for, document=LONELY)
    hard = [v for v in careful["judge_check"]["verdicts"] if v["planted"]["kind"] == "swapped"]
    assert len(hard) == 4 and careful["judge_check"]["hard"] == {"planted": 4, "judged": 4, "accepted": 0}
    for verdict in hard:
        assert "Carol" in verdict["planted"]["text"] and "no scene names both" in verdict["planted"]["built"]
    assert careful["reliable"] is True
    lenient = _score(
        scripted_server(LonelyStory(lenient=True)), ctx_for, document=LONELY, cache_dir=str(tmp_path / "c2")
    )
    assert [v["planted"] for v in lenient["judge_check"]["verdicts"]] == [
        v["planted"] for v in careful["judge_check"]["verdicts"]
    ], "the same seed plants the same facts"
    assert lenient["judge_check"]["hard"]["accepted"] == 4 and lenient["reliable"] is False
    assert "swapped roles 4/4" in lenient["judge_check"]["note"]
    reseeded = _score(
        scripted_server(LonelyStory()), ctx_for, document=LONELY, seed=7, cache_dir=str(tmp_path / "c3")
    )
    assert [v["planted"]["text"] for v in reseeded["judge_check"]["verdicts"]] != [
        v["planted"]["text"] for v in careful["judge_check"]["verdicts"]
    ]


def _refine(server: OpenAIServer, tmp_path: Path, *extra: str) -> tuple[Any, dict[str, Any]]:
    return cli_refine(server.base_url, tmp_path, *extra)


def test_refine_with_a_lenient_judge_never_reports_a_target_reached(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    result, record = _refine(scripted_server(YesJudge()), tmp_path, "--max-iterations", "1", "--verbose")
    first = record["scores"][0]
    assert first["nfs"] == 1.0 and first["nfs_reliable"] is False and first["judge_passed"] is False
    assert first["judge_false_acceptance"] == 1.0
    assert "the judge accepted 8 of 8 planted false facts" in first["note"]
    assert not record["stop_reason"].startswith("target reached") and record["best_reliable"] is False
    assert "target reached" not in result.output
    assert "the judge accepted 8 of 8 planted false facts" in result.output
    said = " ".join(result.output.split())  # the terminal's wrapping undone
    assert said.count("planted false facts (invented names") == 1, "the judge's note is said once"
    assert "1.000" not in result.output.split("Stopped:")[0].split("round 0: NFS")[1].split("\n")[0]
    card = record["iterations"][0]["factscore"]
    assert len(card["judge_check"]["verdicts"]) == 12, "the planted facts are recorded in the run"
    report = (tmp_path / "run" / "report.html").read_text()
    assert "planted false facts" in report and card["judge_check"]["verdicts"][0]["planted"]["text"] in report


def test_refine_with_a_correct_judge_reaches_the_target_as_before(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    responder = StoryResponder()
    result, record = _refine(scripted_server(responder), tmp_path, "--coherence-guard")
    assert [s["nfs"] for s in record["scores"]] == pytest.approx([2 / 3, 1.0])
    assert all(s["judge_passed"] and s["nfs_reliable"] for s in record["scores"])
    assert all(s["annotator_passed"] and s["coherence"] == 1.0 for s in record["scores"])
    assert "the annotator flagged 3 of 3 planted confusing sentences" in record["scores"][0]["annotator_note"]
    assert record["stop_reason"].startswith("target reached") and record["best_iteration"] == 1
    assert "Judge check, round 0: the judge accepted 0 of 8" in result.output
    # the same facts are planted every round: the second round's are answered from the cache
    assert responder.calls["judge"] == 3 + 1 + 12


def test_dry_run_shows_what_planting_costs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    base = ["score", str(story), "--summary", str(story), "--model", "openai:gpt-4o-mini", "--dry-run"]
    base += ["--run-dir", str(tmp_path / "run")]
    shown = CliRunner().invoke(app, base)
    assert shown.exit_code == 0, shown.output
    assert "of these, planted control items 36 calls" in shown.stdout
    planted = json.loads(CliRunner().invoke(app, [*base, "--json"]).stdout)
    none = json.loads(CliRunner().invoke(app, [*base, "--json", "--planted-facts", "0"]).stdout)
    assert planted["planted"]["calls"] == 36 and none["planted"]["calls"] == 0
    assert planted["calls"] == none["calls"] + 36
    assert planted["input_tokens"] > none["input_tokens"]


def _coherence(server: OpenAIServer, ctx_for: Callable[..., Context], **fields: Any) -> Any:
    return build_coherence_graph().invoke({"summary": FIRST_SUMMARY}, context=ctx_for(server, **fields))


def test_an_annotator_that_finds_everything_clear_makes_no_coherence_score(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], tmp_path: Path
) -> None:
    careful = _coherence(scripted_server(StoryResponder()), ctx_for)
    plain = _coherence(
        scripted_server(StoryResponder()), ctx_for, planted_sentences=0, cache_dir=str(tmp_path / "c")
    )
    one = careful["coherence"]["summaries"][0]
    assert one["annotator_check"]["flagged"] == 3 and one["annotator_check"]["passed"] is True
    assert careful["coherence"]["reliable"] is True
    assert careful["coherence"]["score"] == plain["coherence"]["score"] == 1.0
    assert len(careful["annotations"]) == 3, "planted sentences are not the summary's"
    lenient = _coherence(scripted_server(YesJudge()), ctx_for, cache_dir=str(tmp_path / "c2"))
    check = lenient["coherence"]["summaries"][0]["annotator_check"]
    assert lenient["coherence"]["score"] == 1.0 and lenient["coherence"]["reliable"] is False
    assert check["note"] == "the annotator flagged 0 of 3 planted confusing sentences"
    for row in check["sentences"]:
        assert row["built"].startswith("about ") and row["confused"] is False


def test_coherence_cli_says_why_a_lenient_annotator_scores_nothing(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(YesJudge())
    summary = tmp_path / "summary.txt"
    summary.write_text(FIRST_SUMMARY)
    result = CliRunner().invoke(
        app, ["coherence", str(summary), "--model", "openai:scripted", "--base-url", server.base_url]
    )
    assert result.exit_code == 0, result.output
    assert "BooookScore not reliable" in result.output
    assert "the annotator flagged 0 of 3 planted confusing sentences" in result.output
