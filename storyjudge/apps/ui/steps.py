"""The demo's four steps drive one ``refine`` graph (``graphs/refine.py``) on a checkpointed thread.

The graph is compiled with a SQLite checkpointer in the run directory and ``interrupt_before=PAUSES``; each
button runs the thread on to its next stop: ``graph`` (segment and index), ``summary`` (summarize, or the
user's own summary written as that node's update or the graph's input), ``score`` (factscore and assess),
``refine`` (one more round through the graph's own guards and stop rules). Pressing ``summary`` or ``score``
again forks the thread from its checkpoint before that node, so the rounds start afresh.

Each scoring starts a kept run (``storyjudge.core.keptruns``). ``result.json`` has one writer, the graph's
``finish`` node; while the thread is paused, ``report.html`` renders the record ``build_result`` makes of the
checkpoint's state. After every step the checkpoint's state is copied into ``ui.json`` for the page.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any

import prompts
from storyjudge.apps.ui.session import DOCUMENT_FILE, RunSession
from storyjudge.core.concurrency import graph_config
from storyjudge.core.context import Context
from storyjudge.core.keptruns import keep_run, new_run_id
from storyjudge.core.llm import require_models
from storyjudge.core.models import resolve_spec
from storyjudge.core.resultjson import build_result
from storyjudge.core.runrecord import load_run
from storyjudge.core.servercheck import check_server

ROLES_OF: dict[str, tuple[str, ...]] = {
    "graph": ("extractor",),
    "summary": ("summarizer",),
    "score": ("decomposer", "judge"),
    "refine": ("refiner", "decomposer", "judge"),
}
STEPS = tuple(ROLES_OF)
PAUSES = ("summarize", "factscore", "refine")
"""The refine graph's nodes the UI pauses before: the boundaries of its steps."""
STOPS = {"graph": "summarize", "summary": "factscore", "score": "refine", "refine": "refine"}
"""The node each step leaves the thread paused before (or at the graph's end)."""
PAUSED = "paused in the web UI before the next refinement"
"""The stop reason shown in the report of a paused thread (it has no result.json: the loop has not stopped)."""
ProgressFn = Callable[[dict[str, Any]], None]
MIN_SUMMARY_WORDS = 3


class StepRefused(ValueError):
    """A step cannot run yet (an earlier step is missing); the message says which to run first."""


def check_step(session: RunSession, step: str, given_summary: str = "") -> None:
    """Refuse a step whose inputs are not there, naming the button to press first."""
    if step not in STEPS:
        raise StepRefused(f"Unknown step {step!r}; steps are {', '.join(STEPS)}.")
    state = session.state
    if given_summary and step != "summary":
        raise StepRefused("A summary of your own is taken by the summary step only.")
    if given_summary and len(given_summary.split()) < MIN_SUMMARY_WORDS:
        raise StepRefused(
            f"Your summary has fewer than {MIN_SUMMARY_WORDS} words; paste or upload the summary to score."
        )
    if step == "score" and not (state.get("summary") or {}).get("text"):
        raise StepRefused("Generate the initial summary first.")
    if step == "refine":
        if not state.get("iterations"):
            raise StepRefused(
                "Compute the factuality score first: refinement works from the judge's feedback."
            )
        if not refinable(state):
            reason = state.get("stop_reason") or "the run has no refinement to continue"
            raise StepRefused(
                f"The refinement loop has stopped: {reason}. Generate the summary or compute the score "
                "again to start over."
            )
    roles = () if given_summary else ROLES_OF[step]  # a summary of one's own needs no summarizer
    if step == "summary" and not state.get("index"):
        roles = ("extractor", *roles)  # the thread starts with the index node
    ctx = session.context()
    require_models(ctx, roles)
    check_server(ctx, {resolve_spec(ctx, role) for role in roles})  # a dead server named now, not mid-step


def refinable(state: dict[str, Any]) -> bool:
    """Whether the run's thread is scored and waits for (or was cut off in) a refinement round."""
    return bool(state.get("iterations")) and bool(state.get("next"))


