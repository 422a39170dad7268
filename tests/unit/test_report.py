"""The run report: built from a recorded result.json, self-contained, escaped, and faithful to the record."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from storyjudge.apps.cli import app
from storyjudge.apps.report.assets import asset_text, fragment
from storyjudge.apps.report.ckg import ckg_graph, graph_view
from storyjudge.apps.report.page import headline, render_report, write_report
from storyjudge.apps.report.rounds import round_views
from storyjudge.apps.report.verdicts import summary_pieces
from tests.referenced import referenced

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_run"


class Page(HTMLParser):
    """Every element with its attributes and classes, text by element, and raw script/style bodies."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.stack: list[str] = []
        self.texts: list[str] = []
        self.raw: dict[str, list[str]] = {"script": [], "style": []}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        if tag not in ("br", "meta", "path", "circle", "line", "polyline", "input", "link", "img"):
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1] in self.raw:
            self.raw[self.stack[-1]].append(data)
        else:
            self.texts.append(data)

    def having(self, tag: str | None = None, cls: str | None = None) -> list[dict[str, str]]:
        return [
            attrs
            for t, attrs in self.elements
            if (tag is None or t == tag) and (cls is None or cls in attrs.get("class", "").split())
        ]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(FIXTURE, target)
    return target


@pytest.fixture
def result() -> dict[str, Any]:
    return json.loads((FIXTURE / "result.json").read_text())


@pytest.fixture
def page(run_dir: Path) -> Page:
    path = write_report(run_dir)
    parsed = Page()
    parsed.feed(path.read_text(encoding="utf-8"))
    return parsed


def test_report_is_written_into_the_run_directory(run_dir: Path) -> None:
    path = write_report(run_dir)
    assert path == run_dir / "report.html"
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_structure_follows_the_record(page: Page, result: dict[str, Any]) -> None:
    ckg = json.loads((FIXTURE / "ckg.json").read_text())
    assert {a.get("id") for a in page.having("section")} >= {
        "overview",
        "ckg",
        "iterations",
        "usage",
        "settings",
    }
    assert len(page.having("g", "ckg-node")) == len(ckg["nodes"])
    relations = [e for e in ckg["edges"] if e["source"] != e["target"]]
    pairs = {(e["source"], e["target"]) for e in relations}
    assert len(page.having("g", "ckg-edge")) == len(pairs)
    assert len(page.having("section", "ckg-detail")) == len(ckg["nodes"])
    iterations = page.having("article", "iteration")
    assert [a["data-iteration"] for a in iterations] == ["0", "1"]
    assert "best" in iterations[1]["class"].split()
    facts = sum(len(it["factscore"]["verdicts"]) for it in result["iterations"])
    assert len(page.having("tr", "fact")) == facts
    assert len(page.having("tr", "unsupported")) == sum(
        it["factscore"]["unsupported"] for it in result["iterations"]
    )
    assert len(page.having("polyline", "series")) == 2  # NFS and BooookScore
    text = " ".join(page.texts)
    assert "openai:gpt-4o-mini" in text and "local:smollm2" in text  # usage per model
    assert "$0.0330" in text
    assert "max iterations (1) reached" in text


def test_sentences_with_unsupported_facts_are_highlighted_with_feedback(
    page: Page, result: dict[str, Any]
) -> None:
    marked = page.having("span", "unsupported")
    sentences = {a["data-sentence"] for a in marked if "sent" in a["class"].split() and "data-sentence" in a}
    first = result["iterations"][0]["factscore"]
    expected = {str(v["fact"]["sentence_index"]) for v in first["verdicts"] if v["status"] == "unsupported"}
    assert expected <= sentences
    text = " ".join(page.texts)
    for verdict in first["verdicts"]:
        if verdict["status"] == "unsupported":
            assert verdict["feedback"] in text


def test_narrative_markup_stays_text(page: Page, run_dir: Path) -> None:
    scripts = page.having("script")
    assert len(scripts) == 1  # only our own behaviour script
    assert "".join(page.raw["script"]).strip() == asset_text("report.js").strip()
    text = "".join(page.texts)
    assert "<script>alert('pwned')</script>" in text  # the summary's text, shown as text
    assert "<script>alert('evidence')</script>" in text  # a scene's text, shown as text
    assert "<i>the tyrant</i>" in text  # an alias with markup
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<script>alert" not in html and "<i>the tyrant</i>" not in html


