"""The critical-path bound of a run, from the requests a test server received.

A graph's LLM calls form stages that depend on each other (extraction, then merging, then decomposition,
then judging, ...); calls within a stage are independent. With latency ``L`` per call and ``C`` calls in
flight at most, no schedule finishes a stage of ``n`` calls faster than ``ceil(n / C)`` waves, so

    bound = L x sum over stages of ceil(n_stage / C)

Stages are read from the request log in arrival order: consecutive requests of one kind (the structured
output's schema name, else the first line of the prompt, which names its template) form one stage. Calls
answered from the cache never reach the server and cost nothing, so they are not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from storyjudge.apps.scripted_server import schema_name


def request_kind(body: dict[str, Any]) -> str:
    """What a request is: its schema name, or the first line of its first user message."""
    name = schema_name(body)
    if name:
        return name
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content", "")
            return str(content).strip().splitlines()[0][:60] if str(content).strip() else "(empty prompt)"
    return "(no user message)"


@dataclass(frozen=True)
class Stage:
    """A run of consecutive requests of one kind."""

    kind: str
    calls: int


def stages(bodies: list[dict[str, Any]]) -> list[Stage]:
    """The dependent stages of a run, in order."""
    found: list[Stage] = []
    for body in bodies:
        kind = request_kind(body)
        if found and found[-1].kind == kind:
            found[-1] = Stage(kind, found[-1].calls + 1)
        else:
            found.append(Stage(kind, 1))
    return found


def waves(found: list[Stage], concurrency: int) -> int:
    """Rounds of at most ``concurrency`` parallel calls that the stages need."""
    return sum(math.ceil(stage.calls / concurrency) for stage in found)


def bound_seconds(found: list[Stage], concurrency: int, latency: float) -> float:
    """The shortest wall time any schedule could reach: waves x latency."""
    return waves(found, concurrency) * latency
