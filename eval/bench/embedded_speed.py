"""Speed of the embedded defaults: SmolLM2 prompt and generation tokens/s, and embedder passages/s.

The model is measured twice on the same GGUF file: through storyjudge (``ask_text``: chat template,
LangChain, cache lookup, usage accounting) and through ``llama_cpp.Llama`` directly with the same context
settings, so the overhead of the wrapper is visible. Token counts are the model's own (llama.cpp usage), not
cl100k. Each timed prompt starts differently, because llama.cpp reuses the key/value cache of a shared prompt
prefix. Run from the repository root::

    python -m eval.bench.embedded_speed [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from prompts import Prompt
from storyjudge.core.context import Context
from storyjudge.core.llm import Message, ask_text
from storyjudge.core.models import LOCAL_MODELS, local_model_path, local_threads
from storyjudge.core.textsplit import split_by_tokens

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "frankenstein.txt"
PROMPT = Prompt(name="bench", version="1", text="benchmark")
PROMPT_TOKENS = 1500
GENERATED_TOKENS = 200
STORY_REQUEST = "Write a long, detailed story about a lighthouse keeper who finds a locked logbook."


def story_text() -> str:
    """Prose to build prompts and passages from (the public-domain example novel)."""
    return EXAMPLE.read_text(encoding="utf-8")


def model_tokens(text: str, llama: Any) -> int:
    """Tokens of ``text`` in the model's own vocabulary."""
    return len(llama.tokenize(text.encode("utf-8"), add_bos=False))


def long_prompt(llama: Any, run: int, tokens: int = PROMPT_TOKENS) -> str:
    """About ``tokens`` model tokens of the novel after a run-specific line (defeats prefix reuse)."""
    text = story_text()
    start = 20_000 + run * 9_000
    words = text[start : start + tokens * 8]
    pieces = split_by_tokens(words, tokens - 40, count=lambda s: model_tokens(s, llama))
    return f"Passage {run}. Summarize it in one sentence.\n\n{pieces[0]}"


def rate(tokens: list[int], seconds: list[float]) -> float:
    """Tokens per second over all runs."""
    return round(sum(tokens) / sum(seconds), 1) if sum(seconds) else 0.0


class Clock:
    """Wall and process CPU time of a block (CPU time: the speed a free core would give on a busy machine)."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def bench_storyjudge(llama: Any, repeats: int) -> dict[str, Any]:
    """Prompt and generation speed through ``storyjudge.core.llm.ask_text`` (fresh cache: every call is real)."""
    with tempfile.TemporaryDirectory() as cache:
        ctx = Context(model="local:smollm2", cache_dir=cache, max_output_tokens=GENERATED_TOKENS)
        ask_text(ctx, "judge", PROMPT, [("user", "Warm up.")], max_tokens=1)  # loads the model
        prompt_tokens, prompt_wall, prompt_cpu = [], [], []
        for run in range(repeats):
            messages: list[Message] = [("user", long_prompt(llama, run))]
            with Clock() as clock:
                answer = ask_text(ctx, "judge", PROMPT, messages, max_tokens=1)
            prompt_wall.append(clock.wall)
            prompt_cpu.append(clock.cpu)
            prompt_tokens.append(answer.usage["local:smollm2"]["input_tokens"])
        wall_per_token = sum(prompt_wall) / sum(prompt_tokens)
        cpu_per_token = sum(prompt_cpu) / sum(prompt_tokens)
        gen_tokens, gen_wall, gen_cpu = [], [], []
        for run in range(repeats):
            messages = [("user", f"{STORY_REQUEST} ({run})")]
            with Clock() as clock:
                answer = ask_text(ctx, "judge", PROMPT, messages, max_tokens=GENERATED_TOKENS)
            usage = answer.usage["local:smollm2"]
            # subtract the short prompt's share, measured above
            gen_wall.append(max(1e-9, clock.wall - usage["input_tokens"] * wall_per_token))
            gen_cpu.append(max(1e-9, clock.cpu - usage["input_tokens"] * cpu_per_token))
            gen_tokens.append(usage["output_tokens"])
    return {
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_per_s": rate(prompt_tokens, prompt_wall),
        "prompt_tokens_per_cpu_s": rate(prompt_tokens, prompt_cpu),
        "generated_tokens": gen_tokens,
        "generation_tokens_per_s": rate(gen_tokens, gen_wall),
        "generation_tokens_per_cpu_s": rate(gen_tokens, gen_cpu),
    }


def bench_llama_direct(llama: Any, repeats: int) -> dict[str, Any]:
    """The same measurements on ``llama_cpp.Llama`` directly, with llama.cpp's own timers."""
    import llama_cpp

    def timed(prompt: str, max_tokens: int, **kwargs: Any) -> tuple[Any, Clock]:
        llama.reset()
        llama_cpp.llama_perf_context_reset(llama.ctx)
        with Clock() as clock:
            llama.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, **kwargs)
        return llama_cpp.llama_perf_context(llama.ctx), clock

    timed("Warm up.", 1)
    prompt_tokens, prompt_wall, prompt_cpu = [], [], []
    for run in range(repeats):
        perf, clock = timed(long_prompt(llama, run), 1)
        prompt_tokens.append(perf.n_p_eval)
        prompt_wall.append(perf.t_p_eval_ms / 1000)
        prompt_cpu.append(clock.cpu)  # includes one sampled token: negligible next to the prompt
    gen_tokens, gen_wall = [], []
    no_eos = {llama.token_eos(): -1e9}  # always generate the full budget
    for run in range(repeats):
        perf, _ = timed(f"{STORY_REQUEST} ({run})\n", GENERATED_TOKENS, logit_bias=no_eos)
        gen_tokens.append(perf.n_eval)
        gen_wall.append(perf.t_eval_ms / 1000)
    return {
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_per_s": rate(prompt_tokens, prompt_wall),
        "prompt_tokens_per_cpu_s": rate(prompt_tokens, prompt_cpu),
        "generated_tokens": gen_tokens,
        "generation_tokens_per_s": rate(gen_tokens, gen_wall),
    }


