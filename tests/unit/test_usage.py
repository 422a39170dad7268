"""Usage accounting: per-model counters that merge across branches, totals, and cost estimates."""

from __future__ import annotations

import operator
from functools import reduce
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from storyjudge.core.usage import (
    PRICES_PER_MTOK,
    Usage,
    empty_model_usage,
    failure,
    merge_usage,
    one_call,
    price,
    totals,
)


def test_one_call_counts_tokens_and_cost() -> None:
    usage = one_call("openai:gpt-4o-mini", 1_000_000, 100_000, cached=False)
    entry = usage["openai:gpt-4o-mini"]
    assert (entry["calls"], entry["cache_hits"], entry["failures"]) == (1, 0, 0)
    assert (entry["input_tokens"], entry["output_tokens"]) == (1_000_000, 100_000)
    assert entry["cost_usd"] == pytest.approx(0.15 + 0.06)


def test_a_cache_hit_is_free() -> None:
    entry = one_call("openai:gpt-4o", 500, 500, cached=True)["openai:gpt-4o"]
    assert entry == {**empty_model_usage(), "cache_hits": 1}


@pytest.mark.parametrize("name", sorted(PRICES_PER_MTOK))
def test_prices_of_known_models(name: str) -> None:
    price_in, price_out = PRICES_PER_MTOK[name]
    assert price(f"openai:{name}", 2_000_000, 1_000_000) == pytest.approx(2 * price_in + price_out)


@pytest.mark.parametrize("spec", ["local:smollm2", "openai:my-vllm-model", "anthropic:gpt-4o-mini", "gpt-4o"])
def test_unknown_and_local_models_cost_nothing(spec: str) -> None:
    assert price(spec, 10_000, 10_000) == 0.0
    assert one_call(spec, 10_000, 10_000, cached=False)[spec]["cost_usd"] == 0.0


def test_merge_adds_per_model_and_keeps_inputs_unchanged() -> None:
    left = one_call("openai:gpt-4o-mini", 100, 10, cached=False)
    right = merge_usage(
        one_call("openai:gpt-4o-mini", 50, 5, cached=True), one_call("local:smollm2", 7, 3, cached=False)
    )
    before = {spec: dict(entry) for spec, entry in left.items()}
    merged = merge_usage(left, right)
    assert {spec: dict(entry) for spec, entry in left.items()} == before
    mini = merged["openai:gpt-4o-mini"]
    assert (mini["calls"], mini["cache_hits"], mini["input_tokens"], mini["output_tokens"]) == (1, 1, 100, 10)
    assert merged["local:smollm2"]["input_tokens"] == 7


def test_merge_handles_missing_sides_and_is_order_independent() -> None:
    a = one_call("openai:gpt-4o", 10, 1, cached=False)
    b = merge_usage(failure("openai:gpt-4o"), one_call("local:smollm2", 3, 3, cached=False))
    assert merge_usage(None, None) == {}
    assert merge_usage(a, None) == a
    assert merge_usage(None, a) == a
    assert merge_usage(a, b) == merge_usage(b, a)


def test_totals_over_many_branches() -> None:
    branches = [one_call("openai:gpt-4o-mini", 1000, 100, cached=False) for _ in range(10)]
    branches += [one_call("openai:gpt-4o-mini", 1000, 100, cached=True) for _ in range(5)]
    branches += [failure("local:smollm2"), one_call("local:smollm2", 40, 4, cached=False)]
    nothing: Usage = {}
    total = totals(reduce(merge_usage, branches, nothing))
    assert total["calls"] == 11
    assert total["cache_hits"] == 5
    assert total["failures"] == 1
    assert total["input_tokens"] == 10_040
    assert total["output_tokens"] == 1_004
    assert total["cost_usd"] == pytest.approx(10 * (1000 * 0.15 + 100 * 0.60) / 1e6)
    assert totals(None) == {**empty_model_usage()}


class FanOutState(TypedDict, total=False):
    items: list[int]
    done: Annotated[list[int], operator.add]
    usage: Annotated[Usage, merge_usage]


def test_merge_usage_works_as_a_langgraph_reducer() -> None:
    def fan_out(state: FanOutState) -> list[Send]:
        return [Send("work", {"items": [i]}) for i in state["items"]]

    def work(state: FanOutState) -> dict[str, object]:
        return {"done": state["items"], "usage": one_call("openai:gpt-4o-mini", 10, 1, cached=False)}

    builder = StateGraph(FanOutState)
    builder.add_node("work", work)
    builder.add_conditional_edges(START, fan_out, ["work"])
    builder.add_edge("work", END)
    result = builder.compile().invoke({"items": [1, 2, 3, 4]})
    assert sorted(result["done"]) == [1, 2, 3, 4]
    assert totals(result["usage"])["calls"] == 4
    assert totals(result["usage"])["input_tokens"] == 40


def test_cost_text_says_price_unknown_for_a_model_without_a_price() -> None:
    from storyjudge.core.usage import cost_text, merge_usage, one_call

    priced = one_call("openai:gpt-4o-mini", 1_000_000, 0, cached=False)
    unpriced = one_call("openai:my-model", 1000, 10, cached=False)
    assert cost_text(priced) == "$0.1500"
    assert cost_text(unpriced) == "price unknown"
    assert cost_text(merge_usage(priced, unpriced)) == "$0.1500 + price unknown for openai:my-model"
    assert cost_text(one_call("local:smollm2", 10, 10, cached=True)) == "$0.0000"  # cache hits cost nothing
    assert cost_text({}) == "$0.0000"
