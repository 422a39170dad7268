"""``storyjudge coherence``: BooookScore of one summary (a text file) or of many (a JSONL file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from storyjudge.apps.cli.common import console, fail, read_text_file, say, text_table, write_out
from storyjudge.apps.cli.options import run_settings
from storyjudge.apps.cli.run import GraphCommand, Job, Run, add_graph_command
from storyjudge.core.coverage import check_verdict, describe, describe_card
from storyjudge.core.usage import totals

OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write scores and every sentence's annotation and raw answer to this JSON file. Default: none.",
    ),
]


LINE_FORM = '{"id": ..., "summary": ...}'


def read_summaries(path: Path) -> dict[str, Any]:
    """The graph input: one summary, or JSONL {"id", "summary"} lines (``"sentences"``: already split)."""
    text, _ = read_text_file(path, "summary")
    first = text.lstrip()[:1]
    if path.suffix.lower() != ".jsonl" and first != "{":
        return {"summary": text}
    summaries: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            fail(f"{path}:{number} is not valid JSON ({exc.msg}); each line must be {LINE_FORM}.")
        if not isinstance(item, dict) or not isinstance(item.get("summary"), str):
            fail(f'{path}:{number} needs a "summary" string; each line must be {LINE_FORM}.')
        entry: dict[str, Any] = {"id": str(item.get("id", number)), "summary": item["summary"]}
        if "sentences" in item:
            given = item["sentences"]
            if not isinstance(given, list) or not all(isinstance(s, str) for s in given):
                fail(f'{path}:{number} has "sentences" that is not a list of strings.')
            entry["sentences"] = given
        summaries.append(entry)
    if not summaries:
        fail(f"{path} holds no summaries; give one {LINE_FORM} object per line.")
    return {"summaries": summaries}


def _print(result: dict[str, Any]) -> None:
    summaries = result["summaries"]
    many = len(summaries) > 1
    given = result.get("sentences_given", 0)
    split = result.get("sentence_splitter", "?") if not given else f"sentences given for {given}"
    prompt = result.get("prompt") or {}
    mode = result["mode"] + (" (the paper's setting)" if result["mode"] == "per-sentence" else "")
    used = f"prompt {prompt.get('name', '?')} v{prompt.get('version', '?')} sha256 {prompt.get('sha256', '')[:12]}"
    rows = (
        (
            escape(s["id"]),
            describe(s["score"], None, s.get("reliable")),
            f"{s.get('coverage', 0.0):.0%}",
            *map(str, (s["sentences"], s["confused"], s["unparsed"] + s.get("missing", 0))),
        )
        for s in summaries
    )
    columns = ("summary", "score", "coverage", "sentences", "confused", "unparsed")
    caption = f"{mode}; {used}; model {result['model']}"
    console.print(text_table(f"BooookScore, split: {split}", columns, rows, caption=caption))
    floor = result.get("coverage_floor", 0.0)
    if many:
        boot = result["bootstrap"]
        interval = (
            f"bootstrap std {boot['std']:.4f}, 95% CI [{boot['ci95'][0]:.3f}, {boot['ci95'][1]:.3f}] over "
            f"{boot.get('over', str(boot['n']) + ' summaries')} ({boot['resamples']} resamples, seed {boot['seed']})"
            if boot["std"] is not None
            else f"no bootstrap: {boot.get('note', '')}"
        )
        excluded = result.get("excluded_summaries", 0)
        plural = "summary" if excluded == 1 else "summaries"
        left_out = f"; {excluded} {plural} below the coverage floor left out" if excluded else ""
        console.print(
            f"System score {describe(result['system_score'], result.get('coverage'), result.get('reliable'))}"
            f"{left_out}; {interval}"
        )
    elif summaries and summaries[0].get("ci95") and summaries[0].get("reliable"):
        one = summaries[0]
        console.print(
            f"BooookScore 95% CI [{one['ci95'][0]:.3f}, {one['ci95'][1]:.3f}] over {one['ci95_over']}"
        )
    for s in (s for s in summaries if s.get("annotator_check")):
        check = s["annotator_check"]
        say(
            f"Annotator check, {s['id'] + ': ' if many else ''}{check['note']} (at most "
            f"{check['max_false_acceptance']:.0%} may pass as clear; {check_verdict(check)})"
        )
    if not result.get("reliable", True) and result.get("coverage", 0.0) + 1e-12 < floor:
        console.print(
            f"[yellow]Not reliable: {result['scored']} of {result['sentences']} sentences got a readable answer "
            f"(coverage {result.get('coverage', 0.0):.0%} < floor {floor:.0%}); no score is reported.[/]"
        )
    rates = [f"{name} {rate:.3f}" for name, rate in result["per_type_rates"].items() if rate]
    console.print("Errors per sentence by type: " + (", ".join(rates) if rates else "none"))
    annotated = [(s["id"], a) for s in summaries for a in s["annotations"]]
    flagged = [(summary_id, a) for summary_id, a in annotated if a["confused"]]
    if flagged:
        console.print("\n[bold]Flagged sentences[/]")
    for summary_id, ann in flagged:
        number = f"#{ann['index'] + 1}"
        console.print(
            f"[bold]{escape(f'{summary_id} {number}' if many else number)}[/] {escape(ann['sentence'])}"
        )
        console.print(
            f"    types: {', '.join(ann['types'] + ann.get('other_types', [])) or '-'}", markup=False
        )
        for question in ann["questions"]:
            console.print(f"    ? {escape(question)}")
    unparsed = [(summary_id, a) for summary_id, a in annotated if a["confused"] is None]
    if unparsed:
        console.print(
            f"\n[yellow]{len(unparsed)} sentence(s) got no readable answer (left out of the score):[/]"
        )
    for summary_id, ann in unparsed:
        console.print(f"  {escape(summary_id)} #{ann['index'] + 1}: {escape(ann.get('error', ''))}")
    usage = result["usage_totals"]
    console.print(
        f"{usage['calls']} calls ({usage['cache_hits']} cached), {usage['input_tokens']} prompt / "
        f"{usage['output_tokens']} completion tokens, {result['timings'].get('coherence', 0.0):.1f}s"
    )


def _read(
    input_path: Annotated[
        Path,
        typer.Argument(
            help='A text file with one summary, or a JSONL file of {"id", "summary"} lines; - reads standard input.'
        ),
    ],
    out_path: OutOpt = None,
) -> Job:
    if out_path is not None:  # checked before any call is made
        if out_path.is_dir():
            fail(f"--out {out_path} is a directory; give the path of a JSON file to write.")
        parent = next((p for p in out_path.parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            fail(f"--out {out_path} is under {parent}, which is a file; choose another --out path.")
    return Job(read_summaries(input_path), extra={"out": out_path})


def _write(run: Run) -> None:
    """The result record (``--out``): scores, every sentence's annotation with its raw answer, usage, settings."""
    final = run.final
    coherence = dict(final["coherence"])
    by_summary: dict[str, list[dict[str, Any]]] = {}
    for ann in sorted(final.get("annotations", []), key=lambda a: (a["summary_id"], a["index"])):
        entry = {k: v for k, v in ann.items() if k not in ("run", "summary_id")}
        by_summary.setdefault(ann["summary_id"], []).append(entry)
    summaries = [{**s, "annotations": by_summary.get(s["id"], [])} for s in coherence.pop("summaries")]
    result = {
        **coherence,
        "summaries": summaries,
        "usage": final.get("usage", {}),
        "usage_totals": totals(final.get("usage")),
        "timings": final.get("timings", {}),
        "settings": {
            key: getattr(run.ctx, key) for key in ("preset", "preset_applied", "prompt_dir", "temperature")
        },
    }
    _print(result)
    out_path: Path | None = run.job.extra["out"]
    if out_path is not None:
        write_out(out_path, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        console.print(f"Wrote {out_path}", markup=False)
    if len(summaries) == 1:
        line = f"BooookScore {describe_card(summaries[0])}"
    else:
        score = describe(result["system_score"], result.get("coverage"), result.get("reliable"))
        line = f"BooookScore (system) {score} over {len(summaries)} summaries"
    run.show(result, line)


SETTINGS = (
    *run_settings("coherence"),
    *("batched_coherence", "sentence_splitter", "repeated_sentences", "coverage_floor", "planted_sentences"),
    "max_false_acceptance",
)
add_graph_command(GraphCommand("coherence", ("coherence",), SETTINGS, _read, _write, run_dir=False))
