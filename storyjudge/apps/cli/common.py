"""What every CLI command shares: context building, safe input reading, errors, progress, graph streaming."""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from storyjudge.core.context import ENV_PREFIX, ConfigError, Context
from storyjudge.core.models import describe_models, is_local

console = Console(stderr=True)
out = Console()

MAX_DOCUMENT_BYTES = 50 * 1024 * 1024
_ENCODINGS = ("utf-8", "utf-16", "cp1252", "latin-1")
DATA_RUN_CHARS = 1000
# No word of a language written with spaces is this long; base64, hex dumps and minified data are. Scripts
# written without spaces (Chinese, Japanese, Thai) are not ASCII, so they never match.
_DATA_RUN = re.compile(rf"[\x21-\x7e]{{{DATA_RUN_CHARS},}}")


def fail(message: str, code: int = 1) -> NoReturn:
    """One clear line on stderr, no traceback, non-zero exit."""
    # escaped: a message quoting a path or a server's words may hold "[...]", which rich would eat as markup
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def make_context(**given: Any) -> Context:
    """A Context from CLI settings (None: not given): given ones win over env vars and defaults."""
    values = {name: value for name, value in given.items() if value is not None}
    try:
        return Context(**values)
    except ConfigError as exc:
        fail(str(exc) + _env_source(str(exc), set(values)))


def _env_source(message: str, given: set[str]) -> str:
    """Where a rejected setting came from when it was an environment variable, so the user can find it."""
    for f in fields(Context):
        variable = ENV_PREFIX + f.name.upper()
        if f.name not in given and variable in os.environ and re.search(rf"\b{f.name}\b", message):
            if variable in message:
                return ""
            return f" It comes from {variable}={os.environ[variable]!r}: fix or unset it."
    return ""


def print_models(ctx: Context, roles: tuple[str, ...] | None = None) -> None:
    """Say which model each role uses, and that the embedded one is demo grade."""
    table = Table(title="Models", show_header=True, header_style="bold")
    table.add_column("role")
    table.add_column("model")
    table.add_column("note")
    for role, spec, note in describe_models(ctx):
        if roles is None or role in roles:
            table.add_row(role, spec, note)
    console.print(table)
    if any(is_local(spec) for _, spec, _ in describe_models(ctx)):
        console.print(
            "[yellow]Using the embedded demo model: the pipeline runs offline, but its summaries and verdicts "
            "are not meaningful. Set OPENAI_API_KEY or --base-url/--model for real results.[/]"
        )


def read_text_file(path: Path, what: str = "document") -> tuple[str, str]:
    """Read a narrative or summary file safely; returns (text, encoding). Every bad input is one clear error."""
    if not path.exists():
        fail(f"{what} file {path} does not exist; give the path of a .txt, .md or .json file.")
    if path.is_dir():
        fail(f"{path} is a directory; give the path of a {what} file inside it.")
    size = path.stat().st_size
    if size == 0:
        fail(f"{what} file {path} is empty; give a file with text in it.")
    if size > MAX_DOCUMENT_BYTES:
        fail(
            f"{what} file {path} is {size // 2**20} MB, over the {MAX_DOCUMENT_BYTES // 2**20} MB limit; split it."
        )
    raw = path.read_bytes()
    has_bom = raw.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf"))
    if b"\x00" in raw[:8192] and not has_bom:
        fail(f"{path} looks like a binary file, not text; give a plain-text {what} (.txt, .md or .json).")
    text, encoding = "", ""
    for encoding in _ENCODINGS:
        if encoding == "utf-16" and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
            continue
        try:
            text = raw.decode("utf-8-sig" if encoding == "utf-8" else encoding)
            break
        except UnicodeDecodeError:
            continue
    if encoding != "utf-8":
        console.print(f"[yellow]note:[/] {path} is not UTF-8; decoded it as {encoding}.")
    if not text.strip():
        fail(f"{what} file {path} holds only whitespace; give a file with text in it.")
    printable = sum(ch.isprintable() or ch.isspace() for ch in text[:20000])
    if printable < 0.9 * min(len(text), 20000):
        fail(f"{path} looks like a binary file, not text; give a plain-text {what}.")
    if _DATA_RUN.search(text, 0, 1_000_000):
        fail(
            f"{path} does not look like prose: it has over {DATA_RUN_CHARS} characters without a space "
            f"(encoded or minified data?); give the {what} as plain text."
        )
    return text, encoding


@contextmanager
def progress_bars() -> Iterator[Any]:
    """A rich progress display fed by the graphs' custom progress events; yields a handler for stream chunks."""
    progress = Progress(
        TextColumn("[bold]{task.description:<12}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[message]}"),
        console=console,
        transient=False,
        disable=not console.is_terminal and os.environ.get("STORYJUDGE_PROGRESS") != "1",
    )
    tasks: dict[str, Any] = {}

    def handle(event: dict[str, Any]) -> None:
        stage = event.get("stage", "work")
        if stage not in tasks:
            tasks[stage] = progress.add_task(stage, total=event.get("total"), message="")
        task = tasks[stage]
        if "total" in event:
            progress.update(task, total=event["total"])
        progress.update(task, advance=event.get("advance", 0), message=event.get("message", ""))

    with progress:
        yield handle


def stream_graph(
    graph: Any, graph_input: dict[str, Any], ctx: Context, config: dict[str, Any] | None = None
) -> Any:
    """Run a compiled graph with progress bars; returns its final state. Ctrl-C stops with a resume hint."""
    final: Any = None
    previous = signal.getsignal(signal.SIGINT)
    try:
        with progress_bars() as handle:
            # subgraphs=True: a subgraph's progress events arrive as they happen, not when the subgraph ends
            for namespace, mode, chunk in graph.stream(
                graph_input,
                config=config or {},
                context=ctx,
                stream_mode=["custom", "values"],
                subgraphs=True,
            ):
                if mode == "custom" and isinstance(chunk, dict) and "progress" in chunk:
                    handle(chunk["progress"])
                elif mode == "values" and not namespace:  # the graph's own state, not a subgraph's
                    final = chunk
    except KeyboardInterrupt:
        hint = (
            f" Resume with the same command plus --resume (run directory {ctx.run_dir})."
            if ctx.run_dir
            else ""
        )
        stopped = f"\n[yellow]Stopped.[/] Work done so far is checkpointed and cached.{hint}"
        console.print(stopped, soft_wrap=True)
        sys.stdout.flush()
        sys.stderr.flush()
        # Exit now: a normal exit would wait for the graph's worker threads to finish every branch in flight
        # (a whole judging round). Checkpoints and the call cache are SQLite transactions, safe to cut off.
        os._exit(130)
    finally:
        signal.signal(signal.SIGINT, previous)
    return final
