"""Evidence retrieval: for every fact, the top-k scenes from the scene index plus the CKG lines of its characters.

Queries add the aliases of the characters a fact names. Scenes go whole while they fit the judge's budget, then
only their best-matching passage, and the evidence says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from storyjudge.core.context import Context
from storyjudge.core.records import Evidence, EvidenceScene, Fact, IndexRef, Scene
from storyjudge.core.tokens import count_tokens

CKG_LINES_PER_FACT = 40
PROMPT_OVERHEAD_TOKENS = 1200


def evidence_budget(ctx: Context) -> int:
    """Tokens of scene text one judge prompt may carry: the setting, within what the context window leaves."""
    room = ctx.context_window - ctx.max_output_tokens - PROMPT_OVERHEAD_TOKENS
    return max(64, min(ctx.evidence_tokens, room))


def expand_query(fact: str, ckg: dict[str, Any]) -> str:
    """The fact plus the aliases of the characters it mentions."""
    from storyjudge.core.charactergraph import aliases, characters_in

    names = characters_in(ckg, fact) if ckg else []
    alias_map = aliases(ckg) if names else {}
    extra = [
        alias for name in names for alias in alias_map.get(name, []) if alias.lower() not in fact.lower()
    ]
    return fact if not extra else f"{fact} ({'; '.join(extra)})"


# a retrieved scene or passage's tokens, counted once: a run retrieves the same scenes for many facts
_tokens = lru_cache(maxsize=1024)(count_tokens)


def select_scenes(
    hits: Iterable[dict[str, Any]], scenes: dict[str, Scene], budget: int
) -> list[EvidenceScene]:
    """Whole scenes in rank order while they fit, then best passages, as spans of the run's scenes; never cut."""
    chosen: list[EvidenceScene] = []
    left = budget
    for hit in hits:
        scene = scenes.get(hit["id"])
        if scene is None:
            continue
        full, passage = scene["text"], hit.get("passage", "")
        at = full.find(passage) if passage else -1
        if _tokens(full) <= left:
            start, end, excerpt = 0, len(full), False
        elif at >= 0 and _tokens(passage) <= left:
            start, end, excerpt = at, at + len(passage), True
        else:
            continue
        title = hit.get("title") or scene["title"]
        chosen.append(
            EvidenceScene(
                id=hit["id"], title=title, start=start, end=end, score=hit["score"], excerpt=excerpt
            )
        )
        left -= _tokens(full[start:end])
    return chosen


@lru_cache(maxsize=4096)
def _remembered_searches(
    index_json: str, queries: tuple[str, ...], k: int
) -> tuple[tuple[dict[str, Any], ...], ...]:
    # remembered, as a refinement round asks again for kept sentences; collections are named by a hash of
    # their scenes and embedder: one index reference, the same hits
    from storyjudge.core.sceneindex import search_scenes_many

    return tuple(tuple(hits) for hits in search_scenes_many(json.loads(index_json), list(queries), k))


def gather_evidence(
    ctx: Context, facts: list[Fact], ckg: dict[str, Any], scenes: list[Scene], index: IndexRef | None
) -> dict[str, Evidence]:
    """Evidence for each of ``facts`` (fact id -> evidence): queries embedded in one pass, searched in one call."""
    from storyjudge.core.charactergraph import subgraph_lines

    by_id = {scene["id"]: scene for scene in scenes}
    queries = {fact["id"]: expand_query(fact["text"], ckg) for fact in facts}
    hits_of: dict[str, tuple[dict[str, Any], ...]] = {}
    if index and queries:  # one forward pass for the branch's queries, searched in one call
        from storyjudge.core.queryvectors import prepare_queries

        prepare_queries(str(index.get("embedder", "minilm")), list(queries.values()))
        found = _remembered_searches(
            json.dumps(index, sort_keys=True), tuple(queries.values()), ctx.retrieval_k
        )
        hits_of = dict(zip(queries.values(), found, strict=True))
    return {
        fact_id: Evidence(
            query=query,
            scenes=select_scenes(hits_of.get(query, ()), by_id, evidence_budget(ctx)),
            ckg_lines=subgraph_lines(ckg, query, limit=CKG_LINES_PER_FACT) if ckg else [],
        )
        for fact_id, query in queries.items()
    }
