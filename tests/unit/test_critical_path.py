"""The benchmark's critical-path bound: exact for pipelined decomposition and judging, stage sums elsewhere."""

from __future__ import annotations

import itertools
import random
from typing import Any

from eval.bench.critical_path import dependency_waves, forest_waves, verdict_parents


def body(schema: str, text: str) -> dict[str, Any]:
    fmt = {"type": "json_schema", "json_schema": {"name": schema, "schema": {}}} if schema else None
    return {"messages": [{"role": "user", "content": text}], **({"response_format": fmt} if fmt else {})}


def decomposition(i: int) -> dict[str, Any]:
    return body(
        "AtomicFacts", f"<summary>\nall\n</summary>\n<sentence>\nAnn {i} sails, and Bo {i} rows.\n</sentence>"
    )


def verdict(i: int, who: str) -> dict[str, Any]:
    return body("Verdict", f"<fact>\n{who} {i} {'sails' if who == 'Ann' else 'rows'}.\n</fact>")


def optimal_waves(parents: list[int | None], slots: int) -> int:
    """Fewest waves by exhaustive search (small forests only)."""
    done: frozenset[int] = frozenset()
    frontier = {done}
    rounds = 0
    while all(len(state) < len(parents) for state in frontier):
        rounds += 1
        following = set()
        for state in frontier:
            ready = [
                i
                for i in range(len(parents))
                if i not in state and (parents[i] is None or parents[i] in state)
            ]
            for pick in itertools.combinations(ready, min(slots, len(ready))):
                following.add(state | frozenset(pick))
        frontier = following
    return rounds


