"""The harness floor: a run's own calls, with their dependencies, sent again by a client that does nothing else.

The critical-path bound (:mod:`eval.bench.critical_path`) counts waves of exactly ``L`` each. On the machine
that runs the benchmark, every call also costs loopback HTTP, the scripted server's own request handling and
logging, and the scheduling of one client process beside it on the same cores: costs that no client can avoid
here and that a remote endpoint's machine would carry itself. The floor measures them: the request bodies a
run sent are posted again, byte for byte, from bare ``http.client`` connections on ``concurrency`` threads, each
call only once the calls it depends on have been answered (the same dependencies as the bound) and ready calls
taken highest level first, as the bound's schedule takes them. Its wall time is what this machine and server
allow; a run's time over the floor is storyjudge's own.

The bound also counts retrieval as free, but a verdict waits for its facts' evidence: embedding a sentence's
fact queries is about a gigaflop of the run's own compute (25 ms on one core here), on the path from its
decomposition to its verdicts. ``after`` gives the replay that work: it runs once a call is answered, on a
thread of its own beside the senders (as a sentence's branch does it), before the calls that wait for it are
released, so a replay that retrieves each decomposition's facts for real measures the floor of the method
itself (the HTTP and the retrieval, nothing else).

Dependencies, as the bound reads the log: the extraction's calls need nothing; the summarizer's stages each
need the stage before; the first round's decompositions need the summarizer, its verdicts their own
decomposition and the whole extraction (the CKG); every later stage or round needs everything before it, and
inside a round a verdict needs only its own sentence's decomposition.
"""

from __future__ import annotations

import heapq
import http.client
import json
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from eval.bench.critical_path import (
    DECOMPOSE,
    EXTRACTION,
    PIPELINED,
    VERDICT,
    fact_of,
    request_kind,
    segments,
    verdict_parents,
)
from storyjudge.core.context import Context
from storyjudge.core.records import Fact


def dependencies(bodies: list[dict[str, Any]]) -> list[set[int]]:
    """For each request of a run's log, the positions of the requests it waits for (module docstring)."""
    kinds = [request_kind(body) for body in bodies]
    needs: list[set[int]] = [set() for _ in bodies]
    first = next((i for i, kind in enumerate(kinds) if kind in PIPELINED), len(bodies))
    extraction = {i for i, kind in enumerate(kinds) if kind == EXTRACTION}
    lead = [i for i in range(first) if i not in extraction]
    rest = [i for i in range(first, len(bodies)) if i not in extraction]
    previous: set[int] = set()  # the summarizer's stage before, while walking the lead
    for stage in _runs(lead, kinds):
        for i in stage:
            needs[i] = set(previous)
        previous = set(stage)
    summarizer_end = previous
    before = set(extraction) | set(lead)  # everything a later stage or round waits for
    for n, segment in enumerate(_split(rest, bodies)):
        if kinds[segment[0]] in PIPELINED:
            parents = verdict_parents([bodies[i] for i in segment])
            first_round = n == 0
            ckg = extraction if first_round else set()  # the first round's verdicts need the whole CKG
            for position, i in enumerate(segment):
                parent = parents[position]
                if kinds[i] == DECOMPOSE:
                    needs[i] = set(summarizer_end if first_round else before)
                elif parent is None:  # a verdict whose sentence the log does not show: all before the round
                    needs[i] = before | ckg
                else:
                    needs[i] = {segment[parent]} | ckg
        else:
            for i in segment:
                needs[i] = set(before)
        before |= set(segment)
    return needs


def _runs(positions: list[int], kinds: list[str]) -> list[list[int]]:
    """Consecutive positions of one kind."""
    found: list[list[int]] = []
    for i in positions:
        if found and kinds[found[-1][-1]] == kinds[i]:
            found[-1].append(i)
        else:
            found.append([i])
    return found


def _split(positions: list[int], bodies: list[dict[str, Any]]) -> list[list[int]]:
    """The positions of ``positions`` cut as ``critical_path.segments`` cuts their bodies."""
    cut: list[list[int]] = []
    offset = 0
    for segment in segments([bodies[i] for i in positions]):
        cut.append(positions[offset : offset + len(segment)])
        offset += len(segment)
    return cut