@contextmanager
def _refine_graph(session: RunSession) -> Iterator[Any]:
    """The refine graph, checkpointed in the run directory and paused at the UI's step boundaries."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from graphs.refine import build_graph
    from storyjudge.core.checkpointblobs import BlobSerializer

    with closing(sqlite3.connect(session.rd.checkpoints, check_same_thread=False)) as conn:
        saver = SqliteSaver(conn, serde=BlobSerializer(session.rd.checkpoint_blobs))
        yield build_graph(checkpointer=saver, interrupt_before=PAUSES)


def _thread_config(thread: str, ctx: Context) -> dict[str, Any]:
    return graph_config(ctx, configurable={"thread_id": thread})


def _mirror(session: RunSession, graph: Any, config: dict[str, Any], ctx: Context) -> None:
    """Copy the thread's state into ``ui.json`` for the page; refresh (or clear) result.json's report."""
    from storyjudge.apps.report import write_report
    from storyjudge.core.corrections import apply_corrections

    snapshot = graph.get_state(config)
    values: dict[str, Any] = dict(snapshot.values)
    corrections = run_corrections(session.state)
    iterations = apply_corrections(
        sorted(values.get("iterations") or [], key=lambda it: it["iteration"]), corrections
    )
    finished = snapshot.created_at is not None and not snapshot.next
    rd = session.rd
    with session.lock:
        state = session.state
        state.update({key: values[key] for key in ("scenes", "segmentation") if values.get(key)})
        state.update({key: values.get(key) or {} for key in ("ckg_stats", "usage", "timings")})
        state["index"] = values.get("index")
        # the summary the loop started from: iteration 0's, or the thread's before it is scored
        given = bool(state.get("summary_given"))
        text = str(iterations[0]["summary"] if iterations else values.get("summary") or "").strip()
        events = [] if given else [e for e in values.get("events") or [] if e.get("stage") != "refine"]
        summary = {"text": text, "events": events, "strategy": "given" if given else ctx.strategy}
        state["summary"] = summary if text else None
        state["iterations"] = iterations
        state["best_iteration"] = values.get("best_iteration") if iterations else None
        state["next"] = list(snapshot.next)
        state["stop_reason"] = values.get("stop_reason", "") if finished else ""
        session.save()
        if finished and rd.result.is_file():
            write_report(rd.root)  # the finish node wrote result.json
            record = load_run(rd.result).record()
        else:
            rd.result.unlink(missing_ok=True)  # an earlier thread's or branch's: this one has not stopped
            if not iterations:
                rd.report.unlink(missing_ok=True)
                return
            record = _record({**values, "iterations": iterations}, ctx, PAUSED)
            write_report(rd.root, record)
        if state.get("run_id") and iterations:
            record.update(iterations=iterations, corrections=corrections)
            _keep(session, str(state["run_id"]), record)


def _record(values: dict[str, Any], ctx: Context, stop_reason: str) -> dict[str, Any]:
    """The run record of a thread that has not stopped (``build_result``; the finish node writes the others)."""
    return build_result(
        {**values, "stop_reason": stop_reason}, ctx, prompt_versions=prompts.versions(ctx.prompt_dir)
    )


def _keep(session: RunSession, run_id: str, record: dict[str, Any]) -> None:
    """Keep a run's record beside the story's others, saying whose its summary is."""
    source = "given" if session.state.get("summary_given") else "generated"
    keep_run(session.rd.root, run_id, {**record, "summary_source": source})


def run_corrections(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The corrections a person made to the current run's verdicts."""
    return [c for c in state.get("corrections") or [] if c.get("run") == state.get("run_id")]