def test_twenty_sentences_of_three_facts_need_five_waves_of_sixteen_not_six() -> None:
    parents: list[int | None] = [None] * 20 + [i // 3 for i in range(60)]
    assert forest_waves(parents, 16) == 5
    assert forest_waves(parents, 1) == 80
    assert forest_waves([None, 0, 1, 2], 16) == 4  # a chain is never faster than its length


def test_highest_level_first_is_optimal_on_small_forests() -> None:
    rng = random.Random(7)
    for _ in range(60):
        n = rng.randint(1, 8)
        parents: list[int | None] = [
            None if i == 0 or rng.random() < 0.3 else rng.randrange(i) for i in range(n)
        ]
        for slots in (1, 2, 3):
            assert forest_waves(parents, slots) == optimal_waves(parents, slots), (parents, slots)


def test_the_log_gives_each_verdict_its_own_sentence_in_any_arrival_order() -> None:
    bodies = [decomposition(0), decomposition(1), verdict(1, "Bo"), verdict(0, "Ann"), verdict(1, "Ann")]
    assert verdict_parents(bodies) == [None, None, 1, 0, 1]


def test_stages_around_pipelined_segments_still_wait_for_each_other() -> None:
    def round_of(n: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i in range(n):
            out.append(decomposition(i))
        for i in range(n):
            out += [verdict(i, "Ann"), verdict(i, "Bo")]
        return out

    refine = [body("", "You revise a summary.")]
    bodies = round_of(20) + refine + round_of(20)
    # per round 60 calls: 4 waves of 16 when each verdict waits for its own sentence only (2 + 3 with a barrier)
    assert dependency_waves(bodies, 16) == 4 + 1 + 4
    assert dependency_waves(bodies, 1) == len(bodies)


def test_the_summarizer_beside_the_extraction_fills_the_free_slots_of_its_waves() -> None:
    def extraction(i: int) -> dict[str, Any]:
        return body("SceneTriples", f"<scene>\nscene {i}\n</scene>")

    leaf, edit = body("", "We are creating one summary."), body("", "Your task is to edit the summary.")
    # a refine run's arrival order: the summarizer's calls among the extraction's, then the first round
    bodies = [*map(extraction, range(10)), leaf, *map(extraction, range(10, 30)), edit]
    bodies += [*map(extraction, range(30, 36)), decomposition(0), verdict(0, "Ann")]
    # 38 calls before the round: 3 waves of 16 hold the summarizer's 2 dependent ones, against 3 + 2 in a row;
    # the decomposition needs only the summary, so it shares the third wave, and its verdict takes a fourth
    assert dependency_waves(bodies, 16) == 3 + 1
    assert dependency_waves(bodies, 1) == len(bodies)
    # a chain longer than the extraction's waves decides: single-call stages are a forest, checked exhaustively
    for n, chain, slots in [(4, 3, 2), (5, 2, 2), (3, 1, 3), (6, 2, 3)]:
        lead = [body("", f"Stage {k}.") for k in range(chain)]
        parents: list[int | None] = [None] * n + [None] + [n + k for k in range(chain - 1)]
        log = [*map(extraction, range(n)), *lead]
        assert dependency_waves(log, slots) == optimal_waves(parents, slots), (n, chain, slots)


def tree_summary(level: int, index: int, sources: list[int], prior: int | None, calls: int) -> dict[str, Any]:
    return {"level": level, "index": index, "sources": sources, "prior": prior, "attempts": 4, "calls": calls}


def test_the_summarize_tree_bound_counts_calls_not_cached_attempts_and_waits_for_the_work_below() -> None:
    from eval.bench.sequential import tree_waves

    leaves = [tree_summary(0, i, [i], None, 1) for i in range(4)]
    merges = [tree_summary(1, 0, [0, 1], None, 1), tree_summary(1, 1, [2, 3], 0, 1)]
    root = [tree_summary(2, 0, [0, 1], None, 1)]
    tree = [{"summaries": leaves}, {"summaries": merges}, {"summaries": root}]
    # at 2 slots: leaves 0-1, then merge 0 beside leaf 2, leaf 3, merge 1, the root: 5 waves, and no fewer.
    # The longest chain (3 calls... 4 with the prior) or 7 calls / 2 slots would claim 4.
    assert tree_waves(tree, 2) == (5, 7)
    # a merge answered from the cache (its 4 attempts, no call) takes no wave
    merges[1]["calls"] = 0
    assert tree_waves(tree, 2) == (4, 6)
    # unlimited slots: the chain leaf -> merge 0 -> (merge 1: cached) -> root
    assert tree_waves(tree, 16) == (3, 6)
    # incremental: one chain of every call, compressions included; old records count attempts (+1 compressed)
    steps = [
        {"step": 0, "summary": {"attempts": 2, "calls": 1}},
        {"step": 1, "summary": {"attempts": 1}, "compressed": True},
    ]
    assert tree_waves(steps, 16) == (3, 3)


def dag_optimal_waves(waits_for: list[set[int]], slots: int) -> int:
    """Fewest waves of unit-time tasks where task i waits for every task in ``waits_for[i]`` (small DAGs only)."""
    frontier: set[frozenset[int]] = {frozenset()}
    rounds = 0
    while all(len(state) < len(waits_for) for state in frontier):
        rounds += 1
        following = set()
        for state in frontier:
            ready = [i for i in range(len(waits_for)) if i not in state and waits_for[i] <= state]
            for pick in itertools.combinations(ready, min(slots, len(ready))):
                following.add(state | frozenset(pick))
        frontier = following
    return rounds


def test_the_first_rounds_decompositions_share_the_extractions_waves_and_its_verdicts_wait_for_all_of_it() -> (
    None
):
    """The bound of the first round, against an exhaustive search of every schedule on small cases."""
    rng = random.Random(11)
    for _ in range(80):
        extraction, slots = rng.randint(0, 5), rng.randint(1, 3)
        chain = [rng.randint(1, 2) for _ in range(rng.randint(0, 2))]  # the summarizer's stages, calls each
        sentences = rng.randint(1, 3)
        facts = [rng.randint(0, 2) for _ in range(sentences)]  # verdicts of each decomposition
        log = [body("SceneTriples", f"<scene>\nscene {i}\n</scene>") for i in range(extraction)]
        waits_for: list[set[int]] = [set() for _ in range(extraction)]
        everything_extracted = set(range(extraction))
        before: set[int] = set()
        for k, calls in enumerate(chain):
            stage = set(range(len(waits_for), len(waits_for) + calls))
            for _ in range(calls):
                log.append(body("", f"Stage {k}."))
                waits_for.append(set(before))
            before = stage
        firsts = {}
        for i in range(sentences):
            firsts[i] = len(waits_for)
            log.append(decomposition(i))
            waits_for.append(set(before))
        for i in range(sentences):
            for who in ["Ann", "Bo"][: facts[i]]:
                log.append(verdict(i, who))
                waits_for.append({firsts[i], *everything_extracted})
        case = (extraction, chain, facts, slots)
        assert dependency_waves(log, slots) == dag_optimal_waves(waits_for, slots), case
