"""Summaries of one story side by side: scores with intervals, the pairs' differences, and the facts that differ.

Each summary is a round of a kept run (``storyjudge.core.keptruns``); every summary after the first is set
against the first. NFS intervals resample summary sentences (a sentence's facts share its evidence and the
judge's habits), BooookScore's the scored sentences. The two summaries' facts are aligned one to one (words and
evidence scenes in common); with enough aligned facts the difference is paired, otherwise unpaired, and it says
so. A pair judged differently, or with a side whose score does not count, gets no difference, only why.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from storyjudge.core.corrections import uncorrected
from storyjudge.core.coverage import card_reliable, describe, describe_card, reliability_text
from storyjudge.core.intervals import (
    aligned_difference_interval,
    difference_interval,
    interval_text,
    mean_interval,
    over,
    ratio_difference_interval,
    ratio_interval,
    signed_text,
)
from storyjudge.core.keptruns import RunRef, Summary, load_summary
from storyjudge.core.passages import span_text
from storyjudge.core.summary_stats import words
from storyjudge.core.usage import cost_text

COUNTERPART = 0.3
"""Below this the nearest fact is no counterpart at all."""
MIN_PAIRS = 10
"""Fewest aligned facts for a paired difference (and they must cover half of the smaller summary's facts)."""
_WORD = re.compile(r"[a-z0-9']+")
VALUE = {"supported": 1.0, "unsupported": 0.0}
"""A judged verdict as the difference intervals count it (an unjudged one has none)."""


def sentence_counts(card: Mapping[str, Any]) -> tuple[list[float], list[float]]:
    """Supported and judged facts per summary sentence that has judged facts: the units NFS intervals resample."""
    by_sentence: dict[int, list[float]] = {}
    for v in card.get("verdicts") or []:
        value = VALUE.get(v.get("status", ""))
        if value is not None:
            by_sentence.setdefault(int(v["fact"].get("sentence_index", 0)), []).append(value)
    rows = [by_sentence[i] for i in sorted(by_sentence)]
    return [sum(r) for r in rows], [float(len(r)) for r in rows]


def _sentence_values(round_: dict[str, Any]) -> list[float] | None:
    """BooookScore's scored sentences of a round as 1 (clean) / 0 (confused); None when it was not scored."""
    rows = (round_.get("coherence") or {}).get("summaries") or []
    clean, confused = (sum(int(r.get(kind, 0)) for r in rows) for kind in ("clean", "confused"))
    return [1.0] * clean + [0.0] * confused if rows else None


def summary_view(summary: Summary) -> dict[str, Any]:
    """One summary's figures: scores with intervals, coverage, words, models, calls and cost."""
    round_, record = summary.round, summary.record
    card = round_.get("factscore") or {}
    supported, judged = sentence_counts(card)
    nfs_ci = card["score_ci95"] if "score_ci95" in card else ratio_interval(supported, judged)
    sentences = _sentence_values(round_)
    coherence = round_.get("coherence") or {}
    usage = record.get("usage") or {}
    models = (record.get("context") or {}).get("resolved_models") or {}
    prompts = record.get("prompts") or {}
    corrections = int(card.get("corrections") or 0)
    judges = None
    if corrections:  # the judge's own score beside the one a person corrected
        own = uncorrected(card)
        judges = {
            "score": own.get("score"),
            "ci95": ratio_interval(*sentence_counts(own)),
            "reliable": card_reliable(own),
        }
    return {
        "label": summary.ref.label,
        "path": str(summary.ref.path),
        "run_id": record.get("run_id", ""),
        "round": round_.get("iteration"),
        "rounds": [it.get("iteration") for it in record.get("iterations") or []],
        "best_round": record.get("best_iteration"),
        "summary_source": record.get("summary_source", ""),
        "summary": round_.get("summary", ""),
        "words": len(words(str(round_.get("summary") or ""))),
        "nfs": {
            "score": card.get("score"),
            "ci95": nfs_ci,
            "over": over(len(judged), "sentence"),
            "sentences": len(judged),
            "judged": int(sum(judged)),
            "corrected": card.get("score_corrected"),
            "corrected_ci95": card.get("score_corrected_ci95"),
            "corrected_note": card.get("score_corrected_note"),
        },
        "corrections": corrections,
        "nfs_without_corrections": judges,
        **{key: card.get(key) for key in ("facts", "supported", "unsupported", "unjudged", "coverage")},
        "reliable": card_reliable(card),
        "reliability": reliability_text(card),
        "headline": describe_card(card),  # the card in words (``core.coverage``), as every surface shows it
        "stop_reason": str(record.get("stop_reason") or ""),
        "booookscore": None
        if not coherence
        else {
            "score": coherence.get("score"),
            "ci95": None if sentences is None else mean_interval(sentences)["ci95"],
            "scored": None if sentences is None else len(sentences),
            "over": None if sentences is None else over(len(sentences), "sentence"),
            "coverage": coherence.get("coverage"),
            "reliable": coherence.get("reliable"),
        },
        "metrics": dict(round_.get("metrics") or {}),  # added metrics' cards, each with its headline
        "models": dict(sorted(models.items())),
        "judging": {  # what makes two scores comparable
            **{f"{role} model": str(models.get(role, "?")) for role in ("decomposer", "judge")},
            **{f"{name} prompt": str(prompts.get(name, "?")) for name in ("decompose", "judge")},
        },
        "calls": (usage.get("total") or {}).get("calls"),
        "cost": cost_text(usage.get("by_model")),
        "created": record.get("created", ""),
        "document_hash": (record.get("document") or {}).get("hash", ""),
    }


def _alignment(left: dict[str, Any], right: dict[str, Any]) -> float:
    left_words, right_words = (_WORD.findall(v["fact"]["text"].lower()) for v in (left, right))
    text = difflib.SequenceMatcher(None, left_words, right_words, autojunk=False).ratio()
    a, b = ({str(s.get("id")) for s in (v.get("evidence") or {}).get("scenes") or []} for v in (left, right))
    scenes = len(a & b) / len(a | b) if a | b else 0.0
    return 0.7 * text + 0.3 * scenes


def _fact_view(verdict: dict[str, Any], passages: Mapping[str, str]) -> dict[str, Any]:
    evidence = verdict.get("evidence") or {}
    return {
        "text": verdict["fact"]["text"],
        "verdict": verdict.get("status", ""),
        "rationale": verdict.get("rationale", "") or verdict.get("error", ""),
        "scenes": [
            {"id": s.get("id", ""), "title": s.get("title", ""), "text": span_text(s, passages)}
            for s in evidence.get("scenes") or []
        ],
        "ckg_lines": list(evidence.get("ckg_lines") or []),
    }


Unit = tuple[int | None, int | None, float]
"""An aligned unit: a fact of the first summary, its counterpart in the second (None: none) and their score."""


def align(left: Sequence[dict[str, Any]], right: Sequence[dict[str, Any]]) -> list[Unit]:
    """One-to-one alignment of two summaries' facts, the best-scoring pairs first; the rest stand alone."""
    candidates = sorted(
        ((_alignment(a, b), i, j) for i, a in enumerate(left) for j, b in enumerate(right)),
        key=lambda c: (-c[0], c[1], c[2]),
    )
    used_left: set[int] = set()
    used_right: set[int] = set()
    units: list[Unit] = []
    for score, i, j in candidates:
        if score < COUNTERPART:
            break
        if i not in used_left and j not in used_right:
            used_left.add(i)
            used_right.add(j)
            units.append((i, j, score))
    units += [(i, None, 0.0) for i in range(len(left)) if i not in used_left]
    units += [(None, j, 0.0) for j in range(len(right)) if j not in used_right]
    return units


def supported_only(
    left: Sequence[dict[str, Any]],
    right: Sequence[dict[str, Any]],
    units: Sequence[Unit],
    passages: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {}),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per side, the facts supported there whose counterpart (None: none) is absent or not supported."""
    only: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    for i, j, score in units:
        for side, mine, theirs in ((0, i, j), (1, j, i)):
            if mine is None:
                continue
            fact = (left, right)[side][mine]
            other = None if theirs is None else (right, left)[side][theirs]
            if fact.get("status") != "supported" or (other or {}).get("status") == "supported":
                continue
            only[side].append(
                {
                    "fact": _fact_view(fact, passages[side]),
                    "counterpart": None if other is None else _fact_view(other, passages[1 - side]),
                    "alignment": round(score, 3),
                }
            )
    return only


def _pair(a: Summary, b: Summary, va: dict[str, Any], vb: dict[str, Any]) -> dict[str, Any]:
    card_a, card_b = a.round.get("factscore") or {}, b.round.get("factscore") or {}
    verdicts_a, verdicts_b = card_a.get("verdicts") or [], card_b.get("verdicts") or []
    units = align(verdicts_a, verdicts_b)
    judging = [(k, va["judging"][k], vb["judging"][k]) for k in sorted(va["judging"])]
    differs = [f"{k}: {in_a} vs {in_b}" for k, in_a, in_b in judging if in_a != in_b]
    why_not = [
        *(f"judged differently ({difference})" for difference in differs),
        *(f"{v['label']}'s score is {v['reliability']}" for v in (va, vb) if not v["reliable"]),
    ]

    def value(verdicts: Sequence[dict[str, Any]], n: int | None) -> float | None:
        return None if n is None else VALUE.get(verdicts[n].get("status", ""))

    values = [(value(verdicts_a, i), value(verdicts_b, j)) for i, j, _ in units]
    pairs = sum(x is not None and y is not None for x, y in values)
    smaller = min(sum(x is not None for x, _ in values), sum(y is not None for _, y in values))
    nfs: dict[str, Any] | None = None
    if not why_not:
        if pairs >= MIN_PAIRS and pairs * 2 >= smaller:
            nfs = aligned_difference_interval(values)
            nfs["over"] = f"{over(pairs, 'aligned fact')} paired, {nfs['n'] - pairs} without counterpart"
        else:
            nfs = ratio_difference_interval(sentence_counts(card_a), sentence_counts(card_b))
            nfs["pairs"] = pairs
            nfs["over"] = (
                f"{over(nfs['n'][0], 'sentence')} and {over(nfs['n'][1], 'sentence')}, unpaired: only "
                f"{pairs} facts align (a paired difference needs {MIN_PAIRS}, covering half of the smaller "
                "summary's facts)"
            )
    sa, sb = _sentence_values(a.round), _sentence_values(b.round)
    coherence = None
    if sa is not None and sb is not None and not why_not:
        coherence = difference_interval(sa, sb, paired=False)
        coherence["over"] = f"{over(len(sa), 'sentence')} and {over(len(sb), 'sentence')}, unpaired"
    texts = (a.record.get("passages") or {}, b.record.get("passages") or {})  # what their evidence names
    only_a, only_b = supported_only(verdicts_a, verdicts_b, units, texts)
    return {
        "a": va["label"],
        "b": vb["label"],
        "nfs": nfs,
        "booookscore": coherence,
        "aligned_facts": pairs,
        "comparable": not differs,
        "unreliable": [v["label"] for v in (va, vb) if not v["reliable"]],
        "not_comparable_because": differs,
        "no_difference_because": why_not,
        "only_a": only_a,
        "only_b": only_b,
    }


def compare(refs: Sequence[RunRef]) -> dict[str, Any]:
    """The comparison of two or more summaries of one story; ValueError (one line) when it cannot be made."""
    if len(refs) < 2:
        raise ValueError("Name two or more runs to compare (RUN or RUN#ROUND).")
    loaded = [load_summary(ref) for ref in refs]
    views = [summary_view(s) for s in loaded]
    first = views[0]
    for view in views[1:]:
        if view["document_hash"] != first["document_hash"]:
            raise ValueError(
                f"{view['label']} is a run of another story than {first['label']} "
                f"({view['document_hash'][:8]} vs {first['document_hash'][:8]}); compare runs of one story."
            )
    pairs = [_pair(loaded[0], s, first, v) for s, v in zip(loaded[1:], views[1:], strict=True)]
    return {
        "story": (loaded[0].record.get("document") or {}).get("title", ""),
        "document_hash": first["document_hash"],
        "summaries": views,
        "pairs": pairs,
        "method": {
            "interval": "95% percentile bootstrap, 2000 resamples, seed 0",
            "nfs_unit": "summary sentences (a sentence's judged facts together)",
            "booookscore_unit": "scored sentences (clean 1, confused 0)",
            "difference": f"later summary minus the first: paired over aligned facts (a fact and its counterpart "
            f"together) when at least {MIN_PAIRS} align, covering half of the smaller summary's facts; otherwise "
            "unpaired over each summary's sentences; none for a pair judged differently or with an unreliable side",
        },
    }


def nfs_text(v: dict[str, Any]) -> str:
    """A summary's NFS with its interval and corrections; the card's words (never a number) when it does not count."""
    if not v["reliable"]:
        return str(v["headline"])
    shown = _over(v["nfs"])
    n = v["corrections"]
    return f"{shown} with {n} correction{'s' if n != 1 else ''}" if n else shown


def _over(figure: dict[str, Any]) -> str:
    """A score with its interval and what the interval resampled: ``0.450 [0.300, 0.600] over 6 sentences``."""
    over_what = f" over {figure['over']}" if figure["ci95"] and figure.get("over") else ""
    return interval_text(figure["score"], figure["ci95"]) + over_what


def table_rows(result: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The summaries side by side, a row per figure, as the terminal and the HTML show them."""
    views = result["summaries"]

    def row(name: str, cell: Any) -> tuple[str, list[str]]:
        return name, [cell(v) for v in views]

    def booook(v: dict[str, Any]) -> str:
        return "not scored" if v["booookscore"] is None else _over(v["booookscore"])

    def judges(v: dict[str, Any]) -> str:
        own = v["nfs_without_corrections"]
        if own is None:
            return "(no corrections)"
        if not own["reliable"]:
            return describe(own["score"], v["coverage"], False)
        return interval_text(own["score"], own["ci95"])

    rows = [
        row("round", lambda v: f"{v['round']} of {len(v['rounds'])}"),
        row("summary", lambda v: v["summary_source"] or "-"),
        row("NFS [95% CI]", nfs_text),
        row("judge-corrected NFS (estimate) [95% CI]", corrected_text),
        *([row("NFS without corrections", judges)] if any(v["corrections"] for v in views) else []),
        row("facts (sup/unsup/unjudged)", lambda v: f"{v['supported']}/{v['unsupported']}/{v['unjudged']}"),
        row("coverage", lambda v: "-" if v["coverage"] is None else f"{v['coverage']:.0%}"),
        row("reliable", lambda v: "yes" if v["reliable"] else "no"),
        row("BooookScore [95% CI]", booook),
        row("words", lambda v: str(v["words"])),
    ]
    names = sorted({name for v in views for name in v["metrics"]})
    rows += [row(name, lambda v, n=name: v["metrics"].get(n, {}).get("headline", "-")) for name in names]
    roles = sorted({role for v in views for role in v["models"]})
    rows += [row(f"{role} model", lambda v, r=role: v["models"].get(r, "-")) for role in roles]
    whole_run = "this summary's run (all its rounds)"
    rows += [
        row(
            "prompts (decompose/judge)",
            lambda v: "{decompose prompt}/{judge prompt}".format_map(v["judging"]),
        ),
        row(f"model calls of {whole_run}", lambda v: "-" if v["calls"] is None else str(v["calls"])),
        row(f"cost of {whole_run}", lambda v: v["cost"]),
    ]
    return rows


def corrected_text(v: dict[str, Any]) -> str:
    """The judge-corrected NFS estimate, or why there is none."""
    nfs = v["nfs"]
    if nfs.get("corrected") is None:
        return "-" if not nfs.get("corrected_note") else f"none: {nfs['corrected_note']}"
    return interval_text(nfs["corrected"], nfs.get("corrected_ci95"))


def pair_line(pair: dict[str, Any]) -> str:
    """One line per pair: the difference, its interval, over what, and what it means; or why there is none."""
    head = f"{pair['b']} - {pair['a']}: "
    if pair["nfs"] is None:
        return head + "no difference shown, because " + "; ".join(pair["no_difference_because"])
    nfs = pair["nfs"]
    verdict = (
        "excludes 0"
        if nfs["excludes_zero"]
        else "includes 0 (no difference shown)"
        if nfs["ci95"]
        else "no interval"
    )
    line = f"{head}NFS {signed_text(nfs['difference'], nfs['ci95'])}, {verdict} (95% CI over {nfs['over']})"
    if pair["booookscore"] is not None:
        b = pair["booookscore"]
        line += f"; BooookScore {signed_text(b['difference'], b['ci95'])} (95% CI over {b['over']})"
    return line


def render_html(result: dict[str, Any]) -> str:
    """A self-contained compare.html (no script, no outside resource)."""
    from storyjudge.apps.report.assets import CSP, environment, inline_asset
    from storyjudge.apps.report.rounds import OPEN_WORDS

    template = environment().get_template("compare.html.j2")
    return template.render(
        csp=CSP,
        css=inline_asset("report.css"),
        result=result,
        rows=table_rows(result),
        headline=[(v, nfs_text(v)) for v in result["summaries"]],
        open_text=sum(v["words"] for v in result["summaries"]) <= OPEN_WORDS,  # long ones start folded
        pairs=[(pair, pair_line(pair)) for pair in result["pairs"]],
    )
