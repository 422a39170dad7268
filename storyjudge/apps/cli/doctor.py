"""``storyjudge doctor``: the smoke job. Resolves models, calls a server model once, checks the model files."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from pydantic import BaseModel, Field
from rich.markup import escape

from prompts import load
from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import console, fail, failing, print_models
from storyjudge.apps.cli.options import Settings, model_settings, with_settings
from storyjudge.core.context import ROLES, ConfigError, Context
from storyjudge.core.models import check_local_model, is_local, resolve_spec
from storyjudge.core.usage import totals


class DoctorAnswer(BaseModel):
    """What the smoke call asks for: a rationale, then a verdict."""

    rationale: str = Field(description="One sentence of reasoning.")
    supported: bool = Field(description="Whether the claim follows from the passage.")


@app.command()
@with_settings(*model_settings(*ROLES), "run_dir", "concurrency", "embedder")
def doctor(
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="Also load the embedder and the embedded model and use them: one embedding of 32 passages, "
            "one structured call to an embedded model (seconds more). Default: off.",
        ),
    ] = False,
    *,
    settings: Settings,
) -> None:
    """Check the set-up: the models in use, one structured call to a server, the model files; --deep runs them.

    A server model is called once: only a call proves the address, the key and structured output. The embedder
    and an embedded model are checked by their files, without loading weights; ``--deep`` loads and uses them.
    """
    from storyjudge.core.llm import require_models  # imports LangChain: only a command that runs needs it
    from storyjudge.core.servercheck import check_server

    ctx = settings.context(run_dir=".storyjudge/doctor")
    ctx = ctx.replace(retry_budget_s=min(ctx.retry_budget_s, 30.0))  # a smoke check waits seconds
    # a spec or a server that cannot work fails here, before a table that would describe it as usable
    with failing(ConfigError):
        require_models(ctx, ROLES)
        check_server(ctx, {resolve_spec(ctx, role) for role in ROLES})
    print_models(ctx)
    spec = resolve_spec(ctx, "judge")
    if is_local(spec) and not deep:
        with failing(ConfigError):
            found = check_local_model(spec.partition(":")[2])
        console.print(
            f"[green]ok[/] embedded model {escape(spec)} files: {found} (not loaded; --deep calls it)"
        )
    else:
        _structured_call(ctx, spec)
    if deep:
        _embed(ctx.embedder)
    else:
        from storyjudge.core.embeddings import check_embedder

        with failing(ConfigError):
            found = check_embedder(ctx.embedder)
        console.print(
            f"[green]ok[/] embedder {escape(ctx.embedder)} files: {found} (not loaded; --deep embeds)"
        )
    console.print("[bold green]doctor: all checks passed[/]")


def _structured_call(ctx: Context, spec: str) -> None:
    from storyjudge.core.llm import ModelError, ask_structured

    prompt = load("doctor")
    messages = [
        ("user", prompt.render(passage="Macbeth murders King Duncan in his sleep.", claim="Duncan dies."))
    ]
    started = time.perf_counter()
    with failing(ModelError, ConfigError):
        answer = ask_structured(ctx, "judge", prompt, messages, DoctorAnswer)  # type: ignore[arg-type]
    llm_seconds = time.perf_counter() - started
    usage = totals(answer.usage)
    if not answer.ok:
        fail(f"{spec} gave no parseable structured answer after {answer.attempts} attempt(s): {answer.error}")
    said = (
        "supported, as expected"
        if answer.value.supported  # type: ignore[union-attr]
        else "not supported, though it follows: the call works, the model's judgement is weak"
    )
    console.print(
        f"[green]ok[/] structured call to {escape(spec)}: a readable answer in the judge's schema; on a test "
        f"claim that follows from its passage it said {said} ({llm_seconds:.2f}s, {usage['input_tokens']} in / "
        f"{usage['output_tokens']} out tokens{', cached' if answer.cached else ''})",
        highlight=False,
    )


def _embed(embedder: str) -> None:
    from storyjudge.core.embeddings import get_embedder

    started = time.perf_counter()
    with failing(ConfigError):
        emb = get_embedder(embedder)
    load_seconds = time.perf_counter() - started
    passages = [f"Scene {i}: Macbeth speaks with Banquo on the heath near Forres." for i in range(32)]
    started = time.perf_counter()
    vectors = emb.embed_documents(passages)
    embed_seconds = time.perf_counter() - started
    console.print(
        f"[green]ok[/] embedder {escape(emb.name)}: {len(vectors[0])}-d vectors, window {emb.window_tokens} tokens, "
        f"load {load_seconds:.1f}s, {len(passages) / embed_seconds:.0f} passages/s"
    )
