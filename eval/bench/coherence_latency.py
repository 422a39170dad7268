"""Cost and wall time of BooookScore on a 30-sentence summary, against the scripted server with added latency.

Measures, for concurrency 1 and 8 (per-sentence, the paper's setting) and for batched mode: LLM calls,
prompt tokens per sentence (cl100k_base, counted on the requests the server received), the prefix all requests
share (what provider prefix caching can reuse), wall time, the most requests the server saw in flight, and a
cached rerun. Run from the repository root::

    python -m eval.bench.coherence_latency [--latency 0.5] [--sentences 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from typing import Any

from graphs.coherence import build_graph
from storyjudge.apps.scripted_server import OpenAIServer
from storyjudge.core.context import Context
from storyjudge.core.textsplit import sentences
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import totals

NAMES = ("Mara", "Oren", "the clerk", "Ilsa", "the Guild", "her grandmother")
ACTIONS = (
    "finds a locked logbook in the lamp room",
    "refuses to sell the lighthouse",
    "repairs the great lamp during a storm",
    "reads the smugglers' ledger by candlelight",
    "sails to the mainland to sell fish",
    "argues about the price of oil",
)


def make_summary(n: int) -> str:
    """A summary of ``n`` plain sentences (each one sentence to the splitter)."""
    return " ".join(
        f"In part {i + 1}, {NAMES[i % len(NAMES)].capitalize()} {ACTIONS[(i * 5) % len(ACTIONS)]}."
        for i in range(n)
    )


def responder(body: dict[str, Any]) -> str:
    """Every fourth sentence is confused; batched requests get the JSON equivalent."""
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if "[Your sentences]" in text:
        numbers = [int(n) for n in re.findall(r"^(\d+)\. ", text.split("[Your sentences]")[1], re.M)]
        listed = [
            {"index": n, "questions": [f"What led to part {n}?"], "types": ["causal omission"]}
            for n in numbers
            if n % 4 == 0
        ]
        return json.dumps({"sentences": listed})
    number = int(re.findall(r'<sentence number="(\d+)">', text)[-1])
    if number % 4 == 0:
        return f"Questions: What led to part {number}?\nTypes: causal omission"
    return "Questions: no confusion\nTypes: no confusion"


def measure(server: OpenAIServer, summary: str, cache_dir: str, **fields: Any) -> dict[str, Any]:
    """One graph run; the server's request log gives calls and prompt tokens."""
    graph = build_graph()
    ctx = Context(
        model="openai:scripted", base_url=server.base_url, cache_dir=cache_dir, retry_budget_s=0, **fields
    )
    before = len(server.completions)
    server.max_in_flight = 0
    started = time.perf_counter()
    out = graph.invoke({"summary": summary}, context=ctx)
    wall = time.perf_counter() - started
    bodies = server.completions[before:]
    prompt_tokens = [sum(count_tokens(m["content"]) for m in b["messages"]) for b in bodies]
    texts = ["\n".join(m["content"] for m in b["messages"]) for b in bodies]
    shared = os.path.commonprefix(texts) if len(texts) > 1 else ""
    n = out["coherence"]["sentences"]
    usage = totals(out["usage"])
    return {
        "mode": out["coherence"]["mode"],
        "concurrency": ctx.concurrency,
        "sentences": n,
        "calls": len(bodies),
        "cache_hits": usage["cache_hits"],
        "prompt_tokens_total": sum(prompt_tokens),
        "prompt_tokens_per_sentence": round(sum(prompt_tokens) / n, 1) if n else 0.0,
        "prompt_tokens_per_call": round(sum(prompt_tokens) / len(bodies), 1) if bodies else 0.0,
        "shared_prefix_tokens": count_tokens(shared),
        "wall_s": round(wall, 2),
        "max_in_flight": server.max_in_flight,
        "score": out["coherence"]["score"],
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the measurements and print one line per setting."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the server waits per request")
    parser.add_argument("--sentences", type=int, default=30)
    parser.add_argument("--json", dest="json_path", default="", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    summary = make_summary(args.sentences)
    assert len(sentences(summary)) == args.sentences, "the splitter must see one sentence per generated line"
    rows = []
    with OpenAIServer(responder, latency=args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        for label, fields in (
            ("per-sentence, concurrency 1", {"concurrency": 1}),
            ("per-sentence, concurrency 8", {"concurrency": 8}),
            ("batched, concurrency 8", {"concurrency": 8, "batched_coherence": True}),
        ):
            cache = f"{tmp}/{label.replace(' ', '_').replace(',', '')}"
            row = {"setting": label, "latency_s": args.latency, **measure(server, summary, cache, **fields)}
            rows.append(row)
            cached = measure(server, summary, cache, **fields)
            rows.append({"setting": label + " (cached rerun)", "latency_s": args.latency, **cached})
    for row in rows:
        print(
            f"{row['setting']:<42} calls {row['calls']:>3}  cache hits {row['cache_hits']:>3}  "
            f"prompt tokens/sentence {row['prompt_tokens_per_sentence']:>7} (shared prefix "
            f"{row['shared_prefix_tokens']:>5})  wall {row['wall_s']:>6.2f}s  "
            f"max in flight {row['max_in_flight']}  score {row['score']:.3f}"
        )
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)
    return rows


if __name__ == "__main__":
    main()
