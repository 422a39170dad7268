"""What every CLI command shares: context building, safe input reading, errors, progress, graph streaming."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from storyjudge.apps.cli import stages
from storyjudge.core.context import Context
from storyjudge.core.models import describe_models, is_local

if TYPE_CHECKING:
    from storyjudge.core.rundir import RunDir

console = Console(stderr=True, emoji=False)  # ":train:" in a split name or a file is text, never an emoji
out = Console(emoji=False)

MAX_DOCUMENT_BYTES = 50 * 1024 * 1024
DATA_RUN_CHARS = 1000
# No word of a language written with spaces is this long; base64, hex dumps and minified data are. Scripts
# written without spaces (Chinese, Japanese, Thai) are not ASCII, so they never match.
_DATA_RUN = re.compile(rf"[\x21-\x7e]{{{DATA_RUN_CHARS},}}")


def print_result(text: str) -> None:
    """A command's result alone on stdout, as it is: no markup, no wrapping at the terminal's width."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def print_json(record: Any) -> None:
    """A result record alone on stdout, as JSON (``--json``)."""
    print_result(json.dumps(record, indent=2, ensure_ascii=False, default=str))


def say(text: str, to: Console | None = None, soft_wrap: bool = True) -> None:
    """A line of the run's or the user's words, as they are (never markup), on ``to`` or stderr."""
    (to or console).print(text, markup=False, highlight=False, soft_wrap=soft_wrap)


def print_estimate(estimate: dict[str, Any], as_json: bool = False) -> None:
    """A dry run's estimate: assumptions on stderr, the figures (a low-high range, or a bound) alone on stdout."""
    for line in estimate.get("assumptions", []):
        say(f"  assumption: {line}")
    if as_json:
        print_json(estimate)
        return
    low, high = estimate.get("low") or estimate, estimate.get("high") or estimate

    def span(key: str, as_text: Callable[[float], str] = lambda n: f"{n:,.0f}") -> str:
        a, b = as_text(low[key]), as_text(high[key])
        return a if a == b else f"{a} to {b}"

    cost = "price unknown" if high.get("usd") is None else span("usd", lambda n: f"${n:.4f}")
    planted = estimate.get("planted") or {}
    checks = (
        f"; of these, planted control items {planted['calls']} calls, {_tokens(planted['input_tokens'])} input "
        "tokens"
        if planted.get("calls")
        else ""
    )
    wall = estimate.get("wall_seconds")
    for basis in (wall or {}).get("basis", []):
        say(f"  wall time: {basis}")
    took = f"; wall time of the calls {_duration(wall['low'])} to {_duration(wall['high'])}" if wall else ""
    print_result(
        f"Dry run, no model called: {span('calls')} LLM calls, {span('input_tokens', _tokens)} input / "
        f"{span('output_tokens', _tokens)} output tokens, {cost} ({estimate.get('resolved_model', '?')}){checks}"
        f"{took}"
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 48 * 3600 else f"{seconds / 86400:,.1f} days"


def _tokens(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    return f"{n / 1e3:.0f}k" if n >= 1e4 else f"{n:,.0f}"


def fail(message: str, code: int = 1) -> NoReturn:
    """One clear line on stderr, no traceback, non-zero exit."""
    # escaped: a message quoting a path or a server's words may hold "[...]", which rich would eat as markup
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def failing(*errors: type[Exception]) -> Iterator[None]:
    """Any of ``errors`` raised inside ends the command as ``fail`` does, its message the error's own."""
    try:
        yield
    except errors as exc:
        fail(str(exc))


def text_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]], **options: Any) -> Table:
    """A table of text cells; a long cell folds onto lines, whole (a cell's name never ends in "…")."""
    table = Table(title=title, header_style="bold", **options)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def write_out(path: Path, text: str) -> None:
    """Write an ``--out`` file, its folders made; a path that cannot be written is one clear error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"Cannot write {path}: {exc.strerror}; choose another --out path.")


def print_models(ctx: Context, roles: tuple[str, ...] | None = None) -> None:
    """Say which model each role uses (one line when they all use one), and that the embedded one is demo grade."""
    rows = [row for row in describe_models(ctx) if roles is None or row[0] in roles]
    if len({(spec, note) for _, spec, note in rows}) == 1:
        _, spec, note = rows[0]
        say(f"Models: {spec} for every role ({note})", soft_wrap=False)
    else:
        # a spec or URL may hold "[...]"
        escaped = ((role, escape(spec), escape(note)) for role, spec, note in rows)
        console.print(text_table("Models", ("role", "model", "note"), escaped))
    if any(is_local(spec) for _, spec, _ in describe_models(ctx)):
        console.print(
            "[yellow]Using the embedded demo model: the pipeline runs offline, but its summaries and verdicts "
            "are not meaningful. Set OPENAI_API_KEY or --base-url/--model for real results.[/]"
        )


def read_text_file(path: Path, what: str = "document") -> tuple[str, str]:
    """Read a narrative or summary (``-``: stdin); returns (text, encoding). Every bad input is one clear error."""
    if str(path) == "-":
        raw = sys.stdin.buffer.read(MAX_DOCUMENT_BYTES + 1)
        path = Path("standard input")
    else:
        if not path.exists():
            fail(
                f"{what} file {path} does not exist; give the path of a .txt, .md or .json file, or - for stdin."
            )
        if path.is_dir():
            fail(f"{path} is a directory; give the path of a {what} file inside it.")
        try:
            with path.open("rb") as stream:  # a pipe or a device: at most one byte past the limit
                raw = stream.read(MAX_DOCUMENT_BYTES + 1)
        except OSError as exc:
            fail(f"Cannot read {what} file {path}: {exc.strerror or exc}.")
    if not raw:
        fail(f"{what} file {path} is empty; give a file with text in it.")
    if len(raw) > MAX_DOCUMENT_BYTES:
        fail(f"{what} file {path} is over the {MAX_DOCUMENT_BYTES // 2**20} MB limit; split it.")
    utf16 = raw.startswith((b"\xff\xfe", b"\xfe\xff"))  # a byte-order mark; UTF-8 never starts so
    if b"\x00" in raw[:8192] and not (utf16 or raw.startswith(b"\xef\xbb\xbf")):
        fail(f"{path} looks like a binary file, not text; give a plain-text {what} (.txt, .md or .json).")
    text, encoding = "", ""
    for encoding in (*(["utf-16"] if utf16 else []), "utf-8", "cp1252", "latin-1"):
        with suppress(UnicodeDecodeError):
            text = raw.decode("utf-8-sig" if encoding == "utf-8" else encoding)
            break
    if encoding != "utf-8":
        console.print(f"[yellow]note:[/] {escape(str(path))} is not UTF-8; decoded it as {encoding}.")
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
def progress_bars() -> Iterator[Callable[[dict[str, Any], tuple[str, ...]], None]]:
    """A handler of progress events: rich bars on a terminal, else plain lines (``STORYJUDGE_PROGRESS``: 1, 0)."""
    import threading

    wanted = os.environ.get("STORYJUDGE_PROGRESS", "")
    if wanted == "0":
        yield lambda event, namespace: None
        return
    with ExitStack() as stack:
        view: stages.BarsView | stages.PlainView = stages.PlainView(console)
        if console.is_terminal or wanted == "1":
            view = stages.BarsView(stack.enter_context(stages.bars(console)))
        tracker = stages.StageTracker(view)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(stages.HEARTBEAT_SECONDS / 6):
                tracker.heartbeat()

        stack.callback(stop.set)
        threading.Thread(target=beat, name="progress-heartbeat", daemon=True).start()
        yield tracker.handle


STOP_GRACE_SECONDS = 5.0
"""After Ctrl-C, how long calls in flight and the checkpoint writes of finished tasks get before the exit."""


def _stopped(message: str, code: int = 130) -> NoReturn:
    console.print(message, soft_wrap=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # Exit now: a normal exit would wait for worker threads (an abandoned hung request among them).
    # Checkpoints, the call cache and the usage ledger are SQLite transactions or appended lines, safe to cut off.
    os._exit(code)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Ctrl-C, and the polite stop of a process manager (``kill``, a container's stop): both stop the same way."""


