"""``storyjudge refine`` (the main job) and ``storyjudge score``: resumable runs with a run record."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

import prompts
from storyjudge.apps.cli.common import console, fail, read_text_file, say, text_table
from storyjudge.apps.cli.options import run_settings
from storyjudge.apps.cli.run import GraphCommand, Job, Run, add_graph_command
from storyjudge.core.context import ROLES, Context
from storyjudge.core.coverage import UNRELIABLE, card_reliable, check_verdict, describe, describe_card
from storyjudge.core.keptruns import keep_run, new_run_id, runs_folder
from storyjudge.core.models import is_local, resolve_spec
from storyjudge.core.resultjson import build_result, write_result
from storyjudge.core.rundir import RunDir, default_run_dir
from storyjudge.core.runrecord import load_run
from storyjudge.core.usage import cost_text, run_usage, totals

FileArg = Annotated[Path, typer.Argument(help="Narrative: .txt / .md, or a JSON list of scenes.")]
# what the narrative's judging uses, in both commands
JUDGING = (
    *("run_dir", "chunk_size", "ckg_samples", "predicate_threshold", "predicate_min_count", "embedder"),
    *("retrieval_k", "evidence_tokens", "coverage_floor", "nfs_unjudged", "planted_facts"),
    *("max_false_acceptance", "metrics"),
)
JUDGE_ROLES = ("extractor", "decomposer", "judge")
REFINE_ROLES = ("extractor", "summarizer", "decomposer", "judge", "refiner", "coherence")


def _read_document(path: Path, **given: Any) -> Job:
    """A job on the narrative at ``path``; ``given``: the rest of the graph's input."""
    text, _ = read_text_file(path)
    if len(text.split()) < 3:
        fail(f"{path} has fewer than 3 words; give a narrative to summarize.")
    return Job({"document": text, "title": path.stem, **given}, source=path, text=text, title=path.stem)


def _read_refine(
    file: FileArg,
    summary: Annotated[
        Path | None,
        typer.Option(
            help="Start from this summary instead of generating one. Default: generate one.",
            rich_help_panel="Method",
        ),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Also print every round's summary on standard error. Default: off.",
            rich_help_panel="Output",
        ),
    ] = False,
) -> Job:
    job = _read_document(file, started_at=time.time())
    if summary is not None:
        job.graph_input["summary"] = read_text_file(summary, "summary")[0]
    return replace(job, extra={"verbose": verbose})


def _read_score(
    file: FileArg, summary: Annotated[Path, typer.Option(help="The summary to score (text file).")]
) -> Job:
    summary_text, _ = read_text_file(summary, "summary")
    return _read_document(file, summary=summary_text)


def _outcome(it: dict[str, Any], best: int | None) -> str:
    """A round's fate: the best, accepted, rejected (by a guard), or that its score does not count."""
    if it["iteration"] == best:
        return "best"
    if not it.get("accepted", True):
        return "rejected"
    return "accepted" if it["factscore"].get("reliable", True) is not False else UNRELIABLE


