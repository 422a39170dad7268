"""``storyjudge compare``: summaries of one story side by side, with intervals, fact by fact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from storyjudge.apps.cli import app
from storyjudge.apps.compare import align, compare, pair_line, render_html, supported_only
from storyjudge.core.keptruns import RunRef, keep_run
from tests.referenced import referenced

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_run" / "result.json"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """The fixture's refine run (round 0: NFS 0.625; round 1, the best: 8/9), kept in a story."""
    return keep_run(tmp_path, "refine-1", json.loads(FIXTURE.read_text(encoding="utf-8"))).root


def test_rounds_of_a_refinement_compare_as_runs(run: Path) -> None:
    result = compare([RunRef(run, 0), RunRef(run)])
    first, best = result["summaries"]
    assert (first["label"], best["label"]) == ("refine-1#0", "refine-1")
    assert first["nfs"]["score"] == 0.625 and first["nfs"]["judged"] == 8  # the unjudged fact is out
    low, high = first["nfs"]["ci95"]
    assert low < 0.625 < high
    assert first["coverage"] is None  # the fixture's record has none: shown as missing, never made up
    pair = result["pairs"][0]
    # 8 aligned facts (one side unjudged) are too few to pair: the difference is over each round's sentences
    assert pair["comparable"] and not pair["nfs"]["paired"] and pair["nfs"]["pairs"] == 8
    assert pair["nfs"]["over"].startswith(f"{first['nfs']['sentences']} sentences and ")
    assert "unpaired: only 8 facts align" in pair["nfs"]["over"]
    assert pair["nfs"]["difference"] == pytest.approx(8 / 9 - 0.625)
    assert pair["only_a"] == []  # all that round 0 supported, round 1 still supports
    gained = {item["fact"]["text"]: item for item in pair["only_b"]}
    assert "King Duncan makes Macbeth the new Thane of Cawdor." in gained
    counterpart = gained["King Duncan makes Macbeth the new Thane of Cawdor."]["counterpart"]
    assert counterpart["verdict"] == "unsupported" and "Banquo" in counterpart["text"]
    assert gained["King Duncan makes Macbeth the new Thane of Cawdor."]["fact"]["scenes"]  # its evidence


def test_evidence_named_by_span_compares_as_the_texts_it_names(run: Path, tmp_path: Path) -> None:
    named, count = referenced(json.loads(FIXTURE.read_text(encoding="utf-8")))
    assert count > 20
    again = keep_run(tmp_path, "refine-2", named).root
    inline, spans = compare([RunRef(run, 0), RunRef(run)]), compare([RunRef(again, 0), RunRef(again)])
    assert spans["pairs"][0]["only_b"] == inline["pairs"][0]["only_b"]
    scenes = [scene for item in spans["pairs"][0]["only_b"] for scene in item["fact"]["scenes"]]
    assert scenes and all(scene["text"] for scene in scenes)


def _more_facts(record: dict, extra: int) -> dict:
    """The record with ``extra`` more judged facts in round 0, each worded differently, in its first sentence."""
    card = record["iterations"][0]["factscore"]
    seed = card["verdicts"][0]
    words = (
        "heath",
        "cauldron",
        "dagger",
        "banquet",
        "forest",
        "castle",
        "crown",
        "ghost",
        "letter",
        "blood",
    )
    for n in range(extra):
        fact = {**seed["fact"], "id": f"extra-{n}", "text": f"The {words[n % 10]} scene number {n} is told."}
        card["verdicts"].append({**seed, "fact": fact, "status": "supported"})
    return record


def test_the_same_facts_judged_twice_are_paired_only_when_enough_align(run: Path, tmp_path: Path) -> None:
    plenty = keep_run(
        tmp_path, "score-1", _more_facts(json.loads(FIXTURE.read_text(encoding="utf-8")), 6)
    ).root
    again = keep_run(
        tmp_path, "score-2", _more_facts(json.loads(FIXTURE.read_text(encoding="utf-8")), 6)
    ).root
    pair = compare([RunRef(plenty, 0), RunRef(again, 0)])["pairs"][0]
    assert pair["nfs"]["paired"] and pair["nfs"]["pairs"] == 14 and pair["nfs"]["n"] == 14
    assert pair["nfs"]["over"] == "14 aligned facts paired, 0 without counterpart"
    few = compare([RunRef(run, 0), RunRef(again, 0)])["pairs"][0]
    assert not few["nfs"]["paired"], "8 aligned facts are under half of neither, but under 10"