def _children(needs: list[set[int]]) -> list[list[int]]:
    children: list[list[int]] = [[] for _ in needs]
    for i, parents in enumerate(needs):
        for parent in parents:
            children[parent].append(i)
    return children


def levels(needs: list[set[int]]) -> list[int]:
    """Each call's level: the calls on the longest chain from it to the run's end, itself included."""
    children = _children(needs)
    level = [1] * len(needs)
    for i in reversed(range(len(needs))):  # a call's dependents come after it in the log
        level[i] = 1 + max((level[child] for child in children[i]), default=0)
    return level


def replay(
    base_url: str,
    bodies: list[dict[str, Any]],
    concurrency: int,
    after: Callable[[int], None] | None = None,
) -> float:
    """Seconds to post ``bodies`` again with their dependencies, ``concurrency`` at a time, doing nothing else.

    ``after(i)``, if given, runs once call ``i`` is answered, before the calls waiting for it are released.
    """
    needs = dependencies(bodies)
    level = levels(needs)
    children = _children(needs)
    waiting = [len(parents) for parents in needs]
    payloads = [json.dumps(body).encode() for body in bodies]
    ready = [(-level[i], i) for i in range(len(bodies)) if not waiting[i]]
    heapq.heapify(ready)
    state = threading.Condition()
    done = [0]
    failures: list[str] = []
    url = urlsplit(base_url)
    path = url.path.rstrip("/") + "/chat/completions"

    def release(i: int, problem: str) -> None:
        with state:
            if problem:
                failures.append(problem)
            done[0] += 1
            for child in children[i]:
                waiting[child] -= 1
                if not waiting[child]:
                    heapq.heappush(ready, (-level[child], child))
            state.notify_all()

    def work_then_release(i: int, work: Callable[[int], None]) -> None:
        try:
            work(i)
        except Exception as exc:  # noqa: BLE001 - reported by replay; the workers stop
            release(i, f"after call {i}: {exc!r}")
        else:
            release(i, "")

    def worker() -> None:
        connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=60)
        try:
            while True:
                with state:
                    while not ready and done[0] < len(bodies) and not failures:
                        state.wait()
                    if done[0] >= len(bodies) or failures:
                        return
                    _, i = heapq.heappop(ready)
                try:
                    connection.request("POST", path, payloads[i], {"Content-Type": "application/json"})
                    response = connection.getresponse()
                    response.read()
                except OSError as exc:  # the server went away: stop every worker instead of waiting forever
                    release(i, f"call {i}: {exc!r}")
                    return
                if response.status != 200:
                    release(i, f"call {i}: HTTP {response.status}")
                elif after is not None and children[i]:  # beside the senders, as a run's branch does it
                    threading.Thread(target=work_then_release, args=(i, after), daemon=True).start()
                else:
                    release(i, "")
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, concurrency))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"the floor replay failed: {failures[0]}")
    return wall


def retrieval(bodies: list[dict[str, Any]], ctx: Context, indexed: dict[str, Any]) -> Callable[[int], None]:
    """``after`` for :func:`replay`: once a decomposition is answered, the evidence of its verdicts' facts.

    The same function a sentence's branch calls (``nodes.retrieve.gather_evidence``), on the run's index, CKG
    and settings; remembered query vectors and searches must be forgotten first, or it costs nothing.
    """
    from nodes.retrieve import gather_evidence

    facts_of: dict[int, list[Fact]] = {}
    for i, needs in enumerate(dependencies(bodies)):
        if request_kind(bodies[i]) != VERDICT:
            continue
        parent = next((p for p in sorted(needs) if request_kind(bodies[p]) == DECOMPOSE), None)
        if parent is not None:
            fact = Fact(id=f"call-{i}", iteration=0, sentence_index=parent, text=fact_of(bodies[i]))
            facts_of.setdefault(parent, []).append(fact)

    def retrieve(i: int) -> None:
        if i in facts_of:
            gather_evidence(ctx, facts_of[i], indexed["ckg"], indexed["scenes"], indexed["index"])

    return retrieve
