"""The refine graph's summarizer beside the index: when it starts there, and when it waits."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from nodes.summarize_beside_index import route_after_segment, route_summary, summarize_beside_index
from storyjudge.core.context import Context


def test_a_remote_summarizer_works_beside_the_index_and_meets_it_before_factscore() -> None:
    """The summarizer needs the scenes only; it waits for the index when it is local, paused for, or not needed."""
    remote = Runtime(context=Context(model="openai:scripted", base_url="http://127.0.0.1:9/v1"))
    local = Runtime(context=Context(model="openai:scripted", summarizer_model="local:smollm2"))
    fresh: Any = {"document": "Chapter 1\n\nAlice sails."}
    given: Any = {**fresh, "summary": "Alice sails."}
    assert route_after_segment(fresh, remote) == ["index", "summarize"]
    assert route_summary(fresh, remote) == []  # the join of the two starts factscore
    for state, runtime, beside in [(fresh, local, True), (fresh, remote, False)]:
        assert route_after_segment(state, runtime, beside=beside) == ["index"]
        assert route_summary(state, runtime, beside=beside) == ["summarize"]
    for runtime in (remote, local):
        assert route_after_segment(given, runtime) == ["index"]
        assert route_summary(given, runtime) == ["factscore"]
    assert not summarize_beside_index(fresh, Context(model="local:smollm2"))
