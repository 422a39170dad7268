"""A story's runs in the web UI, in Chromium: a generated and refined run, then one's own summary; both remain,
listed with their rounds, and two of them compared side by side; then a person corrects a verdict. Read at 1280
and 1920 px; screenshots go to the test's temp dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from storyjudge.apps.ui.server import UIServer
from storyjudge.core.scripted_server import OpenAIServer
from tests.integration.test_browser import (
    FIRST_SUMMARY,
    FIXED_SUMMARY,
    SUMMARY_COUNTS,
    MacbethResponder,
    _wait_for_step,
    browser,
)

OWN = FIRST_SUMMARY.replace("Macbeth and Banquo meet three witches", "Three witches greet Macbeth and Banquo")
__all__ = ["browser"]  # the fixture, shared with the UI's other browser tests

OVERFLOW = """() => {
  const wide = [];
  for (const el of document.querySelectorAll("section, table, .card, .pair")) {
    if (el.scrollWidth > el.clientWidth + 1) wide.push(el.id || el.className || el.tagName);
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1) wide.push("page");
  return wide;
}"""


@pytest.mark.slow
def test_runs_of_a_story_stay_and_compare(browser: Any, ui: UIServer, tmp_path: Path) -> None:
    with OpenAIServer(MacbethResponder()) as model:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(ui.url)
        page.select_option("#example", "macbeth-witches")
        page.fill("#model", "openai:scripted")
        page.fill("#base-url", model.base_url)
        page.fill("#ckg-samples", "1")
        page.click("#open-narrative")
        page.wait_for_selector("#run:not([hidden])")
        assert page.locator("#runs-empty").is_visible()
        page.click("#btn-graph")
        _wait_for_step(page, "#ckg .ckg", 300_000)
        page.click("#btn-summary")
        _wait_for_step(page, "#summary:has-text('great hall')", 120_000)
        page.click("#btn-score")
        _wait_for_step(page, "#runs-body tr", 180_000)
        page.click("#btn-refine")
        _wait_for_step(page, ".iteration[data-iteration='1']", 180_000)

        page.click("#own-summary > summary")
        page.fill("#own-summary-text", OWN)
        page.click("#btn-own-summary")
        _wait_for_step(page, "#summary:has-text('Three witches greet')", 120_000)
        page.click("#btn-score")
        _wait_for_step(page, "#runs-body tr:nth-child(2)", 180_000)

        rows = page.locator("#runs-body tr")
        assert rows.count() == 2  # the generated run was not replaced
        own, generated = rows.nth(0).inner_text(), rows.nth(1).inner_text()
        assert "your own" in own and "\t1\t" in own and "0.800" in own
        assert "generated" in generated and "\t2\t" in generated and "1.000" in generated
        assert "current" in (rows.nth(0).get_attribute("class") or "")
        for width in (1280, 1920):
            page.set_viewport_size({"width": width, "height": 1000})
            assert page.evaluate(OVERFLOW) == [], width
            page.locator("#runs-panel").screenshot(path=str(tmp_path / f"runs-{width}.png"))

        rows.nth(1).locator("input.compare-pick").nth(0).check()  # the generated run's round 0
        rows.nth(1).locator("input.compare-pick").nth(2).check()  # and its best round
        rows.nth(0).locator("input.compare-pick").nth(0).check()  # and one's own summary
        with page.context.expect_page() as opened:
            page.click("#btn-compare")
        compare = opened.value
        compare.wait_for_load_state()
        text = compare.locator("#scores").inner_text()
        assert "NFS [95% CI]" in text and "0.800 [" in text and "1.000 [1.000, 1.000]" in text
        assert "#0" in compare.locator("#scores th").nth(1).inner_text()  # the oldest first: the baseline
        pairs = compare.locator(".pair")
        assert pairs.count() == 2
        assert "+0.200" in pairs.nth(0).inner_text() and "in his chamber" in pairs.nth(0).inner_text()
        for width in (1280, 1920):
            compare.set_viewport_size({"width": width, "height": 1000})
            assert compare.evaluate(OVERFLOW) == [], width
            compare.screenshot(path=str(tmp_path / f"compare-{width}.png"), full_page=True)
        compare.set_viewport_size({"width": 1280, "height": 800})  # the headline first, each summary once
        headline = compare.locator("#headline")
        box = headline.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 800
        lines = headline.locator("li").all_inner_texts()
        assert len(lines) == 3 and all("coverage" in line and "reliable" in line for line in lines), lines
        assert "NFS 1.000 [1.000, 1.000]" in lines[1] and "its run stopped:" in lines[1], lines
        assert compare.evaluate(SUMMARY_COUNTS, [FIRST_SUMMARY, FIXED_SUMMARY, OWN]) == [1, 1, 1]
        assert compare.evaluate("document.documentElement.scrollHeight") <= 4 * 800

        page.bring_to_front()  # a person marks a verdict of their own summary's round wrong
        page.locator(".iteration[data-iteration='0'] details.facts > summary").click()  # folded until opened
        fact = page.locator(".iteration[data-iteration='0'] tr.fact.supported").first
        fact.locator("button.correct-open").click()
        fact.locator(".correct-form textarea").fill("The witches greet no one in this scene")
        fact.locator("button.correct-save").click()
        _wait_for_step(page, ".iteration[data-iteration='0'] .corrections", 30_000)
        assert "with 1 correction" in page.locator("#score-line").inner_text()
        assert "0.600" in page.locator(".iteration[data-iteration='0'] .nfs").inner_text()
        assert (
            "Corrected by a person" in page.locator(".iteration[data-iteration='0'] .correction").inner_text()
        )
        for width in (1280, 1920):
            page.set_viewport_size({"width": width, "height": 1000})
            assert page.evaluate(OVERFLOW) == [], width
            page.locator("#score-panel").screenshot(path=str(tmp_path / f"corrected-{width}.png"))
        assert not errors
