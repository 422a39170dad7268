"""NarrativeFactScore: the share of judged facts that are supported, per sentence and for the summary.

The score is a precision over the facts that were judged, so it always travels with its coverage: facts whose
verdict could not be read and sentences whose decomposition failed lower the coverage, and below the run's
coverage floor the score is marked not reliable instead of quietly rising. ``nfs_unjudged="unsupported"`` is
the paper's indicator instead: every fact is in the denominator and one whose verdict could not be read counts
as not supported (the coverage is reported all the same). A fact counts once: blank facts and facts that an
earlier sentence already stated are dropped (``unique_facts``). The round's planted facts
(``storyjudge.core.planted``) are left out of every count; the judge's record on them goes on the card, and a
judge that accepted more planted false facts than ``max_false_acceptance`` allows makes the score not reliable
too. BooookScore's counterpart is ``storyjudge.core.booookscore``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from storyjudge.core.coverage import DEFAULT_FLOOR, is_reliable
from storyjudge.core.records import Fact, FactVerdict, JudgeCheck, ScoreCard, SentenceScore


def fact_key(text: str) -> str:
    """What makes two facts the same fact: their words, ignoring case and punctuation ("" for a blank one)."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def unique_facts(raw: Iterable[Fact], iteration: int) -> list[Fact]:
    """An iteration's facts in summary order, without blanks or duplicates (the first of equal facts stays)."""
    ordered = sorted(
        (f for f in raw if f["iteration"] == iteration),
        key=lambda f: (f["sentence_index"], f["id"]),
    )
    seen: set[str] = set()
    facts: list[Fact] = []
    for fact in ordered:
        key = fact_key(fact["text"])
        if not key or key in seen:
            continue
        seen.add(key)
        facts.append(Fact(**{**fact, "text": fact["text"].strip()}))
    return facts


def nfs_coverage(*, facts: int, judged: int, sentences: int, decompose_failures: int) -> float:
    """Judged facts over the facts the whole summary is estimated to hold.

    A sentence whose decomposition failed has facts nobody saw; it is assumed to hold as many as the sentences
    that did decompose, on average. So coverage = judged / (facts / share of sentences decomposed), which is the
    share of facts judged times the share of sentences decomposed. A summary with no sentence has nothing to
    judge and coverage 0; a summary whose sentences all decomposed into no fact has coverage 1 (nothing was left
    unjudged), though its score is None.
    """
    if sentences <= 0:
        return 0.0
    decomposed = max(0, sentences - decompose_failures)
    sentence_share = decomposed / sentences
    if facts <= 0:
        return 1.0 if decomposed == sentences else 0.0
    return (judged / facts) * sentence_share


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
