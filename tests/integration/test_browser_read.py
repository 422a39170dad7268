"""The report read in a minute, in Chromium: the headline first, a page of at most four screens at 1280 px until
a section is opened, each summary shown once, a rejected round marked on the chart, tabs on the content's edge
at 1920 px. The run is the report fixture grown to a real run's size: 243 facts a round, and a third round
rejected by a guard whose score is above the best's. Screenshots go to the test's temp dir."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from storyjudge.apps.report import write_report
from tests.integration.test_browser import FIXTURE, SUMMARY_COUNTS, browser

__all__ = ["browser"]  # the fixture, shared with the other browser tests
REJECTED_NOTE = "refinement guard: too long (412 words > 300); not accepted as best"
STOP = "the last refinement (round 2) was rejected by the refinement guard: too long"

TOC_AND_CONTENT = """() => [document.querySelector('.toc a').getBoundingClientRect().left,
  document.querySelector('main h2').getBoundingClientRect().left]"""


def big_run(run_dir: Path) -> dict[str, Any]:
    """The fixture with 27 times its facts and a rejected round 2 scoring above the best round 1."""
    shutil.copytree(FIXTURE, run_dir)
    result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    for it in result["iterations"]:
        it["factscore"]["verdicts"] = [
            copy.deepcopy(v) for _ in range(27) for v in it["factscore"]["verdicts"]
        ]
    rejected = copy.deepcopy(result["iterations"][-1])
    rejected.update(iteration=2, accepted=False, note=REJECTED_NOTE)
    for entry in rejected["factscore"]["per_sentence"]:  # a longer last sentence: the guard's "too long"
        entry["sentence"] = entry["sentence"].replace(
            "guests sleep", "guests feast on and the thanes keep watch"
        )
    rejected["summary"] = rejected["summary"].replace(
        "guests sleep", "guests feast on and the thanes keep watch"
    )
    rejected["factscore"]["score"] = 0.95
    result["iterations"].append(rejected)
    result["stop_reason"] = STOP
    (run_dir / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return result


@pytest.mark.slow
def test_report_reads_in_a_minute(browser: Any, tmp_path: Path) -> None:
    result = big_run(tmp_path / "run")
    report = write_report(tmp_path / "run")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(report.as_uri())
    headline = page.locator("#overview .headline")
    box = headline.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800  # in the first screen, without scrolling
    text = headline.inner_text()
    assert "NFS 0.889" in text and "round 1, the best of 3 rounds" in text
    assert "coverage" in text and "reliable" in text and STOP in text
    marks = page.locator(".curve .rejected-mark")
    title = marks.locator("title").text_content() or ""
    assert marks.count() == 1 and "round 2 rejected: refinement guard" in title
    assert "rejected by a guard" in page.locator(".curve-legend").inner_text()
    page.screenshot(path=str(tmp_path / "read-1280.png"))

    height = page.evaluate("document.documentElement.scrollHeight")
    assert height <= 4 * 800, height  # every fact table, time table and settings table folded
    assert page.locator("details.facts[open]").count() == 0
    summaries = [it["summary"] for it in result["iterations"]]
    assert page.evaluate(SUMMARY_COUNTS, summaries) == [1, 1, 1]

    page.locator(".iteration[data-iteration='1'] details.facts > summary").click()
    cut = page.evaluate(
        "[...document.querySelectorAll('.iteration[data-iteration=\"1\"] .scroll-cell')]"
        ".filter((c) => c.scrollHeight > c.clientHeight + 1).length"
    )
    assert cut == 0  # evidence cells wrap in full; none scrolls with a line cut in half
    page.screenshot(path=str(tmp_path / "read-1280-facts.png"))

    page.set_viewport_size({"width": 1920, "height": 1080})
    page.evaluate("window.scrollTo(0, 0)")
    tabs, content = page.evaluate(TOC_AND_CONTENT)
    assert content > 200 and abs(tabs - content) <= 1, (tabs, content)  # centred content, tabs on its edge
    page.screenshot(path=str(tmp_path / "read-1920.png"))
    assert not errors
