"""The harness floor replays a run's own calls with exactly the dependencies its bound assumes."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from eval.bench.critical_path import dependency_waves
from eval.bench.floor import dependencies, levels, replay
from storyjudge.apps.scripted_server import OpenAIServer
from tests.unit.test_critical_path import body, dag_optimal_waves, decomposition, verdict


def random_first_round(rng: random.Random) -> tuple[list[dict[str, Any]], list[set[int]]]:
    """A refine-like log (extraction, the summarizer's stages, a first round) and what each call waits for."""
    extraction = rng.randint(0, 4)
    log = [body("SceneTriples", f"<scene>\nscene {i}\n</scene>") for i in range(extraction)]
    waits_for: list[set[int]] = [set() for _ in range(extraction)]
    before: set[int] = set()
    for k in range(rng.randint(0, 2)):
        stage = set(range(len(log), len(log) + rng.randint(1, 2)))
        for _ in stage:
            log.append(body("", f"Stage {k}."))
            waits_for.append(set(before))
        before = stage
    firsts = {}
    for i in range(rng.randint(1, 3)):
        firsts[i] = len(log)
        log.append(decomposition(i))
        waits_for.append(set(before))
    for i in firsts:
        for who in ["Ann", "Bo"][: rng.randint(0, 2)]:
            log.append(verdict(i, who))
            waits_for.append({firsts[i], *range(extraction)})
    return log, waits_for


def test_the_first_rounds_dependencies_are_those_of_its_bound() -> None:
    rng = random.Random(5)
    for _ in range(80):
        log, waits_for = random_first_round(rng)
        assert dependencies(log) == waits_for
        slots = rng.randint(1, 3)
        assert dag_optimal_waves(dependencies(log), slots) == dependency_waves(log, slots)


def test_a_later_stage_waits_for_everything_before_and_a_later_verdict_for_its_own_sentence() -> None:
    log = [decomposition(0), verdict(0, "Ann"), body("", "You revise a summary."), decomposition(1)]
    log += [decomposition(2), verdict(2, "Bo"), verdict(1, "Ann")]
    assert dependencies(log) == [set(), {0}, {0, 1}, {0, 1, 2}, {0, 1, 2}, {4}, {3}]
    assert levels(dependencies(log)) == [5, 4, 3, 2, 2, 1, 1]
    for slots in (1, 2, 3):
        assert dag_optimal_waves(dependencies(log), slots) == dependency_waves(log, slots)


def test_the_replay_sends_every_call_after_those_it_waits_for_within_the_slots(
    scripted_server: Callable[..., OpenAIServer],
) -> None:
    log = [decomposition(i) for i in range(3)] + [verdict(i, who) for i in range(3) for who in ("Ann", "Bo")]
    log += [body("", "You revise a summary."), decomposition(3), verdict(3, "Bo")]
    server = scripted_server(lambda _: "{}", latency=0.02)
    replay(server.base_url, log, concurrency=2)
    assert sorted(map(str, server.completions)) == sorted(map(str, log))
    assert server.max_in_flight <= 2
    position = {str(sent): n for n, sent in enumerate(server.completions)}
    entries = server.log
    for i, parents in enumerate(dependencies(log)):
        for parent in parents:
            answered = entries[position[str(log[parent])]].answered
            assert answered is not None and entries[position[str(log[i])]].arrived >= answered


def test_a_replay_whose_server_is_gone_fails_instead_of_waiting(
    scripted_server: Callable[..., OpenAIServer],
) -> None:
    server = scripted_server(lambda _: "{}")
    base_url = server.base_url
    server.stop()
    with pytest.raises(RuntimeError, match="the floor replay failed: call 0"):
        replay(base_url, [decomposition(0), verdict(0, "Ann")], concurrency=2)
