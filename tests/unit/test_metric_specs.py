"""A metric named by a spec that cannot be loaded is one line naming it and what to write; one that fails is shown."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from typer.testing import CliRunner

from storyjudge.apps.cli import app
from storyjudge.core import metrics
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.metrics import GROUP, RoundView, headline, round_cards

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("source", "wanted"),
    [
        (None, "no file"),
        ("X = 1\n", "has no class 'Words'"),
        ("class Words:\n    name = 'words'\n", "is not a metric"),
        ("raise RuntimeError('broken')\n", "does not load (RuntimeError: broken)"),
    ],
)
def test_a_bad_spec_is_one_line_naming_file_class_and_form(
    tmp_path: Path, source: str | None, wanted: str
) -> None:
    file = tmp_path / "words.py"
    if source is not None:
        file.write_text(source)
    with pytest.raises(ConfigError) as caught:
        Context(metrics=[f"{file}:Words"])
    message = str(caught.value)
    assert "\n" not in message and "words.py" in message and wanted in message, message
    assert "does not load" in message or "PATH.py:ClassName" in message or "card(view)" in message


def test_the_cli_refuses_a_bad_metric_in_one_line(tmp_path: Path) -> None:
    summary = tmp_path / "summary.txt"
    summary.write_text("Three witches meet Macbeth on a heath.")
    story = ROOT / "examples" / "macbeth-witches.md"
    done = CliRunner().invoke(
        app, ["score", str(story), "--summary", str(summary), "--metric", str(tmp_path / "none.py:Nothing")]
    )
    assert done.exit_code != 0
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) <= 2 and "none.py" in done.output and "Traceback" not in done.output, done.output


def test_a_failing_metric_gives_a_card_with_its_error_not_a_crash(tmp_path: Path) -> None:
    file = tmp_path / "fails.py"
    file.write_text(
        "class Fails:\n    name = 'fails'\n    needs = ()\n    def card(self, view):\n        return 1 / 0\n"
    )
    example = f"{ROOT / 'examples' / 'metrics' / 'entity_coverage.py'}:EntityCoverage"
    ckg = {"nodes": [{"id": "Macbeth", "aliases": ["Glamis"]}, {"id": "Banquo", "aliases": []}], "edges": []}
    cards = round_cards([f"{file}:Fails", example], RoundView(summary="Glamis meets the witches.", ckg=ckg))
    assert cards["fails"]["score"] is None and "ZeroDivisionError" in cards["fails"]["error"]
    assert cards["fails"]["headline"] == headline(cards["fails"]) and cards["fails"]["headline"].startswith(
        "failed"
    )
    assert cards["entity_coverage"]["score"] == 0.5 and cards["entity_coverage"]["missed"] == ["Banquo"]


class Words:
    """A metric an installed package offers under the entry-point group (here: this module)."""

    name = "own name"
    needs = ("summary",)

    def card(self, view: RoundView) -> dict[str, float]:
        """Words of the summary, as a score."""
        return {"score": float(len(view.summary.split()))}


def test_an_installed_metric_is_named_by_its_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    offered = EntryPoint(name="words", value=f"{__name__}:Words", group=GROUP)
    monkeypatch.setattr(metrics, "entry_points", lambda group: [offered] if group == GROUP else [])
    assert Context(metrics=["words"]).metrics == ["words"]
    assert round_cards(["words"], RoundView(summary="two words"))["words"]["score"] == 2.0
    with pytest.raises(ConfigError, match="installed: words"):
        Context(metrics=["sentences"])


def test_the_two_scores_of_the_papers_are_metrics_named_like_any_other() -> None:
    card = {"score": 0.75, "coverage": 1.0, "reliable": True}
    view = RoundView(summary="S.", factscore=card, coherence={"score": 0.5})
    cards = round_cards(["factscore", "coherence"], view)
    assert cards["factscore"]["score"] == 0.75 and cards["coherence"]["score"] == 0.5
    assert cards["factscore"]["headline"] == headline(card)
    assert round_cards(["coherence"], RoundView(summary="S."))["coherence"]["score"] is None
    with pytest.raises(ConfigError, match="built in"):
        Context(metrics=["factscore"])  # scored on every round already: never added twice
