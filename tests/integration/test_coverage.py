"""Scores that carry their coverage: a round judged on too few facts is shown as not reliable and never wins."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from storyjudge.core.scripted_server import OpenAIServer, all_text
from tests.scripted_story import FIXED_SUMMARY, StoryResponder, cli_refine, schema_name

INVENTED = " Bob sails home alone. Alice sells the treasure."


class LosesVerdictsAfterRefining(StoryResponder):
    """The refiner fixes the false fact but invents two more; the judge's verdicts on those are unreadable.

    So the refined round scores 3/3 = 1.0 on three of its five facts, above the first round's honest 2/3,
    though a judge that could be read would have given it 3/5.
    """

    def __call__(self, body: dict[str, Any]) -> str:
        if schema_name(body) == "Verdict":
            fact = all_text(body).split("<fact>")[-1]
            if "sails home" in fact or "sells the treasure" in fact:
                self._count("garbled")
                return "I am not sure what to say about this."
        answer = super().__call__(body)
        return answer + INVENTED if answer == FIXED_SUMMARY else answer


def test_refine_never_picks_a_round_that_was_judged_on_too_few_facts(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    responder = LosesVerdictsAfterRefining()
    server = scripted_server(responder)
    run_dir = tmp_path / "run"
    result, record = cli_refine(server.base_url, tmp_path, "--max-iterations", "1")
    assert responder.calls.get("garbled", 0) >= 2
    first, refined = record["scores"]
    assert first["nfs"] == pytest.approx(2 / 3) and first["nfs_coverage"] == 1.0 and first["nfs_reliable"]
    assert refined["nfs"] == 1.0, "the number alone would say the refinement won"
    assert refined["nfs_coverage"] == pytest.approx(3 / 5) and refined["nfs_reliable"] is False
    assert record["best_iteration"] == 0 and record["best_reliable"] is True
    card = record["iterations"][1]["factscore"]
    assert (card["judged"], card["unjudged"], card["coverage_floor"]) == (3, 2, 0.9)
    assert "not reliable" in record["iterations"][1]["note"]
    assert "not reliable" in result.output and "60%" in result.output
    report = (run_dir / "report.html").read_text()
    assert "not reliable" in report and "coverage 60%" in report


def test_a_lower_coverage_floor_accepts_the_same_round(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(LosesVerdictsAfterRefining())
    result, record = cli_refine(
        server.base_url, tmp_path, "--max-iterations", "1", env={"STORYJUDGE_COVERAGE_FLOOR": "0.5"}
    )
    assert record["context"]["coverage_floor"] == 0.5
    assert record["scores"][1]["nfs_reliable"] is True and record["best_iteration"] == 1