def bench_embedder(passages: int) -> dict[str, Any]:
    """Passages per second of the default embedder on passages that fill its 256-token window."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging as transformers_logging

    from storyjudge.core.embeddings import get_embedder

    transformers_logging.set_verbosity_error()  # counting a whole novel's tokens is deliberate here

    started = time.perf_counter()
    embedder = get_embedder("minilm")
    load_seconds = time.perf_counter() - started
    budget = embedder.window_tokens - 2  # [CLS] and [SEP] take two places of the window
    chunks = split_by_tokens(story_text()[:400_000], budget, count=embedder.count_tokens)
    chunks = [c for c in chunks if embedder.count_tokens(c) >= budget - 16][:passages]
    embedder.embed_documents(chunks[:8])  # warm-up
    with Clock() as clock:
        embedder.embed_documents(chunks)
    return {
        "load_seconds": round(load_seconds, 2),
        "passages": len(chunks),
        "mean_passage_tokens": round(statistics.mean(embedder.count_tokens(c) for c in chunks), 1),
        "passages_per_s": rate([len(chunks)], [clock.wall]),
        "passages_per_cpu_s": rate([len(chunks)], [clock.cpu]),
        "torch_threads": torch_threads(),
    }


def torch_threads() -> int:
    """Intra-op threads torch uses for the embedder."""
    import torch

    return int(torch.get_num_threads())


def main() -> None:
    """Run the three measurements and print (and optionally save) them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per measurement")
    parser.add_argument("--passages", type=int, default=128, help="passages for the embedder measurement")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()

    from llama_cpp import Llama

    local = LOCAL_MODELS["smollm2"]
    generation_threads, prompt_threads = local_threads()
    threads = {"generation": generation_threads, "prompt": prompt_threads}
    llama = Llama(  # the settings storyjudge.core.models uses
        model_path=str(local_model_path("smollm2")),
        n_ctx=local.context_window,
        n_threads=threads["generation"],
        n_threads_batch=threads["prompt"],
        n_batch=512,
        verbose=False,
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    results = {
        "model": "local:smollm2 (SmolLM2-135M-Instruct Q4_1)",
        "threads": threads,
        "load_average_1min_at_start": load,
        "storyjudge": bench_storyjudge(llama, args.repeats),
        "llama_cpp_direct": bench_llama_direct(llama, args.repeats),
        "embedder_minilm_256_token_passages": bench_embedder(args.passages),
    }
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
