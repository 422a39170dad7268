"""NarrativeFactScore: the share of judged facts that are supported, per sentence and for the summary."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from state import FactScoreState, FactVerdict, ScoreCard
from storyjudge.context import Context


def score_card(
    iteration: int, sentences: list[str], verdicts: list[FactVerdict], decompose_failures: int
) -> ScoreCard:
    """Score of one summary from its verdicts (unjudged facts are reported and excluded from the denominator)."""
    mine = sorted((v for v in verdicts if v["fact"]["iteration"] == iteration), key=lambda v: v["fact"]["id"])
    mine.sort(key=lambda v: v["fact"]["sentence_index"])
    supported = sum(v["status"] == "supported" for v in mine)
    unsupported = sum(v["status"] == "unsupported" for v in mine)
    judged = supported + unsupported
    per_sentence = []
    for index, sentence in enumerate(sentences):
        own = [v for v in mine if v["fact"]["sentence_index"] == index]
        s_sup = sum(v["status"] == "supported" for v in own)
        s_judged = sum(v["status"] != "unjudged" for v in own)
        per_sentence.append(
            {
                "index": index,
                "sentence": sentence,
                "facts": len(own),
                "supported": s_sup,
                "judged": s_judged,
                "score": (s_sup / s_judged) if s_judged else None,
            }
        )
    return ScoreCard(
        iteration=iteration,
        score=(supported / judged) if judged else None,
        supported=supported,
        unsupported=unsupported,
        unjudged=len(mine) - judged,
        facts=len(mine),
        per_sentence=per_sentence,
        verdicts=mine,
        decompose_failures=decompose_failures,
    )


def score(state: FactScoreState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Aggregate this iteration's verdicts into its score card."""
    card = score_card(
        state.get("iteration", 0),
        state.get("sentences") or [],
        state.get("verdicts") or [],
        state.get("decompose_failures") or 0,
    )
    return {"factscore": card}