def _score_table(iterations: list[dict[str, Any]], best: int | None) -> Table:
    """One row per round (given in order), within 80 columns; each column as wide as its longest word."""
    table = Table(
        title="NarrativeFactScore per round",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    with_coherence = any(it.get("coherence") for it in iterations)
    columns = ["round", "NFS", "coverage", "supported", "unsupported", "unjudged"]
    for column in [*columns, *(["coherence"] if with_coherence else []), "outcome"]:
        # the columns of words wrap at "reliable", the longest word they hold; a header is never cut
        wraps = column in ("NFS", "coherence", "outcome")
        width = max(len(column), len("reliable"))
        table.add_column(column, justify="left" if wraps else "right", max_width=width if wraps else None)
    for it in iterations:
        card = it["factscore"]
        row = [
            str(it["iteration"]),
            describe(card["score"], None, card.get("reliable")),
            f"{card.get('coverage', 0.0):.0%}",
            *(str(card[key]) for key in ("supported", "unsupported", "unjudged")),
        ]
        if with_coherence:
            coherence = it.get("coherence")
            row.append(
                describe(coherence.get("score"), None, coherence.get("reliable")) if coherence else "-"
            )
        table.add_row(*row, _outcome(it, best))
    return table


def _round_notes(iterations: list[dict[str, Any]]) -> list[str]:
    return [f"round {it['iteration']}: {it['note']}" for it in iterations if it.get("note")]


def _nfs_line(card: dict[str, Any]) -> str:
    """The score with its interval and coverage: what was judged and what was not."""
    missing = card.get("decompose_failures", 0)
    not_split = f", {missing} sentence(s) not decomposed" if missing else ""
    check = card.get("judge_check")
    judge = f"; {check['note']}" if check else ""
    interval = _interval(card.get("score_ci95"), card.get("score_ci95_over")) if card_reliable(card) else ""
    return (
        f"NarrativeFactScore {describe_card(card)}{interval}: "
        f"{card['supported']} supported, {card['unsupported']} unsupported, {card['unjudged']} unjudged of "
        f"{card['facts']} facts{not_split}{judge}{_corrected_text(card)}"
    )


def _corrected_text(card: dict[str, Any]) -> str:
    """The judge-corrected estimate beside the paper's score ("" on cards without a judge check)."""
    if "score_corrected_note" not in card:
        return ""
    value = card.get("score_corrected")
    if value is None:
        return f"; judge-corrected NFS: none ({card['score_corrected_note']})"
    interval = _interval(card.get("score_corrected_ci95"), card.get("score_corrected_ci95_over"))
    return f"; judge-corrected NFS {value:.3f}{interval} ({card['score_corrected_note']})"


def _interval(ci: list[float] | None, over: Any) -> str:
    return f" [95% CI {ci[0]:.3f}, {ci[1]:.3f} over {over}]" if ci else ""


def _judge_line(iteration: int, card: dict[str, Any], said: str = "") -> str:
    """The judge's record on the round's planted facts, in words ("" when nothing was planted).

    What the round's note already ``said`` of the check is not said again.
    """
    check = card.get("judge_check")
    if not check:
        return ""
    verdict = check_verdict(check)
    consequence = "" if verdict == "passed" else f"; {verdict}"
    ci = check.get("false_acceptance_ci95")
    false = (
        f"false facts accepted {check['false_acceptance']:.0%} [95% CI {ci[0]:.0%}, {ci[1]:.0%} over "
        f"{check['easy']['judged'] + check['hard']['judged']} planted false facts]"
        if ci and check.get("false_acceptance") is not None
        else ""
    )
    if false and check["note"] in said:  # only the figures are new; with none, the note is kept
        told = false
    else:
        told = "; ".join(filter(None, (check["note"], false)))
    rule = (check.get("rule") or {}).get("text") or (
        f"at most {check.get('max_false_acceptance', 0):.0%} may be accepted"
    )
    return f"Judge check, round {iteration}: {told} ({rule}){consequence}"


def _write_refine(run: Run) -> None:
    """Show what the finish node recorded in result.json: the best summary (``--json``: the record) on stdout."""
    rd, final = run.rd, run.final
    assert rd is not None
    if not rd.result.exists():
        fail(f"The run stopped before writing {rd.result}; run the same command with --resume to finish it.")
    _restore_own_record(rd)
    summary = final.get("summary", "")
    record = load_run(rd.result).record()
    source = "given" if "summary" in run.job.graph_input else "generated"
    report = _write_and_keep(rd, "refine", summary, {**record, "summary_source": source})
    iterations = sorted(final.get("iterations") or [], key=lambda i: i["iteration"])
    if run.job.extra.get("verbose"):
        for it in iterations:
            nfs = describe_card(it["factscore"])
            console.print(Panel(it["summary"], title=f"round {it['iteration']}: NFS {nfs}", expand=False))
    console.print(_score_table(iterations, final.get("best_iteration")))
    judge_lines = (_judge_line(it["iteration"], it["factscore"], it.get("note") or "") for it in iterations)
    for line in [*_round_notes(iterations), *filter(None, judge_lines)]:
        say(line, soft_wrap=False)  # wrapped to the terminal
    usage = totals(run_usage(str(rd.root), final.get("usage")))  # every attempt, resumed parts included
    last = max((it["iteration"] for it in iterations), default=0)
    say(f"Stopped after round {last}: {final.get('stop_reason', '?')}.", soft_wrap=False)
    best = [it for it in iterations if it["iteration"] == final.get("best_iteration")]
    if best:
        card = best[0]["factscore"]
        nfs = describe(card["score"], card.get("coverage"), card.get("reliable"))
        say(f"Best: round {best[0]['iteration']}, NFS {nfs}.", soft_wrap=False)
        _print_metrics(best[0])
    console.print(
        f"LLM calls {usage['calls']} (cache hits {usage['cache_hits']}, failures {usage['failures']}), "
        f"tokens {usage['input_tokens']} in / {usage['output_tokens']} out, est. {cost_text(final.get('usage'))}; "
        f"wall {run.seconds:.2f}s",
        highlight=False,
    )
    _print_paths(rd, report)
    for line in embedded_model_note(run.ctx, final, run.job.source):
        say(line)
    run.show(json.loads(rd.result.read_text(encoding="utf-8")), summary)


def embedded_model_note(ctx: Context, final: dict[str, Any], source: Path | None) -> list[str]:
    """What the embedded demo model could not do in this run, and the command that shows it with a real one."""
    if not any(is_local(resolve_spec(ctx, role)) for role in ROLES):
        return []
    could_not = []
    stats = final.get("ckg_stats") or {}
    if not stats.get("characters"):
        where = f"the {stats['scenes']} scenes" if stats.get("scenes") else "the story"
        could_not.append(
            f"it extracted no characters from {where} (its answers were unreadable or empty), so the judge read "
            "the scenes without a character graph"
        )
    iterations = final.get("iterations") or []
    checks = [(it.get("factscore") or {}).get("judge_check") or {} for it in iterations]
    failed = [check for check in checks if check.get("passed") is False]
    if failed:
        note = failed[0].get("note", "")
        could_not.append(
            f"its judge failed the judge check ({note}): it accepts false facts, so no score it gave is reliable"
        )
    if len(iterations) <= 1:
        could_not.append(f"no refinement round ran (stopped: {final.get('stop_reason') or '?'})")
    if not could_not:
        return []
    story = shlex.quote(str(source)) if source else "STORY"
    return [
        "What the embedded demo model could not do here:",
        *(f"  - {line};" for line in could_not),
        "To see the same run with a refinement round, give it a real model: with OPENAI_API_KEY set,",
        f"  storyjudge refine {story} --model openai:gpt-4o-mini --max-iterations 2",
        "  or any OpenAI-compatible server (vLLM, llama.cpp, Ollama): add --base-url http://HOST:PORT/v1 "
        "--model openai:NAME.",
    ]


def _restore_own_record(rd: RunDir) -> None:
    """A finished refine run's own record back on top of the story's folder (another kind may have replaced it)."""
    try:
        on_top = json.loads(rd.result.read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        on_top = None
    own = RunDir(runs_folder(rd.root) / str(rd.read_meta().get("refine_thread") or "-")).result
    if on_top != "refine" and own.is_file():
        rd.write_json(rd.result, json.loads(own.read_text(encoding="utf-8")))


def _write_and_keep(rd: RunDir, kind: str, summary: str, record: dict[str, Any]) -> bool:
    """Write the summary and report.html and keep the run in ``runs/<thread>/``; whether the report was written."""
    rd.summary.write_text(summary.rstrip("\n") + "\n", encoding="utf-8")
    report = _write_report(rd)
    run_id = str(rd.read_meta().get(f"{kind}_thread") or new_run_id(kind))
    kept = keep_run(rd.root, run_id, record)
    _write_report(kept)
    say(f"Kept as run {run_id}: {kept.root}")
    return report


def _print_metrics(round_: dict[str, Any]) -> None:
    for name, card in (round_.get("metrics") or {}).items():
        say(f"{name}: {card.get('headline', '')}", soft_wrap=False)


def _print_paths(rd: RunDir, report: bool) -> None:
    say(f"Run record: {rd.result}")
    if report:
        say(f"Report: {rd.report}")
    say(f"Summary: {rd.summary}")


def _write_score(run: Run) -> None:
    """Write the score's run record (the factscore graph has no finish node); the score line on stdout."""
    rd, final, summary_text = run.rd, run.final, run.job.graph_input["summary"]
    assert rd is not None
    card = final["factscore"]
    iteration = {"iteration": 0, "summary": summary_text, "factscore": card, "accepted": True, "note": ""}
    if final.get("metrics"):
        iteration["metrics"] = final["metrics"]
    result = build_result(
        {**final, "iterations": [iteration], "best_iteration": 0},
        run.ctx,
        kind="score",
        prompt_versions=prompts.versions(run.ctx.prompt_dir),
    )
    result["wall_seconds"] = round(run.seconds, 2)
    write_result(rd.root, result)
    report = _write_and_keep(rd, "score", summary_text, {**result, "summary_source": "given"})
    rows = (  # the model's words: text, never markup
        (
            escape(verdict["fact"]["text"]),
            verdict["status"],
            escape(verdict["feedback"] or verdict.get("error", "")),
        )
        for verdict in card["verdicts"]
    )
    console.print(text_table("Atomic facts", ("fact", "verdict", "feedback"), rows))
    _print_metrics(iteration)
    _print_paths(rd, report)
    run.show(result, f"{_nfs_line(card)}.")


def _estimate(job: Job, ctx: Context, task: str) -> dict[str, Any]:
    """--dry-run: the LLM calls, tokens and cost the run would take."""
    from eval.estimate import estimate_run

    run_dir = ctx.run_dir or default_run_dir(job.title, job.doc_hash)  # where earlier runs measured latency
    return estimate_run(ctx, task, job.text, job.graph_input.get("summary", ""), run_dir=run_dir)


REFINING = (
    *run_settings(*REFINE_ROLES),
    *JUDGING,
    *("strategy", "max_summary_tokens", "max_iterations", "target_score", "min_delta", "patience"),
    *("refine_guard", "coherence_guard", "coherence_margin", "planted_sentences"),
)
add_graph_command(
    GraphCommand(
        "refine",
        lambda ctx: REFINE_ROLES if ctx.coherence_guard else REFINE_ROLES[:-1],  # the last: coherence
        REFINING,
        _read_refine,
        _write_refine,
        checkpointed=True,
        estimate=lambda job, ctx: _estimate(job, ctx, "refine"),
    )
)
SCORING = (*run_settings(*JUDGE_ROLES), *JUDGING)
add_graph_command(
    GraphCommand(
        "score",
        JUDGE_ROLES,
        SCORING,
        _read_score,
        _write_score,
        graph="factscore",
        checkpointed=True,
        estimate=lambda job, ctx: _estimate(job, ctx, "score"),
    )
)


def _write_report(rd: RunDir) -> bool:
    """Render report.html; whether it was written."""
    from storyjudge.apps.report import write_report

    try:
        write_report(rd.root)
    except Exception as exc:  # noqa: BLE001 - a report failure must not lose the run
        console.print(f"[yellow]report.html not written: {escape(str(exc))}[/]")
        return False
    return True
