"""NarrativeFactScore: the share of judged facts that are supported, per sentence and for the summary.

The score is a precision over the facts that were judged, so it always travels with its coverage: facts whose
verdict could not be read and sentences whose decomposition failed lower the coverage, and below the run's
coverage floor the score is marked not reliable instead of quietly rising. ``nfs_unjudged="unsupported"`` is
the paper's indicator instead: every fact is in the denominator and one whose verdict could not be read counts
as not supported (the coverage is reported all the same). The round's planted facts
(``nodes.plant``) are left out of every count; the judge's record on them goes on the card, and a judge that
accepted more planted false facts than ``max_false_acceptance`` allows makes the score not reliable too.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from langgraph.runtime import Runtime

from nodes.decompose import unique_facts
from state import FactScoreState
from storyjudge.core.context import Context, context_of
from storyjudge.core.coverage import DEFAULT_FLOOR, is_reliable, nfs_coverage
from storyjudge.core.planted import judge_check
from storyjudge.core.records import FactVerdict, JudgeCheck, ScoreCard, SentenceScore
from storyjudge.core.usage import totals


def score_card(
    iteration: int,
    sentences: list[str],
    verdicts: list[FactVerdict],
    decompose_failures: int,
    *,
    coverage_floor: float = DEFAULT_FLOOR,
    failed_sentences: Collection[int] = (),
    unjudged: str = "exclude",
    judge: JudgeCheck | None = None,
) -> ScoreCard:
    """Score of one summary from its verdicts; unjudged facts are reported, and excluded from the denominator.

    ``unjudged="unsupported"`` counts them as not supported instead, every fact in the denominator.
    ``failed_sentences`` names the sentences whose decomposition failed, when known, so the per-sentence rows
    say which sentences nobody judged; the count alone is ``decompose_failures``. ``judge`` is the judge's
    record on the round's planted facts, when some were planted: failed, the score is not reliable.
    """
    mine = sorted((v for v in verdicts if v["fact"]["iteration"] == iteration), key=lambda v: v["fact"]["id"])
    mine.sort(key=lambda v: v["fact"]["sentence_index"])
    supported = sum(v["status"] == "supported" for v in mine)
    unsupported = sum(v["status"] == "unsupported" for v in mine)
    judged = supported + unsupported
    per_sentence: list[SentenceScore] = []
    for index, sentence in enumerate(sentences):
        own = [v for v in mine if v["fact"]["sentence_index"] == index]
        s_sup = sum(v["status"] == "supported" for v in own)
        s_judged = sum(v["status"] != "unjudged" for v in own) if unjudged == "exclude" else len(own)
        per_sentence.append(
            SentenceScore(
                index=index,
                sentence=sentence,
                facts=len(own),
                supported=s_sup,
                judged=s_judged,
                decomposed=index not in failed_sentences,
                score=(s_sup / s_judged) if s_judged else None,
            )
        )
    denominator = judged if unjudged == "exclude" else len(mine)
    value = (supported / denominator) if denominator else None
    coverage = nfs_coverage(
        facts=len(mine), judged=judged, sentences=len(sentences), decompose_failures=decompose_failures
    )
    card = ScoreCard(
        iteration=iteration,
        score=value,
        supported=supported,
        unsupported=unsupported,
        unjudged=len(mine) - judged,
        facts=len(mine),
        judged=judged,
        sentences=len(sentences),
        decompose_failures=decompose_failures,
        coverage=round(coverage, 6),
        coverage_floor=coverage_floor,
        reliable=is_reliable(value, coverage, coverage_floor) and (judge is None or judge["passed"]),
        per_sentence=per_sentence,
        verdicts=mine,
        unjudged_rule=unjudged,
    )
    if judge is not None:
        card["judge_check"] = judge
    return card


def score_nfs(state: FactScoreState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Aggregate this iteration's verdicts into its score card."""
    iteration = state.get("iteration", 0)
    failed = {f["sentence_index"] for f in state.get("failed_sentences") or [] if f["iteration"] == iteration}
    facts = unique_facts(state.get("raw_facts") or [], iteration)
    kept = {fact["id"] for fact in facts}
    # a fact an earlier sentence already stated was judged in its own branch too (by the same call, which
    # the LLM cache or single-flight answered once); like the facts, it counts once, for the first sentence
    verdicts = [v for v in state.get("verdicts") or [] if v["fact"]["id"] in kept]
    ctx = context_of(runtime)
    planted = [v for v in state.get("planted_verdicts") or [] if v["fact"]["iteration"] == iteration]
    judge = (
        judge_check(planted, ctx.max_false_acceptance, totals(state.get("planted_usage")))
        if ctx.planted_facts > 0
        else None
    )
    card = score_card(
        iteration,
        state.get("sentences") or [],
        verdicts,
        len(failed),
        coverage_floor=ctx.coverage_floor,
        failed_sentences=failed,
        unjudged=ctx.nfs_unjudged,
        judge=judge,
    )
    return {"factscore": card, "facts": facts}
