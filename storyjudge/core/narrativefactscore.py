"""NarrativeFactScore: the share of judged facts that are supported, per sentence and for the summary.

The score travels with its coverage and is unreliable below the floor or when the judge failed its planted facts.
Its interval resamples sentences (their facts vary together); the card also carries a judge-corrected estimate
(Rogan-Gladen), assuming planted errors are as hard to catch as the summary's own.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from storyjudge.core.coverage import DEFAULT_FLOOR, is_reliable
from storyjudge.core.intervals import corrected_interval, over, ratio_interval, rogan_gladen
from storyjudge.core.records import Fact, FactVerdict, JudgeCheck, ScoreCard, SentenceScore

MIN_SEPARATION = 0.2
"""Least true minus false acceptance for a correction: below it the judge barely tells true facts from false,
and dividing by so small a gap turns noise into a score."""
CORRECTED_NOTE = (
    "an estimate of the share of facts truly supported, correcting for the judge's measured acceptance of "
    "planted false and true facts; it assumes the planted errors are as hard to catch as the summary's own"
)


def plain_words(text: str) -> str:
    """A text's words, lower-case, one space apart, punctuation dropped: what makes two facts (or labels) the same."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def unique_facts(raw: Iterable[Fact], iteration: int) -> list[Fact]:
    """An iteration's facts in summary order, without blanks or duplicates (the first of equal facts stays)."""
    ordered = sorted(
        (f for f in raw if f["iteration"] == iteration), key=lambda f: (f["sentence_index"], f["id"])
    )
    first: dict[str, Fact] = {}
    for fact in ordered:
        first.setdefault(plain_words(fact["text"]), Fact(**{**fact, "text": fact["text"].strip()}))
    first.pop("", None)  # blank facts
    return list(first.values())


def nfs_coverage(*, facts: int, judged: int, sentences: int, decompose_failures: int) -> float:
    """Judged facts over the facts the whole summary is estimated to hold.

    A failed sentence is assumed to hold as many facts as the decomposed ones on average; no sentence: 0.
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
    """Score of one summary from its verdicts; ``unjudged``: "exclude" them or count them "unsupported".

    ``judge`` is the judge's record on the planted facts: when it did not pass, the score does not count.
    """
    mine = [v for v in verdicts if v["fact"]["iteration"] == iteration]
    mine.sort(key=lambda v: (v["fact"]["sentence_index"], v["fact"]["id"]))
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
    judged_rows = [r for r in per_sentence if r["judged"]]
    units = [float(r["supported"]) for r in judged_rows], [float(r["judged"]) for r in judged_rows]
    card["score_ci95"] = ratio_interval(*units)
    card["score_ci95_over"] = over(len(judged_rows), "sentence")
    if judge is not None:
        card["judge_check"] = judge
        add_corrected(card, units, judge)
    return card


def add_corrected(card: ScoreCard, units: tuple[list[float], list[float]], judge: JudgeCheck) -> None:
    """Put the judge-corrected fields on ``card``: ``score_corrected`` (None: the note says why), its interval."""
    observed = card["score"]
    far, tar = judge.get("false_acceptance"), judge.get("true_acceptance")
    planted = [v for v in judge.get("verdicts") or [] if v["status"] != "unjudged"]
    false = [v["status"] == "supported" for v in planted if v["planted"]["expected"] == "unsupported"]
    true = [v["status"] == "supported" for v in planted if v["planted"]["expected"] == "supported"]
    card["score_corrected"] = None
    card["score_corrected_ci95"] = None
    if observed is None:
        reason = "no score to correct"
    elif far is None or tar is None:
        reason = "no correction: the judge has no readable verdict on planted false or true facts"
    elif tar - far < MIN_SEPARATION:
        reason = (
            f"no correction: the judge accepted {tar:.0%} of planted true facts and {far:.0%} of false ones, "
            f"a gap below {MIN_SEPARATION:.0%}, so it does not tell true from false"
        )
    else:
        card["score_corrected"] = round(rogan_gladen(observed, far, tar), 6)
        card["score_corrected_ci95"] = corrected_interval(*units, false, true)
        card["score_corrected_ci95_over"] = (
            f"{over(len(units[0]), 'sentence')}, {over(len(false), 'planted false fact')} and "
            f"{over(len(true), 'planted true fact')}"
        )
        reason = CORRECTED_NOTE
    card["score_corrected_note"] = reason
