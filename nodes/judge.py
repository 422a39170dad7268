"""The judge (NarrativeFactScore stage 2): one structured verdict per atomic fact; an unparsed one is unjudged."""

from __future__ import annotations

from collections.abc import Mapping

import prompts
from prompts.schemas import Verdict
from storyjudge.core.context import Context
from storyjudge.core.llm import ask_structured
from storyjudge.core.passages import span_text
from storyjudge.core.records import Evidence, Fact, FactVerdict
from storyjudge.core.usage import Usage


def render_evidence(evidence: Evidence, texts: Mapping[str, str]) -> tuple[str, str]:
    """The scenes and CKG lines as delimited data blocks (``texts``: the run's scene texts, by id)."""
    if evidence["scenes"]:
        scenes = "\n\n".join(
            prompts.data_block(
                "scene",
                span_text(scene, texts),
                id=scene["id"],
                title=scene["title"],
                **({"excerpt": "best-matching passage only"} if scene["excerpt"] else {}),
            )
            for scene in evidence["scenes"]
        )
    else:
        scenes = prompts.data_block("scene", "(no scene retrieved)", id="none")
    ckg = prompts.data_block(
        "graph", "\n".join(evidence["ckg_lines"]) or "(no relations for these characters)"
    )
    return scenes, ckg


def judge_fact(
    ctx: Context, fact: Fact, evidence: Evidence, texts: Mapping[str, str]
) -> tuple[FactVerdict, Usage]:
    """Verdict for one fact; an answer that cannot be read is an ``unjudged`` verdict with its error."""
    prompt = prompts.load("judge", ctx.prompt_dir)
    scenes, ckg = render_evidence(evidence, texts)
    text = prompt.render(scenes=scenes, ckg=ckg, fact=prompts.data_block("fact", fact["text"]))
    answer = ask_structured(ctx, "judge", prompt, [("user", text)], Verdict)
    verdict = answer.value
    record = FactVerdict(
        fact=fact,
        status="unjudged" if verdict is None else ("supported" if verdict.supported else "unsupported"),
        rationale=verdict.rationale if verdict else "",
        feedback=(verdict.feedback if verdict and not verdict.supported else ""),
        evidence=evidence,
        raw=answer.text,
    )
    if verdict is None:
        record["error"] = answer.error or "unparseable answer"
    return record, answer.usage