@contextmanager
def cancel_on_ctrl_c(message: str) -> Iterator[None]:
    """Ctrl-C or SIGTERM cancels the calls not yet sent, exits 130 (143); forced by a second one or the grace time."""
    import threading

    from storyjudge.core.concurrency import cancel

    received: list[int] = []

    def code() -> int:
        return 128 + (received[0] if received else signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        if received:
            _stopped(message, code())
        received.append(signum)
        cancel()
        threading.Timer(STOP_GRACE_SECONDS, lambda: _stopped(message, code())).start()
        raise KeyboardInterrupt

    in_main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} if in_main else {}
    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    except KeyboardInterrupt:
        _stopped(message, code())
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


class _ConsoleHandler(logging.Handler):
    """Warnings as plain lines above the progress bars (rich keeps its live display below them)."""

    def emit(self, record: logging.LogRecord) -> None:
        say(self.format(record))


@contextmanager
def run_log(rd: RunDir | None) -> Iterator[None]:
    """Log the run's details (every retry, at INFO) to ``<run dir>/run.log``; warnings still reach stderr."""
    logger = logging.getLogger("storyjudge")
    handlers: list[logging.Handler] = [_ConsoleHandler(logging.WARNING)]
    if rd is not None:
        detail = logging.FileHandler(rd.root / "run.log", encoding="utf-8")
        detail.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(detail)
    level = logger.level
    logger.setLevel(logging.INFO)
    for handler in handlers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        logger.setLevel(level)
        for handler in handlers:
            logger.removeHandler(handler)
            handler.close()


def stream_graph(graph: Any, graph_input: dict[str, Any] | None, ctx: Context, config: dict[str, Any]) -> Any:
    """Run a compiled graph with progress bars; returns its final state. Ctrl-C stops with a resume hint."""
    final: Any = None
    hint = (
        f" Resume with the same command plus --resume (run directory {escape(ctx.run_dir)})."
        if ctx.run_dir
        else ""
    )
    stopped = f"\n[yellow]Stopped.[/] Work done so far is checkpointed and cached.{hint}"
    with cancel_on_ctrl_c(stopped), progress_bars() as handle:
        # with subgraphs, the progress of the stages inside them too; the final state is the top graph's
        for namespace, mode, chunk in graph.stream(
            graph_input, config=config, context=ctx, stream_mode=["custom", "values"], subgraphs=True
        ):
            if mode == "custom" and isinstance(chunk, dict) and "progress" in chunk:
                handle(chunk["progress"], tuple(namespace))
            elif mode == "values" and not namespace:
                final = chunk
    return final