def test_no_external_urls_outside_text(page: Page) -> None:
    for tag, attrs in page.elements:
        for name, value in attrs.items():
            assert "http://" not in value and "https://" not in value, (tag, name, value)
    for body in page.raw["script"] + page.raw["style"]:
        assert "http://" not in body and "https://" not in body
    policy = [a for a in page.having("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    assert policy and "default-src 'none'" in policy[0]["content"]


def test_summary_pieces_keep_every_character() -> None:
    summary = "Macbeth meets the witches.  They hail him.\n\nDuncan dies."
    card = {
        "per_sentence": [
            {"index": 0, "sentence": "Macbeth meets the witches."},
            {"index": 1, "sentence": "They hail him."},
            {"index": 2, "sentence": "Duncan dies."},
        ],
        "verdicts": [
            {"fact": {"sentence_index": 1, "text": "The witches hail Macbeth."}, "status": "supported"},
            {"fact": {"sentence_index": 2, "text": "Duncan dies."}, "status": "unsupported"},
            {"fact": {"sentence_index": 2, "text": "Duncan dies young."}, "status": "unjudged"},
        ],
    }
    pieces = summary_pieces(summary, card)
    assert "".join(p.text for p in pieces) == summary
    assert [p.sentence.status for p in pieces if p.sentence] == ["nofacts", "supported", "unsupported"]


def test_summary_pieces_fall_back_when_a_sentence_is_not_found() -> None:
    card = {"per_sentence": [{"index": 0, "sentence": "One."}, {"index": 1, "sentence": "Two  normalised."}]}
    pieces = summary_pieces("One. Two normalised.", card)
    assert "".join(p.text for p in pieces) == "One. Two  normalised."
    assert summary_pieces("No score yet.", None)[0].text == "No score yet."


def test_graph_reader_accepts_links_and_predicate_lists() -> None:
    data = {
        "nodes": [{"id": "A"}, {"id": "B"}],
        "links": [
            {"source": "A", "target": "B", "predicates": ["loves", {"predicate": "fears", "count": 2}]}
        ],
    }
    graph = ckg_graph(data)
    assert sorted(d["predicate"] for _, _, d in graph.edges(data=True)) == ["fears", "loves"]


def test_graph_view_sizes_by_degree_lists_states_and_is_reproducible() -> None:
    data = json.loads((FIXTURE / "ckg.json").read_text())
    view = graph_view(data)
    radius = {n.name: n.r for n in view.nodes}
    assert radius["Macbeth"] > radius["Banquo"] > radius["Fleance"]
    assert {(name, s.predicate) for name, s in view.states} == {
        ("Macbeth", "Thane of Cawdor"),
        ("Duncan", "king"),
        ("Macdonwald", "dead"),
    }
    duncan_to_macbeth = [e for e in view.edges if "Duncan -[rewards]-> Macbeth" in e.title]
    assert len(duncan_to_macbeth) == 1 and "names Thane of Cawdor" in duncan_to_macbeth[0].title
    again = graph_view(data)
    assert [(n.x, n.y) for n in again.nodes] == [(n.x, n.y) for n in view.nodes]
    for node in view.nodes:
        assert 0 <= node.x <= view.width and 0 <= node.y <= view.height


def test_iteration_fragment_alone(result: dict[str, Any]) -> None:
    views = round_views(result["iterations"][:2], passages={}, best=1, order=[])
    assert views[0].score == 0.625
    html = fragment("iteration_view", views[1])
    assert "+0.264" in html and "best" in html
    assert "Say the chamberlains" in html


def test_evidence_named_by_span_shows_as_the_texts_it_names(result: dict[str, Any]) -> None:
    """A record whose verdicts name their evidence in ``passages`` reports exactly what inline texts did."""
    named, count = referenced(result)
    assert count > 20 and "passages" not in result
    assert render_report(named, None) == render_report(result, None)
    assert "<script>alert('evidence')</script>" in json.dumps(named["passages"])  # read from the map


def test_report_of_a_bare_record_renders() -> None:
    html = render_report({"document": {"title": "t"}, "iterations": []}, None)
    assert "No iterations." in html and "No ckg.json" in html


def test_cli_rebuilds_the_report(run_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["report", str(run_dir)])
    assert done.exit_code == 0, done.output
    assert (run_dir / "report.html").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = runner.invoke(app, ["report", str(empty)])
    assert missing.exit_code == 1
    assert "no result.json" in missing.output and "Traceback" not in missing.output


def _round(number: int, score: float | None, **card: Any) -> dict[str, Any]:
    return {"iteration": number, "accepted": True, "factscore": {"score": score, "coverage": 1.0} | card}


def test_headline_says_which_round_and_why_it_does_not_count() -> None:
    rounds = [_round(0, 0.6, reliable=True), _round(1, 0.9, reliable=True)]
    shown = headline(rounds, 1, "target reached")
    assert shown is not None and (shown.score, shown.iteration, shown.reliability) == ("0.900", 1, "reliable")
    assert shown.chosen == "the best of 2 rounds" and shown.coverage == "coverage 100%"
    failed = {"passed": False, "note": "the judge accepted 3 of 3 planted false facts"}
    judged = headline([_round(0, 0.8, reliable=False, judge_check=failed)], None, "")
    assert judged is not None and judged.score == "not reliable"  # never a number
    assert judged.reliability == "not reliable: the judge accepted 3 of 3 planted false facts"
    assert judged.chosen.startswith("the first round") and judged.stop == "not refined"
    fallback = headline([_round(0, 0.8, reliable=False), _round(1, 0.9, reliable=False)], 0, "stopped")
    assert fallback is not None and fallback.chosen.startswith("the first round")  # the loop's fallback
    thin = headline([_round(0, 0.8, reliable=False, coverage=0.4, coverage_floor=0.9)], None, "")
    assert (
        thin is not None and "only 40% of its facts were judged, below the floor of 90%" in thin.reliability
    )
    assert headline([], None, "") is None


def test_chart_marks_a_rejected_round(result: dict[str, Any]) -> None:
    rejected = {
        **result["iterations"][-1],
        "iteration": 2,
        "accepted": False,
        "note": "refinement guard: too long",
    }
    html = render_report({**result, "iterations": [*result["iterations"], rejected]}, None)
    assert html.count('class="rejected-mark"') == 1 and "round 2 rejected: refinement guard: too long" in html
    assert 'class="rejected-mark"' not in render_report(result, None)
    thin = {
        **result["iterations"][0],
        "factscore": {**result["iterations"][0]["factscore"], "reliable": False},
    }
    html = render_report({**result, "iterations": [thin, result["iterations"][1]]}, None)
    assert html.count('class="unreliable-mark"') == 1 and "not reliable, never the best" in html
