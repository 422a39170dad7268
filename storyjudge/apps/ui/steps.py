"""The demo's four steps, each a call of the project's graphs, saved into the run when it ends.

1. ``graph``: the ``index`` graph (segmentation, CKG extraction, Chroma index) -> ``ckg.json``.
2. ``summary``: the ``summarize`` graph on the scenes -> the initial summary.
3. ``score``: the ``factscore`` graph with the index already in its input -> iteration 0 with its verdicts.
4. ``refine``: the refiner node on the best accepted iteration's flagged facts, then the ``factscore`` graph
   on the revised summary and the refine graph's guard (``nodes.guards``) -> the next iteration, accepted or
   not (with the reason in its note), with its score change.

After steps 3 and 4 the run record (``result.json``) and ``report.html`` are rewritten, so the run directory
is a complete run like one made by ``storyjudge refine``. Progress events of the graphs are passed to the
caller as they stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, cast

from langgraph.runtime import Runtime

import prompts
from storyjudge.apps.ui.session import RunSession
from storyjudge.core.concurrency import graph_config
from storyjudge.core.context import Context
from storyjudge.core.llm import require_models
from storyjudge.core.records import add_timings
from storyjudge.core.runrecord import build_result, write_result
from storyjudge.core.usage import merge_usage

Step = Literal["graph", "summary", "score", "refine"]
STEPS: tuple[Step, ...] = ("graph", "summary", "score", "refine")
ROLES_OF: dict[str, tuple[str, ...]] = {
    "graph": ("extractor",),
    "summary": ("summarizer",),
    "score": ("extractor", "decomposer", "judge"),
    "refine": ("refiner", "decomposer", "judge"),
}
ProgressFn = Callable[[dict[str, Any]], None]


class StepRefused(ValueError):
    """A step cannot run yet (an earlier step is missing); the message says which to run first."""


def check_step(session: RunSession, step: str) -> None:
    """Refuse a step whose inputs are not there, naming the button to press first."""
    if step not in STEPS:
        raise StepRefused(f"Unknown step {step!r}; steps are {', '.join(STEPS)}.")
    state = session.state
    if step == "score" and not (state.get("summary") or {}).get("text"):
        raise StepRefused("Generate the initial summary first.")
    if step == "refine":
        iterations = state.get("iterations") or []
        if not iterations:
            raise StepRefused(
                "Compute the factuality score first: refinement works from the judge's feedback."
            )
        if refine_base(iterations)["factscore"]["unsupported"] == 0:
            raise StepRefused("The best summary has no unsupported facts: there is nothing to refine.")
    require_models(session.context(), ROLES_OF[step])


def refine_base(iterations: list[dict[str, Any]]) -> dict[str, Any]:
    """The iteration the next refinement revises: the best accepted one (the latest when none is accepted)."""
    from nodes.loop import best_of

    best = best_of(iterations)  # type: ignore[arg-type]
    return dict(best) if best else max(iterations, key=lambda it: it["iteration"])


def _stream(graph: Any, graph_input: dict[str, Any], ctx: Context, on_progress: ProgressFn) -> dict[str, Any]:
    """Run a compiled graph, forwarding its progress events; returns its final output."""
    final: dict[str, Any] = {}
    config = graph_config(ctx)
    for mode, chunk in graph.stream(
        graph_input, config=config, context=ctx, stream_mode=["custom", "values"]
    ):
        if mode == "custom" and isinstance(chunk, dict) and "progress" in chunk:
            on_progress(chunk["progress"])
        elif mode == "values" and isinstance(chunk, dict):
            final = chunk
    return dict(final)


def _account(session: RunSession, output: dict[str, Any]) -> None:
    state = session.state
    state["usage"] = merge_usage(state.get("usage"), output.get("usage"))
    state["timings"] = add_timings(state.get("timings"), output.get("timings"))


def _keep_index(session: RunSession, output: dict[str, Any]) -> None:
    """Remember what the index graph produced (scenes, CKG, Chroma reference), wherever it ran."""
    state = session.state
    if output.get("index"):
        state["index"] = output["index"]
    if output.get("scenes"):
        state["scenes"] = output["scenes"]
    if output.get("segmentation"):
        state["segmentation"] = output["segmentation"]
    if output.get("ckg_stats"):
        state["ckg_stats"] = output["ckg_stats"]
    if output.get("ckg") is not None and output.get("index"):
        session.rd.write_json(session.rd.ckg, output["ckg"])


def build_knowledge_graph(session: RunSession, on_progress: ProgressFn) -> None:
    """Step 1: segment, extract the CKG and index the scenes."""
    from graphs.index import graph

    ctx = session.context()
    output = _stream(
        graph, {"document": session.document(), "title": session.state["title"]}, ctx, on_progress
    )
    with session.lock:
        _keep_index(session, output)
        _account(session, output)
        session.save()


def generate_summary(session: RunSession, on_progress: ProgressFn) -> None:
    """Step 2: the initial summary; a new one starts the iterations afresh (they judged the old one)."""
    from graphs.summarize import graph

    ctx = session.context()
    graph_input: dict[str, Any] = {"document": session.document()}
    if session.state.get("scenes"):
        graph_input["scenes"] = session.state["scenes"]
    output = _stream(graph, graph_input, ctx, on_progress)
    text = str(output.get("summary") or "").strip()
    if not text:
        raise ValueError("The summarizer returned an empty summary; try again or choose another model.")
    with session.lock:
        previous = (session.state.get("summary") or {}).get("text")
        session.state["summary"] = {
            "text": text,
            "events": output.get("events") or [],
            "strategy": ctx.strategy,
        }
        if previous != text:
            session.state["iterations"] = []
        _account(session, output)
        session.save()


def _score(
    session: RunSession, summary: str, iteration: int, ctx: Context, on_progress: ProgressFn
) -> dict[str, Any]:
    from graphs.factscore import graph

    state = session.state
    graph_input: dict[str, Any] = {
        "summary": summary,
        "document": session.document(),
        "title": state["title"],
        "iteration": iteration,
    }
    ckg = session.ckg()
    if state.get("index") and state.get("scenes") and ckg is not None:
        graph_input.update(scenes=state["scenes"], index=state["index"], ckg=ckg)
    output = _stream(graph, graph_input, ctx, on_progress)
    with session.lock:
        _keep_index(session, output)
        _account(session, output)
    card: dict[str, Any] = output["factscore"]
    return card


def _record(session: RunSession, iteration: dict[str, Any], ctx: Context) -> None:
    """Add an iteration, then rewrite result.json and report.html from the whole run."""
    from nodes.loop import best_of
    from storyjudge.apps.report import write_report

    with session.lock:
        state = session.state
        kept = [it for it in state.get("iterations") or [] if it["iteration"] < iteration["iteration"]]
        state["iterations"] = [*kept, iteration]
        session.save()
        best = best_of(state["iterations"])
        record = build_result(
            {
                "title": state["title"],
                "doc_hash": state["doc_hash"],
                "segmentation": state.get("segmentation", ""),
                "scenes": state.get("scenes") or [],
                "run_dir": str(session.rd.root),
                "ckg_stats": state.get("ckg_stats") or {},
                "events": (state.get("summary") or {}).get("events") or [],
                "iterations": state["iterations"],
                "best_iteration": best["iteration"] if best else None,
                "stop_reason": "interactive run in the web UI",
                "usage": state.get("usage") or {},
                "timings": state.get("timings") or {},
            },
            ctx,
            kind="ui",
            prompt_versions=prompts.versions(ctx.prompt_dir),
        )
        write_result(session.rd.root, record)
        write_report(session.rd.root)


def compute_score(session: RunSession, on_progress: ProgressFn) -> None:
    """Step 3: NarrativeFactScore of the initial summary (iteration 0; later iterations are dropped)."""
    from nodes.guards import guard_round

    ctx = session.context()
    summary = session.state["summary"]["text"]
    card = _score(session, summary, 0, ctx, on_progress)
    guard, _ = guard_round(summary, cast(Any, card), session.document(), revised=None, ctx=ctx)  # copy rate
    iteration = {
        "iteration": 0,
        "summary": summary,
        "factscore": card,
        "guard": guard,
        "accepted": True,
        "note": "",
    }
    _record(session, iteration, ctx)


def refine_summary(session: RunSession, on_progress: ProgressFn) -> None:
    """Step 4: revise the best accepted summary from its flagged facts, score the revision, apply the guard.

    The same refiner node and the same guard (``nodes.guards``) as the refine graph decide, so a round that
    drops supported facts, leaves its length budget or copies the narrative is recorded as not accepted, with
    the reason in its note, and the next refinement revises the best summary again.
    """
    from nodes.guards import guard_round, revised_iteration
    from nodes.refiner import refine

    ctx = session.context()
    iterations = list(session.state["iterations"])
    latest = max(iterations, key=lambda it: it["iteration"])
    on_progress({"stage": "refine", "total": 1, "advance": 0})
    update = refine(
        {
            "summary": latest["summary"],
            "factscore": latest["factscore"],
            "iteration": latest["iteration"],
            "iterations": iterations,
            "scenes": session.state.get("scenes") or [],
        },
        Runtime(context=ctx),
    )
    on_progress({"stage": "refine", "advance": 1})
    with session.lock:
        _account(session, update)
    number = int(update.get("iteration", latest["iteration"] + 1))
    summary = str(update["summary"])
    card = _score(session, summary, number, ctx, on_progress)
    revised = revised_iteration(iterations, update.get("refined_from"))
    guard, rejection = guard_round(summary, cast(Any, card), session.document(), revised=revised, ctx=ctx)
    notes = [str(e.get("event", "")) for e in update.get("events") or []]
    note = "; ".join(n for n in [*notes, rejection] if n)
    _record(
        session,
        {
            "iteration": number,
            "summary": summary,
            "factscore": card,
            "guard": guard,
            "accepted": not rejection,
            "note": note,
        },
        ctx,
    )


RUNNERS: dict[str, Callable[[RunSession, ProgressFn], None]] = {
    "graph": build_knowledge_graph,
    "summary": generate_summary,
    "score": compute_score,
    "refine": refine_summary,
}
