"""``storyjudge doctor``: the smoke job. Resolves models, makes one structured call and one embedding, times them."""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from prompts import load
from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import console, fail, print_models
from storyjudge.apps.cli.options import Settings, model_settings, with_settings
from storyjudge.core.context import ROLES, ConfigError
from storyjudge.core.llm import ModelError, ask_structured, require_models
from storyjudge.core.models import resolve_spec
from storyjudge.core.usage import totals


class DoctorAnswer(BaseModel):
    """What the smoke call asks for: a rationale, then a verdict."""

    rationale: str = Field(description="One sentence of reasoning.")
    supported: bool = Field(description="Whether the claim follows from the passage.")


@app.command()
@with_settings(*model_settings(*ROLES), "run_dir", "concurrency", "embedder")
def doctor(*, settings: Settings) -> None:
    """Check the set-up: print the models in use, make one structured LLM call and one embedding."""
    ctx = settings.context(run_dir=".storyjudge/doctor")
    try:  # a spec that cannot work fails here, before a table that would describe it as usable
        require_models(ctx, ROLES)
    except ConfigError as exc:
        fail(str(exc))
    from storyjudge.core.embeddings import get_embedder, preload

    preload(ctx.embedder)  # torch and the weights load while the structured call waits on the network
    print_models(ctx)
    prompt = load("doctor")
    messages = [
        ("user", prompt.render(passage="Macbeth murders King Duncan in his sleep.", claim="Duncan dies."))
    ]
    started = time.perf_counter()
    try:
        answer = ask_structured(ctx, "judge", prompt, messages, DoctorAnswer)  # type: ignore[arg-type]
    except (ModelError, ConfigError) as exc:
        fail(str(exc))
    llm_seconds = time.perf_counter() - started
    spec = resolve_spec(ctx, "judge")
    usage = totals(answer.usage)
    if not answer.ok:
        fail(f"{spec} gave no parseable structured answer after {answer.attempts} attempt(s): {answer.error}")
    console.print(
        f"[green]ok[/] structured call to {spec}: supported={answer.value.supported} "  # type: ignore[union-attr]
        f"({llm_seconds:.2f}s, {usage['input_tokens']} in / {usage['output_tokens']} out tokens"
        f"{', cached' if answer.cached else ''})"
    )
    started = time.perf_counter()
    try:
        emb = get_embedder(ctx.embedder)
    except ConfigError as exc:
        fail(str(exc))
    load_seconds = time.perf_counter() - started
    passages = [f"Scene {i}: Macbeth speaks with Banquo on the heath near Forres." for i in range(32)]
    started = time.perf_counter()
    vectors = emb.embed_documents(passages)
    embed_seconds = time.perf_counter() - started
    console.print(
        f"[green]ok[/] embedder {emb.name}: {len(vectors[0])}-d vectors, window {emb.window_tokens} tokens, "
        f"load {load_seconds:.1f}s, {len(passages) / embed_seconds:.0f} passages/s"
    )
    console.print("[bold green]doctor: all checks passed[/]")
