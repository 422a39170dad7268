"""Goal 5: the default embedder's achieved FLOP/s as a share of this machine's float32 matmul FLOP/s.

An encoder's forward pass is almost all float32 matmuls, so the bound is ``torch.mm`` on the embedder's
threads. The embedder's FLOPs come from its shape; passages of exactly 128 tokens are embedded as indexing
does. Run in a process of its own: ``python -m eval.bench.embedding_bound --json PATH [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

SIZES = ((128 * 32, 384, 1536), (128 * 32, 1536, 384), (128 * 32, 384, 384), (1024, 1024, 1024))
"""(m, k, n) of the matmuls timed: the encoder's feed-forward up and down and a projection for a batch of 32
128-token passages, and a square product."""


SHAPE = ("num_hidden_layers", "hidden_size", "intermediate_size")


def matmul_flops(threads: int, seconds: float = 1.0) -> dict[str, Any]:
    """Float32 FLOP/s per size on ``threads`` threads, each timed over ``seconds`` (as long as a batch)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    per_size: dict[str, float] = {}
    try:
        with torch.inference_mode():
            for m, k, n in SIZES:
                a, b = torch.randn(m, k), torch.randn(k, n)
                torch.mm(a, b)  # warm-up: allocation and kernel choice
                started, done = time.perf_counter(), 0
                while time.perf_counter() - started < seconds:
                    torch.mm(a, b)
                    done += 1
                per_size[f"{m}x{k}x{n}"] = 2 * m * k * n * done / (time.perf_counter() - started)
    finally:
        torch.set_num_threads(before)
    return {
        "threads": threads,
        "per_size_gflops": {key: round(value / 1e9, 1) for key, value in per_size.items()},
        "bound_gflops": round(max(per_size.values()) / 1e9, 1),
    }


def flops_per_passage(config: dict[str, Any], tokens: int) -> float:
    """Forward-pass FLOPs of a BERT-style encoder on one passage of ``tokens`` tokens."""
    layers, hidden, intermediate = (int(config[key]) for key in SHAPE)
    projections = 2 * tokens * (4 * hidden * hidden + 2 * hidden * intermediate)
    attention = 2 * 2 * tokens * tokens * hidden  # Q K^T and the weighted sum of V, over all heads
    return float(layers * (projections + attention))


def passages_of(tokenizer: Any, tokens: int, count: int) -> list[str]:
    """``count`` distinct passages that tokenize to exactly ``tokens`` tokens with [CLS] and [SEP]."""
    words = (
        "the witches meet macbeth upon the heath and hail him thane of cawdor and king hereafter while banquo "
        "asks what they are and whether they can look into the seeds of time"
    ).split()
    out = []  # a decoded text can re-tokenize one token longer or shorter: only the exact ones are kept
    for i in range(count):
        ids: list[int] = []
        j = i
        while len(ids) < tokens - 2:
            ids += tokenizer(words[j % len(words)], add_special_tokens=False)["input_ids"]
            j += 7
        out.append(tokenizer.decode(ids[: tokens - 2]))
    return [t for t in out if len(tokenizer(t)["input_ids"]) == tokens]


def run(tokens: int = 128, passages: int = 256, repeat: int = 3) -> dict[str, Any]:
    """The bound and the embedder, interleaved (the best round of each, against load); share = achieved / bound."""
    import torch

    from storyjudge.core.embeddings import ENCODE_BATCH, get_embedder, minilm_path
    from storyjudge.core.sceneindex import BATCH

    embedder = get_embedder("minilm")
    threads = torch.get_num_threads()  # what embed_documents runs long batches on
    config = json.loads((minilm_path() / "config.json").read_text(encoding="utf-8"))
    texts = passages_of(embedder.model.tokenizer, tokens, passages)
    embedder.embed_documents(texts[:BATCH])  # warm-up
    best = float("inf")  # seconds per call of BATCH passages
    bounds = []
    for _ in range(repeat):
        bounds.append(matmul_flops(threads))
        for begin in range(0, len(texts) - BATCH + 1, BATCH):  # full calls only
            started = time.perf_counter()
            embedder.embed_documents(texts[begin : begin + BATCH])
            best = min(best, time.perf_counter() - started)
    bound = max(bounds, key=lambda found: found["bound_gflops"])
    per_second = BATCH / best
    per_passage = flops_per_passage(config, tokens)
    achieved = per_second * per_passage / 1e9
    return {
        "shape": {key: config[key] for key in SHAPE},
        "tokens_per_passage": tokens,
        "passages": len(texts),
        "batch": BATCH,
        "encode_batch": ENCODE_BATCH,
        "threads": threads,
        "torch": torch.__version__,
        "passages_per_s": round(per_second, 1),
        "gflop_per_passage": round(per_passage / 1e9, 3),
        "achieved_gflops": round(achieved, 1),
        "matmul": bound,
        "share": round(achieved / bound["bound_gflops"], 3),
    }


def main(argv: list[str] | None = None) -> None:
    """Write the measurement as JSON to ``--json``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", dest="json_path", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many passes over the passages")
    args = parser.parse_args(argv)
    args.json_path.write_text(json.dumps(run(repeat=args.repeat), indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
