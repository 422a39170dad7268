"""The run page: the headline (the chosen round in words), the whole report, and ``report.html`` written."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storyjudge.apps.report.assets import CSP, environment, inline_asset, write_page
from storyjudge.apps.report.ckg import graph_view
from storyjudge.apps.report.curve import curve_view
from storyjudge.apps.report.rounds import round_views
from storyjudge.core.coverage import card_reliable, describe, reliability_text
from storyjudge.core.keptruns import RUNS_FOLDER
from storyjudge.core.rundir import RunDir
from storyjudge.core.runrecord import load_run


@dataclass
class Headline:
    """What a reader needs first, in words: the chosen round's score, its coverage, whether it counts, the stop."""

    iteration: int
    score: str  # "0.889", or the words of ``core.coverage.describe``: an unreliable score is never a number
    coverage: str
    reliable: bool
    reliability: str  # ``core.coverage.reliability_text``: "reliable", or why it does not count
    stop: str
    chosen: str  # how the round was chosen


FALLBACK = "the first round: no round was reliable and accepted"
SHOWN_SETTINGS = (
    *("preset", "prompt_dir", "base_url", "ckg_samples", "predicate_threshold", "retrieval_k", "strategy"),
    *("chunk_size", "max_summary_tokens", "target_score", "min_delta", "patience", "max_iterations"),
    "coherence_guard",
)
"""The settings the report lists (those the run set)."""


def headline(
    iterations: list[dict[str, Any]], best_iteration: int | None, stop_reason: str
) -> Headline | None:
    """The headline of a run: its best round (else its first, as the loop falls back) in plain words."""
    if not iterations:
        return None
    by_number = {int(it.get("iteration", 0)): it for it in iterations}
    chosen = by_number.get(best_iteration) if best_iteration is not None else None
    if chosen is None or not card_reliable(chosen.get("factscore") or {}) or not chosen.get("accepted", True):
        how = FALLBACK  # the loop's fallback
    else:
        how = "the only round" if len(iterations) == 1 else f"the best of {len(iterations)} rounds"
    it = chosen or by_number[min(by_number)]
    card = it.get("factscore") or {}
    reliable = card_reliable(card)
    coverage = card.get("coverage")
    return Headline(
        iteration=int(it.get("iteration", 0)),
        score=describe(card.get("score"), None, reliable),
        coverage="coverage n/a" if coverage is None else f"coverage {float(coverage):.0%}",
        reliable=reliable,
        reliability=reliability_text(card),
        stop=stop_reason or ("not refined" if len(iterations) == 1 else "n/a"),
        chosen=how,
    )


def render_report(result: dict[str, Any], ckg: dict[str, Any] | None) -> str:
    """The whole report page for a run record and its CKG."""
    iterations = sorted(result.get("iterations") or [], key=lambda it: int(it.get("iteration", 0)))
    best = result.get("best_iteration")
    top = headline(iterations, best, str(result.get("stop_reason") or ""))
    counted = best if top is not None and top.chosen != FALLBACK else None  # the loop's fallback is no "best"
    numbers = [int(it.get("iteration", 0)) for it in iterations]
    views = round_views(
        iterations,
        passages=result.get("passages") or {},
        best=counted,
        order=sorted(numbers, key=lambda n: (n != best, n)),
    )
    usage = result.get("usage") or {}
    context = result.get("context") or {}
    template = environment().get_template("report.html.j2")
    return template.render(
        csp=CSP,
        css=inline_asset("report.css"),
        js=inline_asset("report.js"),
        result=result,
        document=result.get("document") or {},
        context=context,
        models=sorted((context.get("resolved_models") or {}).items()),
        settings=[(name, context[name]) for name in SHOWN_SETTINGS if context.get(name) not in ("", None)],
        prompts=sorted((result.get("prompts") or {}).items()),
        ckg=graph_view(ckg) if ckg else None,
        ckg_stats=result.get("ckg_stats") or {},
        iterations=views,
        curve=curve_view(iterations, counted) if iterations else None,
        headline=top,
        by_model=sorted((usage.get("by_model") or {}).items()),
        total=usage.get("total") or {},
        timings=sorted((result.get("timings") or {}).items(), key=lambda kv: -float(kv[1] or 0)),
        events=result.get("initial_summary_events") or [],
    )


def write_report(run_dir: str | Path, result: dict[str, Any] | None = None) -> Path:
    """Render ``report.html`` from a run directory's ``result.json`` (else ``result``, a paused run's) and CKG.

    Raises:
        FileNotFoundError: no ``result`` given and no ``result.json`` there (nothing was scored yet).
    """
    rd = RunDir(Path(run_dir))
    if result is None:
        if not rd.result.is_file():
            raise FileNotFoundError(
                f"{rd.root} has no result.json; run 'storyjudge refine' or 'score' into it first."
            )
        result = load_run(rd.result).record()  # RunRecordError: one line naming the file and field
    story = RunDir(rd.root.parent.parent)  # a kept run (``<story>/runs/<id>/``) draws its story's CKG
    kept = rd.root.parent.name == RUNS_FOLDER and story.meta.is_file()
    ckg_file = story.ckg if kept and not rd.ckg.is_file() else rd.ckg
    ckg = json.loads(ckg_file.read_text(encoding="utf-8")) if ckg_file.is_file() else None
    return write_page(rd.report, render_report(result, ckg))