def test_a_pair_judged_differently_gets_no_difference_only_why(run: Path, tmp_path: Path) -> None:
    other = json.loads(FIXTURE.read_text(encoding="utf-8"))
    for verdict in other["iterations"][0]["factscore"]["verdicts"]:
        verdict["status"] = "supported"
    other["context"]["resolved_models"]["judge"] = "openai:gpt-4o"
    again = keep_run(tmp_path, "score-2", other).root
    pair = compare([RunRef(run, 0), RunRef(again, 0)])["pairs"][0]
    assert pair["nfs"] is None and pair["booookscore"] is None and pair["aligned_facts"] == 8
    assert not pair["comparable"]
    assert pair["not_comparable_because"] == ["judge model: openai:gpt-4o-mini vs openai:gpt-4o"]
    line = pair_line(pair)
    assert "excludes 0" not in line and "NFS" not in line
    assert line.endswith(
        "no difference shown, because judged differently (judge model: openai:gpt-4o-mini vs openai:gpt-4o)"
    )


def test_runs_of_different_stories_are_refused(run: Path, tmp_path: Path) -> None:
    other = json.loads(FIXTURE.read_text(encoding="utf-8"))
    other["document"]["hash"] = "0" * 64
    elsewhere = keep_run(tmp_path / "other", "refine-2", other).root
    with pytest.raises(ValueError, match="another story"):
        compare([RunRef(run), RunRef(elsewhere)])
    with pytest.raises(ValueError, match="two or more"):
        compare([RunRef(run)])


def test_alignment_pairs_a_reworded_fact_and_leaves_a_new_one_alone() -> None:
    def verdict(text: str, status: str, scenes: list[str]) -> dict:
        return {"fact": {"text": text}, "status": status, "evidence": {"scenes": [{"id": s} for s in scenes]}}

    first = [
        verdict("The witches hail Macbeth as king.", "supported", ["S003"]),
        verdict("Macbeth kills Duncan in the great hall.", "unsupported", ["S007"]),
    ]
    second = [
        verdict("Duncan visits Inverness.", "supported", ["S006"]),
        verdict("The witches hail Macbeth as the king.", "supported", ["S003"]),
    ]
    units = align(first, second)
    assert (0, 1) in [(i, j) for i, j, _ in units] and (1, None, 0.0) in units and (None, 0, 0.0) in units
    only_first, only_second = supported_only(first, second, units)
    assert only_first == []  # the reworded fact is supported in both
    first[0]["fact"]["text"] = "Three witches greet Macbeth on the heath."  # no longer the same words
    assert supported_only(first, second, align(first, second))[0] == [], "its counterpart is supported"
    assert [item["fact"]["text"] for item in only_second] == ["Duncan visits Inverness."]
    assert only_second[0]["counterpart"] is None


def test_compare_command_prints_the_table_and_writes_the_page(run: Path, tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    runner = CliRunner()
    shown = runner.invoke(app, ["compare", f"{run}#0", str(run), "--html", str(page)])
    assert shown.exit_code == 0, shown.output
    assert "NFS [95% CI]" in shown.output and "0.625 [" in shown.output
    assert "refine-1 - refine-1#0: NFS +0.264" in shown.output
    html = page.read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html  # the title is escaped
    assert "King Duncan makes Macbeth the new Thane of Cawdor." in html
    as_json = runner.invoke(app, ["compare", f"{run}#0", f"{run}#1", "--json", "--html", str(page)])
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)["pairs"][0]["nfs"]["difference"] == pytest.approx(8 / 9 - 0.625)
    bad = runner.invoke(app, ["compare", f"{run}#7", str(run), "--html", str(page)])
    assert bad.exit_code == 1 and "no round 7" in bad.output


def test_html_is_self_contained(run: Path) -> None:
    html = render_html(compare([RunRef(run, 0), RunRef(run, 1)]))
    assert "http://" not in html and "https://" not in html and "<script" not in html
