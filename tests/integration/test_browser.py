"""The report and the web UI in a real browser (Debian's headless Chromium driven by Playwright), offline.

The UI runs in-process on a free loopback port; its model is the scripted OpenAI-compatible server, which
plays every role on Macbeth, Act I: its summary claims a murder that Act I does not show, the judge flags it,
the refiner fixes it. The embedder is the real one (shipped in a wheel). Screenshots go to the test's temp
dir.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest

from storyjudge.apps.report import write_report
from storyjudge.apps.ui.server import UIServer, make_server
from storyjudge.core.scripted_server import OpenAIServer, all_text, last_user_text

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_run"

WRONG = "Macbeth kills Duncan in the great hall."
RIGHT = "Macbeth resolves to murder Duncan in his chamber that night."
OPENING = (
    "Macbeth and Banquo meet three witches on a heath. "
    "The witches hail Macbeth as Thane of Cawdor and future king. "
    "King Duncan makes Macbeth Thane of Cawdor. "
    "Lady Macbeth urges her husband to murder Duncan. "
)
FIRST_SUMMARY = OPENING + WRONG
FIXED_SUMMARY = OPENING + RIGHT
CAST = {
    "Macbeth": ["MACBETH", "Macbeth"],
    "Lady Macbeth": ["LADY MACBETH", "Lady Macbeth"],
    "Duncan": ["DUNCAN", "Duncan"],
    "Banquo": ["BANQUO", "Banquo"],
    "Malcolm": ["MALCOLM"],
    "First Witch": ["First Witch"],
    "Ross": ["ROSS"],
}
RELATIONS = [
    ("First Witch", "hails as future king", "Macbeth"),
    ("Duncan", "names Thane of Cawdor", "Macbeth"),
    ("Lady Macbeth", "urges to murder Duncan", "Macbeth"),
    ("Lady Macbeth", "plots to murder", "Duncan"),
    ("Macbeth", "hosts", "Duncan"),
    ("Banquo", "fights beside", "Macbeth"),
    ("Malcolm", "is son of", "Duncan"),
    ("Ross", "brings news to", "Macbeth"),
    ("Duncan", "state: king", None),
]


def _block(text: str, tag: str) -> str:
    """The last ``<tag>`` data block of a prompt (earlier ones are the prompt's own examples)."""
    found = re.findall(rf"<{tag}[^>]*>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return found[-1].strip() if found else ""


class MacbethResponder:
    """Answers each kind of storyjudge prompt plausibly for Macbeth, Act I; counts calls per kind."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()

    def _count(self, kind: str) -> None:
        with self.lock:
            self.calls[kind] = self.calls.get(kind, 0) + 1

    def __call__(self, body: dict[str, Any]) -> str:
        schema = str(((body.get("response_format") or {}).get("json_schema") or {}).get("name", ""))
        text = last_user_text(body)
        if schema == "SceneTriples" or "List the characters of one scene" in text:
            self._count("extract")
            scene = _block(text, "scene") or text
            present = [name for name, marks in CAST.items() if any(mark in scene for mark in marks)]
            triples = [
                {"subject": s, "predicate": p, "object": o}
                for s, p, o in RELATIONS
                if s in present and (o is None or o in present)
            ]
            characters = [{"name": name, "aliases": []} for name in present]
            return json.dumps({"characters": characters, "triples": triples})
        if schema == "AtomicFacts":
            self._count("decompose")
            sentence = _block(text, "sentence")
            return json.dumps({"facts": [sentence] if sentence else []})
        if schema == "Verdict":
            self._count("judge")
            fact = _block(text, "fact")
            if "great hall" in fact or "kills" in fact:
                return json.dumps(
                    {
                        "rationale": "Act I ends with Macbeth resolved (S007); no murder is shown.",
                        "supported": False,
                        "feedback": "In Act I Macbeth only resolves to murder Duncan; he kills no one.",
                        "evidence": ["S007"],
                    }
                )
            return json.dumps(
                {"rationale": "The scenes state this.", "supported": True, "feedback": "", "evidence": []}
            )
        if schema:
            self._count(schema)
            return "{}"
        whole = all_text(body)
        if "You revise a summary" in whole:
            self._count("refine")
            return FIXED_SUMMARY
        if "causes any confusion" in whole:
            self._count("coherence")
            return "Questions: no confusion\nTypes: no confusion"
        self._count("summarize")
        return FIRST_SUMMARY


def _browser_or_skip() -> Any:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (/usr/bin/chromium): run 'make browser-deps'")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e .[dev])"
    )
    return sync_api


@pytest.fixture
def browser() -> Iterator[Any]:
    sync_api = _browser_or_skip()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def _request(
    server: UIServer, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    host, port = server.server_address[:2]
    connection = HTTPConnection(str(host), int(port), timeout=30)
    data = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if body is not None else {}
    sent.update(headers or {})
    connection.request(method, path, body=data, headers=sent)
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    try:
        return response.status, json.loads(raw)
    except json.JSONDecodeError:
        return response.status, raw.decode("utf-8", "replace")


# --- the server's API (no browser needed) ----------------------------------------------------------------


def test_ui_api_guards(ui: UIServer) -> None:
    status, examples = _request(ui, "GET", "/api/examples")
    assert status == 200 and "macbeth-act1" in {e["id"] for e in examples}
    assert _request(ui, "GET", "/api/runs/..%2Fetc")[0] == 404
    assert _request(ui, "GET", "/api/runs/../../etc/passwd")[0] == 404
    assert _request(ui, "GET", "/", headers={"Host": "attacker.example:80"})[0] == 403
    status, answer = _request(ui, "POST", "/api/runs", headers={"Content-Type": "text/plain"})
    assert status == 415
    status, answer = _request(ui, "POST", "/api/runs", {"text": "too short", "settings": {}})
    assert status == 400 and "fewer than 3 words" in answer["error"]
    status, answer = _request(
        ui, "POST", "/api/runs", {"example": "macbeth-act1", "settings": {"ckg_samples": "x"}}
    )
    assert status == 400 and "ckg_samples" in answer["error"]


def test_ui_run_is_saved_and_steps_are_ordered(ui: UIServer, tmp_path: Path) -> None:
    settings = {"model": "local:smollm2", "base_url": "", "ckg_samples": 1}
    status, view = _request(ui, "POST", "/api/runs", {"example": "macbeth-act1", "settings": settings})
    assert status == 201
    assert view["title"] == "macbeth-act1" and len(view["scenes"]) == 8 and view["segmentation"] == "play"
    run_dir = tmp_path / "runs" / view["name"]
    assert (run_dir / "ui.json").is_file() and (run_dir / "document.txt").is_file()
    status, answer = _request(ui, "POST", f"/api/runs/{view['name']}/steps/refine", {"settings": settings})
    assert status == 400 and "factuality score first" in answer["error"]
    status, answer = _request(ui, "POST", f"/api/runs/{view['name']}/steps/score", {"settings": settings})
    assert status == 400 and "summary first" in answer["error"]
    other = make_server("127.0.0.1", 0, runs_dir=tmp_path / "runs")  # a restarted server reads it back
    try:
        status, again = _request(ui, "GET", f"/api/runs/{view['name']}")
        assert status == 200 and again["settings"]["ckg_samples"] == 1
        assert other.store.open(view["name"]).state["title"] == "macbeth-act1"
    finally:
        other.server_close()


def test_ui_command_reports_bad_options_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from storyjudge.apps.cli import app

    runner = CliRunner()
    missing = runner.invoke(app, ["ui", "--squality", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 1 and "does not exist" in missing.output
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = runner.invoke(app, ["ui", "--port", str(port), "--runs-dir", str(tmp_path / "runs")])
    assert busy.exit_code == 1 and "choose another --port" in busy.output
    assert "Traceback" not in missing.output + busy.output


def _raw_get(server: UIServer, path: str) -> tuple[int, dict[str, str], bytes]:
    host, port = server.server_address[:2]
    connection = HTTPConnection(str(host), int(port), timeout=30)
    connection.request("GET", path)
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, raw


def test_ui_errors_name_the_page_fields(ui: UIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = {"model": "openai:gpt-4o-mini", "base_url": "", "ckg_samples": 1}
    status, view = _request(ui, "POST", "/api/runs", {"example": "macbeth-act1", "settings": settings})
    assert status == 201
    status, answer = _request(ui, "POST", f"/api/runs/{view['name']}/steps/graph", {"settings": settings})
    assert status == 400 and "OPENAI_API_KEY" in answer["error"]
    assert "Base URL" in answer["error"] and "Model spec" in answer["error"]
    assert "--" not in answer["error"], answer["error"]
    status, answer = _request(
        ui, "POST", f"/api/runs/{view['name']}/steps/summary", {"settings": settings, "summary": "too short"}
    )
    assert status == 400 and "fewer than 3 words" in answer["error"]
    status, _, _ = _raw_get(ui, f"/runs/{view['name']}/download/summary.txt")
    assert status == 404  # no summary yet
    assert _raw_get(ui, f"/runs/{view['name']}/download/ckg.json")[0] == 404  # only the three files


def test_page_is_self_contained(ui: UIServer) -> None:
    status, page = _request(ui, "GET", "/")
    assert status == 200 and "Generate knowledge graph" in page
    attributes = " ".join(re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", page))
    assert "http" not in attributes


# --- the report in a browser -----------------------------------------------------------------------------


@pytest.mark.slow
def test_report_renders_in_chromium(browser: Any, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    report = write_report(run_dir)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(report.as_uri())
    nodes = page.locator(".ckg-node")
    assert nodes.count() == 9
    box = nodes.first.bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 0
    assert page.locator(".ckg-edge").count() == 13
    page.locator(".ckg-pick", has_text="Macbeth").first.click()
    detail = page.locator(".ckg-detail:visible")
    assert detail.count() == 1
    assert "Thane of Cawdor" in detail.inner_text() and "<i>the tyrant</i>" in detail.inner_text()
    page.locator("#ckg").screenshot(path=str(tmp_path / "report-ckg.png"))
    flagged = page.locator(".iteration[data-iteration='0'] .sent.unsupported")
    assert flagged.count() == 2
    flagged.first.hover()
    tip = page.locator(".iteration[data-iteration='0'] .sent.unsupported .tip").first
    assert tip.is_visible() and "Duncan makes Macbeth, not Banquo" in tip.inner_text()
    page.locator(".iteration[data-iteration='0']").screenshot(path=str(tmp_path / "report-iteration0.png"))
    assert page.locator("polyline.series").count() == 2
    assert page.evaluate("typeof window.alert") == "function"  # page scripts ran; the story's did not
    assert "pwned" in page.locator(".iteration[data-iteration='0'] .summary").inner_text()
    page.screenshot(path=str(tmp_path / "report-full.png"), full_page=True)
    assert not errors
    assert all(url.startswith("file://") for url in requests), requests


# --- the demo flow in a browser --------------------------------------------------------------------------


def _wait_for_step(page: Any, selector: str, timeout_ms: int) -> None:
    """Wait until a step's output (or an error) shows; fail at once with the page's error message."""
    page.wait_for_selector(f"{selector}, #error:not([hidden])", timeout=timeout_ms)
    assert page.locator("#error").is_hidden(), page.locator("#error").inner_text()
    page.wait_for_selector(selector, timeout=5_000)


LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const box = (el) => el.getBoundingClientRect();
  const name = (el) => el.tagName.toLowerCase() + (el.className ? "." + String(el.className).split(" ")[0] : "");
  const inside = (el, outer, what) => {
    const b = box(el), o = box(outer);
    if (b.width === 0 && b.height === 0) return;
    if (b.left < o.left - 1 || b.right > o.right + 1) {
      problems.push(what + ": " + name(el) + " [" + Math.round(b.left) + ", " + Math.round(b.right) +
        "] outside " + name(outer) + " [" + Math.round(o.left) + ", " + Math.round(o.right) + "]");
    }
  };
  const noScroll = (el, what) => {
    if (el.scrollWidth > el.clientWidth + 1) {
      problems.push(what + ": " + name(el) + " scrolls sideways (" + el.scrollWidth + " > " + el.clientWidth + ")");
    }
  };
  const row = document.getElementById("iterations");
  noScroll(row, "rounds");
  inside(row, document.querySelector("#score-panel"), "rounds");
  row.querySelectorAll(".iteration").forEach((card) => {
    const n = "iteration " + card.dataset.iteration;
    inside(card, row, n);
    noScroll(card, n);
    card.querySelectorAll("header > *, .summary, .fact-table").forEach((el) => inside(el, card, n));
    card.querySelectorAll(".fact-table th, .fact-table td").forEach((cell) => {
      inside(cell, card, n);
      noScroll(cell, n + " cell");
    });
    card.querySelectorAll(".fact-table .scroll-cell").forEach((cell) => noScroll(cell, n + " evidence"));
    card.querySelectorAll(".fact-table .badge").forEach((label) => {
      inside(label, label.closest("td"), n);
      const b = box(label), line = parseFloat(getComputedStyle(label).lineHeight) || 20;
      if (b.height > line * 1.5) problems.push(n + ": " + name(label) + " '" + label.textContent + "' wraps");
    });
  });
  return problems;
}"""


def _layout_problems(page: Any) -> list[str]:
    """Cards, headers, tables, cells and labels of the rounds that leave their container or wrap."""
    page.evaluate("document.querySelectorAll('#iterations details.facts').forEach(d => { d.open = true; })")
    problems: list[str] = page.evaluate(LAYOUT_PROBLEMS)
    return problems


SUMMARY_COUNTS = """(texts) => {
  const page = document.body.innerText;
  return texts.map((t) => page.split(t).length - 1);
}"""
"""How many times each text shows on the page (hidden tooltips and folded sections do not count)."""


def _reads_in_a_minute(page: Any, summaries: list[str]) -> int:
    """The headline first (score, coverage and reliability, stop reason), each summary once, and at most four
    screens at 1280x800 with the sections folded; returns the page's height."""
    page.set_viewport_size({"width": 1280, "height": 800})
    page.evaluate("window.scrollTo(0, 0)")
    headline = page.locator("#headline .headline")
    box = headline.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800  # in the first screen
    text = headline.inner_text()
    assert "NFS" in text and "coverage" in text and "reliable" in text and "Stopped:" in text, text
    assert page.evaluate(SUMMARY_COUNTS, summaries) == [1] * len(summaries)
    height: int = page.evaluate("document.documentElement.scrollHeight")
    assert height <= 4 * 800, height
    return height


@pytest.mark.slow
def test_ui_four_steps_on_macbeth(browser: Any, ui: UIServer, tmp_path: Path) -> None:
    responder = MacbethResponder()
    with OpenAIServer(responder) as model_server:
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        requests: list[str] = []
        errors: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(ui.url)
        page.select_option("#example", "macbeth-act1")
        page.fill("#model", "openai:scripted")
        page.fill("#base-url", model_server.base_url)
        page.fill("#ckg-samples", "1")
        page.click("#open-narrative")
        page.wait_for_selector("#run:not([hidden])")
        assert page.locator("#scenes details").count() == 8
        assert "SCENE VII" in page.locator("#scenes").inner_text()
        assert "openai:scripted" in page.locator("#models").inner_text()
        page.screenshot(path=str(tmp_path / "ui-0-narrative.png"))

        page.click("#btn-graph")
        page.wait_for_selector("#progress:not([hidden])", timeout=10_000)
        _wait_for_step(page, "#ckg .ckg", 300_000)
        names = page.locator("#ckg .ckg-node text").all_text_contents()
        assert {"Macbeth", "Duncan", "Lady Macbeth"} <= set(names)
        assert responder.calls.get("extract") == 8  # one sample per scene
        assert page.evaluate("document.getElementById('narrative').open") is False  # the graph is in view
        page.screenshot(path=str(tmp_path / "ui-1-graph.png"))

        page.click("#btn-summary")
        _wait_for_step(page, "#summary:has-text('great hall')", 120_000)
        page.screenshot(path=str(tmp_path / "ui-2-summary.png"))

        page.click("#btn-score")
        _wait_for_step(page, ".iteration[data-iteration='0']", 180_000)
        flagged = page.locator(".iteration[data-iteration='0'] .sent.unsupported")
        assert flagged.count() == 1 and "great hall" in flagged.inner_text()
        assert page.locator(".iteration[data-iteration='0'] tr.fact").count() == 5
        assert "0.800" in page.locator(".iteration[data-iteration='0'] .nfs").inner_text()
        _reads_in_a_minute(page, [FIRST_SUMMARY])
        assert "not refined yet" in page.locator("#headline").inner_text()
        usage = page.locator("#usage").inner_text()  # the CLI's words for a model without a list price
        assert "est. price unknown" in usage and "$0.0000" not in usage, usage
        page.screenshot(path=str(tmp_path / "ui-3-score.png"), full_page=True)
        page.set_viewport_size({"width": 1500, "height": 1100})

        page.click("#btn-refine")
        _wait_for_step(page, ".iteration[data-iteration='1']", 180_000)
        second = page.locator(".iteration[data-iteration='1']")
        assert (
            "1.000" in second.locator(".nfs").inner_text()
            and "+0.200" in second.locator(".delta").inner_text()
        )
        shown = page.locator("#iterations .iteration")
        assert shown.count() == 2  # stacked, the newest round first
        assert [shown.nth(i).get_attribute("data-iteration") for i in range(2)] == ["1", "0"]
        assert "change +0.200" in page.locator("#score-line").inner_text()
        assert page.locator("#btn-refine").is_disabled()  # nothing left to refine
        _reads_in_a_minute(page, [FIRST_SUMMARY, FIXED_SUMMARY])
        assert "NFS 1.000" in page.locator("#headline").inner_text()
        page.screenshot(path=str(tmp_path / "ui-4-refined-1280-full.png"), full_page=True)
        page.set_viewport_size({"width": 1920, "height": 1080})
        side, content = page.evaluate(
            "[document.querySelector('.ui-side').getBoundingClientRect().right,"
            " document.querySelector('#run .run-head').getBoundingClientRect().left]"
        )
        assert 0 < content - side <= 17, (side, content)  # the grid's gap, no more
        for width in (1280, 1920):  # every round reads at a laptop's and a desktop's width
            page.set_viewport_size({"width": width, "height": 1000})
            assert _layout_problems(page) == [], width
            page.locator("#score-panel").screenshot(path=str(tmp_path / f"ui-4-refined-{width}.png"))
        page.set_viewport_size({"width": 1500, "height": 1100})
        page.screenshot(path=str(tmp_path / "ui-4-refined.png"), full_page=True)

        page.reload()  # a reload restores everything from the run directory
        page.wait_for_selector(".iteration[data-iteration='1']")
        assert page.locator("#ckg .ckg-node").count() == len(names)
        assert "great hall" in page.locator(".iteration[data-iteration='0'] .summary").inner_text()
        assert not page.locator("#report-link").is_hidden()
        assert not errors
        assert all(url.startswith(ui.url) for url in requests), [
            u for u in requests if not u.startswith(ui.url)
        ]

    run_dir = next((tmp_path / "runs").iterdir())
    result = json.loads((run_dir / "result.json").read_text())
    assert [s["nfs"] for s in result["scores"]] == [0.8, 1.0] and result["best_iteration"] == 1
    report = browser.new_page()
    report.goto((run_dir / "report.html").as_uri())
    assert report.locator(".ckg-node").count() == len(names)
    assert report.locator(".sent.unsupported").count() == 1
    report.screenshot(path=str(tmp_path / "ui-5-report.png"), full_page=True)


@pytest.mark.slow
def test_ui_own_summary_and_downloads(browser: Any, ui: UIServer, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    responder = MacbethResponder()
    own = FIRST_SUMMARY.replace(
        "Macbeth and Banquo meet three witches", "Three witches greet Macbeth and Banquo"
    )
    summary_file = tmp_path / "my-summary.txt"
    summary_file.write_text(own + "\n", encoding="utf-8")
    with OpenAIServer(responder) as model_server:
        page = browser.new_page(viewport={"width": 1280, "height": 1000}, accept_downloads=True)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(ui.url)
        page.select_option("#example", "macbeth-act1")
        page.fill("#model", "local:smollm2")
        page.click("#open-narrative")
        page.wait_for_selector("#run:not([hidden])")
        banner = page.locator("#embedded-banner")
        assert banner.is_visible() and "demo grade" in banner.inner_text()
        page.screenshot(path=str(tmp_path / "own-0-embedded-banner.png"))

        page.fill("#model", "openai:scripted")
        page.fill("#base-url", model_server.base_url)
        page.fill("#ckg-samples", "1")
        page.click("#open-narrative")
        page.wait_for_selector("#embedded-banner[hidden]", state="attached")
        page.click("#btn-graph")
        _wait_for_step(page, "#ckg .ckg", 300_000)

        page.click("#own-summary > summary")
        page.set_input_files("#own-summary-file", str(summary_file))
        # a locator assertion, not wait_for_function: the page's CSP forbids the eval a string predicate needs
        expect(page.locator("#own-summary-text")).to_have_value(re.compile("great hall"), timeout=30_000)
        page.click("#btn-own-summary")
        _wait_for_step(page, "#summary:has-text('Three witches greet')", 120_000)
        assert page.locator("#summary-given").is_visible()
        assert "summarize" not in responder.calls  # the summarizer was skipped
        assert page.locator("#dl-summary").is_visible() and page.locator("#dl-result").is_hidden()

        page.click("#btn-score")
        _wait_for_step(page, ".iteration[data-iteration='0']", 180_000)
        assert "great hall" in page.locator(".iteration[data-iteration='0'] .sent.unsupported").inner_text()
        page.click("#btn-refine")
        _wait_for_step(page, ".iteration[data-iteration='1']", 180_000)
        page.wait_for_selector("#dl-result:not([hidden])")
        page.screenshot(path=str(tmp_path / "own-1-refined.png"), full_page=True)

        downloaded: dict[str, str] = {}
        for link in ("#dl-summary", "#dl-result", "#dl-report"):
            with page.expect_download() as info:
                page.click(link)
            download = info.value
            target = tmp_path / "downloads" / download.suggested_filename
            download.save_as(str(target))
            downloaded[link] = target.read_text(encoding="utf-8")
        assert downloaded["#dl-summary"].strip() == FIXED_SUMMARY  # the best round's, the refiner's
        result = json.loads(downloaded["#dl-result"])
        assert result["best_iteration"] == 1 and result["best_summary"] == FIXED_SUMMARY
        assert "<html" in downloaded["#dl-report"] and "Three witches greet" in downloaded["#dl-report"]
        assert not errors

    name = next((tmp_path / "runs").iterdir()).name
    for file, content_type in (
        ("summary.txt", "text/plain; charset=utf-8"),
        ("result.json", "application/json; charset=utf-8"),
        ("report.html", "text/html; charset=utf-8"),
    ):
        status, headers, _ = _raw_get(ui, f"/runs/{name}/download/{file}")
        assert status == 200 and headers["content-type"] == content_type
        assert headers["content-disposition"] == f'attachment; filename="{name}-{file}"'
        assert headers["x-content-type-options"] == "nosniff"
