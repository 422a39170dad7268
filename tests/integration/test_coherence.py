"""BooookScore over real HTTP (scripted per sentence), as a subgraph, and on the embedded model."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from graphs.coherence import build_graph, graph
from storyjudge.core.context import Context
from storyjudge.core.models import local_model_path
from storyjudge.core.scripted_server import OpenAIServer
from storyjudge.core.textsplit import sentences
from storyjudge.core.usage import Usage, merge_usage

TYPES = ["entity omission", "event omission", "causal omission", "salience", "discontinuity", "duplication"]
SUMMARY = " ".join(
    f"In chapter {i}, {name} {verb} the {thing} near the old mill."
    for i, (name, verb, thing) in enumerate(
        [
            (n, v, t)
            for n in ("Ada", "Brann", "Cole", "Dara", "Edda")
            for v, t in (("finds", "letter"), ("hides", "key"), ("loses", "map")) * 2
        ][:30],
        start=1,
    )
)


def scripted_answer(number: int) -> str:
    """Every third sentence is confused (with a rotating type); the rest are clean."""
    if number % 3:
        return "Questions: no confusion\nTypes: no confusion"
    kind = TYPES[(number // 3) % len(TYPES)]
    return f"Questions: What happened before sentence {number}?\nTypes: {kind}"


def test_score_equals_scripted_share_over_http(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    parts = sentences(SUMMARY)
    assert len(parts) == 30
    seen: dict[int, str] = {}

    def responder(body: dict[str, Any]) -> str:
        text = body["messages"][0]["content"]
        match = re.search(r'<sentence number="(\d+)">\n(.*?)\n</sentence>', text, re.S)
        assert match and "<summary>\n" + SUMMARY + "\n</summary>" in text
        seen[int(match.group(1))] = match.group(2)
        return scripted_answer(int(match.group(1)))

    server = scripted_server(responder, latency=0.05)
    out = graph.invoke({"summary": SUMMARY}, context=ctx_for(server, concurrency=8))
    assert seen == {i + 1: sentence for i, sentence in enumerate(parts)}
    assert out["coherence"]["score"] == pytest.approx(20 / 30)
    assert server.max_in_flight <= 8
    by_index = {a["index"]: a for a in out["annotations"]}
    for number in range(1, 31):
        annotation = by_index[number - 1]
        assert annotation["confused"] is (number % 3 == 0)
        assert annotation["sentence"] == parts[number - 1]
    rates = out["coherence"]["per_type_rates"]
    assert sum(rates.values()) == pytest.approx(10 / 30)


class GuardState(TypedDict, total=False):
    summary: str
    coherence: dict[str, Any]
    usage: Annotated[Usage, merge_usage]
    verdict: str


def test_works_as_a_subgraph_for_a_coherence_guard(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(lambda body: "Questions: Who?\nTypes: entity omission")

    def decide(state: GuardState) -> dict[str, Any]:
        score = state["coherence"]["score"]
        assert score == state["coherence"]["summaries"][0]["score"]
        return {"verdict": "reject" if score < 0.5 else "accept"}

    builder = StateGraph(GuardState, context_schema=Context)
    builder.add_node("coherence", build_graph())
    builder.add_node("decide", decide)
    builder.add_edge(START, "coherence")
    builder.add_edge("coherence", "decide")
    builder.add_edge("decide", END)
    out = builder.compile().invoke({"summary": "Ada runs. Brann waits."}, context=ctx_for(server))
    assert out["verdict"] == "reject"
    assert out["coherence"]["score"] == 0.0
    assert out["usage"]["openai:scripted"]["calls"] == 2
    assert out["summary"] == "Ada runs. Brann waits."


def _embedded_model_available() -> bool:
    try:
        local_model_path("smollm2")
        import llama_cpp  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _embedded_model_available(), reason="embedded model not installed")
def test_runs_offline_on_the_embedded_model(tmp_path: Any) -> None:
    ctx = Context(model="local:smollm2", cache_dir=str(tmp_path), parse_retries=0, max_output_tokens=64)
    out = graph.invoke({"summary": "Mara finds a map in the attic."}, context=ctx)
    (annotation,) = out["annotations"]
    card = out["coherence"]["summaries"][0]
    if annotation["confused"] is None:  # an unreadable answer is counted as such, never defaulted
        assert (card["scored"], card["unparsed"]) == (0, 1) and card["score"] is None
    else:
        assert isinstance(annotation["confused"], bool) and annotation["raw"]
        assert (card["scored"], card["unparsed"]) == (1, 0)
        assert card["score"] in (None, 0.0 if annotation["confused"] else 1.0)  # None: its judge check failed
    assert out["coherence"]["model"] == "local:smollm2"
    assert out["usage"]["local:smollm2"]["calls"] == 1
