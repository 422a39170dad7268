"""LLM usage accounting: calls, tokens, cache hits and an estimated cost, merged by the ``merge_usage`` reducer."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

# USD per million tokens (input, output) for known OpenAI models; other models report no cost.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o4-mini": (1.10, 4.40),
}


class ModelUsage(TypedDict):
    """Counters for one model spec."""

    calls: int
    cache_hits: int
    input_tokens: int
    output_tokens: int
    failures: int
    cost_usd: float


Usage = dict[str, ModelUsage]
"""Usage per model spec."""


def empty_model_usage(**counts: Any) -> ModelUsage:
    """All counters at zero, but ``counts``."""
    zero = ModelUsage(calls=0, cache_hits=0, input_tokens=0, output_tokens=0, failures=0, cost_usd=0.0)
    return ModelUsage(**{**zero, **counts})  # type: ignore[typeddict-item]


def price(spec: str, input_tokens: int, output_tokens: int) -> float:
    """Estimated USD of one call, 0 when the model's price is unknown (local or custom models)."""
    if not price_known(spec):
        return 0.0
    _, _, name = spec.partition(":")
    price_in, price_out = PRICES_PER_MTOK[name]
    return (input_tokens * price_in + output_tokens * price_out) / 1_000_000


def price_known(spec: str) -> bool:
    """Whether ``spec`` has a list price here (``PRICES_PER_MTOK``): a cost of 0 for any other is unknown."""
    provider, _, name = spec.partition(":")
    return provider == "openai" and name in PRICES_PER_MTOK


def cost_text(usage: Usage | None) -> str:
    """The estimated cost in words: ``$0.0123``, ``price unknown``, or ``$0.0123 + price unknown for X``."""
    called = {spec: entry for spec, entry in (usage or {}).items() if entry.get("calls", 0) > 0}
    unknown = sorted(spec for spec in called if not price_known(spec))
    priced = sum(entry.get("cost_usd", 0.0) for spec, entry in called.items() if price_known(spec))
    if not unknown:
        return f"${priced:.4f}"
    if len(unknown) == len(called):
        return "price unknown"
    return f"${priced:.4f} + price unknown for {', '.join(unknown)}"


def one_call(spec: str, input_tokens: int, output_tokens: int, *, cached: bool) -> Usage:
    """Usage of a single call (a cache hit costs nothing and counts as a hit, not a call)."""
    if cached:
        return {spec: empty_model_usage(cache_hits=1)}
    counts = {"calls": 1, "input_tokens": input_tokens, "output_tokens": output_tokens}
    return {spec: empty_model_usage(**counts, cost_usd=price(spec, input_tokens, output_tokens))}


def failure(spec: str) -> Usage:
    """One logical call that ended without a usable answer (its attempts are counted separately)."""
    return {spec: empty_model_usage(failures=1)}


def merge_usage(left: Usage | None, right: Usage | None) -> Usage:
    """Reducer: add two usage dicts model by model."""
    merged: Usage = {spec: ModelUsage(**entry) for spec, entry in (left or {}).items()}
    for spec, entry in (right or {}).items():
        old = merged.get(spec, empty_model_usage())
        added = {key: old[key] + entry.get(key, 0) for key in old}  # type: ignore[literal-required]
        merged[spec] = empty_model_usage(**added | {"cost_usd": round(added["cost_usd"], 8)})
    return merged


def totals(usage: Usage | None) -> dict[str, Any]:
    """Sums over all models, for reports."""
    total: dict[str, Any] = dict(empty_model_usage())
    for entry in (usage or {}).values():
        for key, value in entry.items():
            total[key] += value
    total["cost_usd"] = round(total["cost_usd"], 6)
    return total


LEDGER = "usage.jsonl"
"""The run's usage ledger in its run directory: one line per request sent, per answer, per cache hit."""
_ledger_lock = threading.Lock()


def _ledger(run_dir: str) -> Path | None:
    return Path(run_dir) / LEDGER if run_dir and Path(run_dir).is_dir() else None


def record(
    run_dir: str,
    spec: str,
    event: str,
    input_tokens: int = 0,
    output_tokens: int = 0,
    *,
    seconds: float | None = None,
) -> None:
    """Append one usage event (``sent``, ``answer`` or ``hit``) to the run's ledger as the call happens.

    The state's usage loses the calls of a task interrupted by a crash; the ledger keeps them.
    """
    path = _ledger(run_dir)
    if path is None:
        return
    entry: dict[str, Any] = {"spec": spec, "event": event, "in": input_tokens, "out": output_tokens}
    if seconds is not None:
        entry["s"] = round(seconds, 3)
    with _ledger_lock, path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def reset_ledger(run_dir: str) -> None:
    """Start a new run's ledger (an earlier run's stays as ``usage.jsonl.previous``)."""
    path = _ledger(run_dir)
    if path is not None and path.exists():
        path.replace(path.with_name(LEDGER + ".previous"))


def run_usage(run_dir: str, state_usage: Usage | None) -> Usage:
    """The run's usage: requests, tokens and cache hits from its ledger (else the state), failures from the state."""
    path = _ledger(run_dir)
    if path is None or not path.exists():
        return dict(state_usage or {})
    usage: Usage = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            spec, event = str(entry["spec"]), entry["event"]
        except (ValueError, KeyError, TypeError):
            continue  # a line cut off by a kill
        target = usage.setdefault(spec, empty_model_usage())
        if event == "sent":
            target["calls"] += 1
        elif event == "hit":
            target["cache_hits"] += 1
        elif event == "answer":
            n_in, n_out = int(entry.get("in", 0)), int(entry.get("out", 0))
            target["input_tokens"] += n_in
            target["output_tokens"] += n_out
            target["cost_usd"] = round(target["cost_usd"] + price(spec, n_in, n_out), 8)
    for spec, entry in (state_usage or {}).items():
        usage.setdefault(spec, empty_model_usage())["failures"] += entry.get("failures", 0)
    return usage


def measured_seconds(run_dir: str | Path, spec: str) -> list[float]:
    """The seconds each answered request of ``spec`` took in the runs of a directory (its ledgers), oldest first."""
    found: list[float] = []
    for name in (LEDGER + ".previous", LEDGER):
        path = Path(run_dir) / name
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                entry = json.loads(line)
                if entry.get("spec") == spec and entry.get("event") == "answer" and "s" in entry:
                    found.append(float(entry["s"]))
            except (ValueError, TypeError, AttributeError):
                continue  # a line cut off by a kill
    return found