def correct_verdict(session: RunSession, iteration: int, fact_id: str, verdict: str, reason: str) -> None:
    """A person's correction of one verdict: recorded, the round's score recomputed, the run's record kept.

    While the loop waits to refine, the thread's round is replaced too, so the refiner reads the correction.
    """
    from storyjudge.core.corrections import WHO, apply_corrections, correct

    state = session.state
    rounds = {it["iteration"]: it for it in state.get("iterations") or []}
    if not state.get("run_id") or iteration not in rounds:
        raise StepRefused(f"No scored round {iteration} in this run; compute the factuality score first.")
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    correct(rounds[iteration]["factscore"], fact_id, verdict, reason, when=when)  # checks the correction
    entry = {
        "run": state["run_id"],
        "iteration": iteration,
        "fact_id": fact_id,
        "verdict": verdict,
        "reason": reason.strip(),
        "who": WHO,
        "when": when,
    }
    with session.lock:
        kept = [
            c
            for c in state.get("corrections") or []
            if (c.get("run"), c.get("iteration"), c.get("fact_id")) != (entry["run"], iteration, fact_id)
        ]
        session.update(corrections=[*kept, entry])
    ctx = session.context()
    config = _thread_config(str(state["thread"]), ctx)
    with _refine_graph(session) as graph:
        if refinable(session.state):
            snapshot = graph.get_state(config)
            mine = [it for it in snapshot.values.get("iterations") or [] if it["iteration"] == iteration]
            corrected = apply_corrections(mine, run_corrections(session.state))
            graph.update_state(config, {"iterations": corrected}, as_node="assess")
        _mirror(session, graph, config, ctx)


def run_step(session: RunSession, step: str, on_progress: ProgressFn, given_summary: str = "") -> None:
    """Run the thread on through one step (``given_summary``: the user's own, instead of the summarizer's)."""
    ctx = session.context()
    given_summary = given_summary.strip()
    state = session.state
    if step != "refine":  # a scoring starts a run of its own; the steps before it have none yet
        if not state.get("run_id") and state.get("iterations"):  # scored before runs were kept: keep it first
            values = {**state, "summary": (state.get("summary") or {}).get("text", "")}
            _keep(session, new_run_id("ui"), _record(values, ctx, state.get("stop_reason") or PAUSED))
        session.update(run_id=new_run_id("ui") if step == "score" else None)
    if step == "summary":
        session.update(summary_given=bool(given_summary))
    with _refine_graph(session) as graph:
        thread = state.get("thread")
        start: Any = None
        if thread and step == "refine":
            start = graph.get_state(_thread_config(thread, ctx))
        elif thread and step in ("summary", "score"):  # the newest checkpoint before the step, none scored
            node = "summarize" if step == "summary" else "factscore"
            history = graph.get_state_history(_thread_config(thread, ctx))
            start = next((s for s in history if s.next == (node,) and not s.values.get("iterations")), None)
        if step == "refine" and (start is None or not start.next):
            raise StepRefused("No refinement loop to continue: compute the factuality score again.")
        if given_summary and start is not None:  # paused before summarize: the user's summary is its update
            graph.update_state(start.config, {"summary": given_summary}, as_node="summarize")
            _mirror(session, graph, _thread_config(str(thread), ctx), ctx)
            return
        graph_input: dict[str, Any] | None = None
        if start is None:  # a new thread from the narrative (the LLM cache makes repeated calls free)
            thread = f"ui-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
            session.update(thread=thread)
            graph_input = {
                "document": (session.rd.root / DOCUMENT_FILE).read_text(encoding="utf-8"),
                "title": state["title"],
            }
            if given_summary:  # the refine graph skips summarize when its input has a summary
                graph_input["summary"] = given_summary
        config = _thread_config(str(thread), ctx)
        begin = {**config, "configurable": dict(start.config["configurable"])} if start else config
        try:  # on until the thread pauses before the step's stop, or ends
            while True:
                # subgraphs=True: the nodes that emit progress run inside the index, summarize and factscore graphs
                for _, chunk in graph.stream(
                    graph_input, config=begin, context=ctx, stream_mode="custom", subgraphs=True
                ):
                    if isinstance(chunk, dict) and "progress" in chunk:
                        on_progress(chunk["progress"])
                following = graph.get_state(config).next
                if not following or STOPS[step] in following:
                    break
                graph_input, begin = None, config
        finally:
            _mirror(session, graph, config, ctx)
    if step == "summary" and not (state.get("summary") or {}).get("text"):
        raise ValueError("The summarizer returned an empty summary; try again or choose another model.")
