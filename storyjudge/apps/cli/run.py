"""The one way a command runs a graph: a ``GraphCommand`` says how to read its input and write its outputs.

``run_graph`` checks everything it can (input, settings, models, run directory, server) before it writes anything.
"""

from __future__ import annotations

import errno
import shlex
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

import prompts
from storyjudge.apps.cli import COMMANDS, app
from storyjudge.apps.cli.common import (
    console,
    fail,
    failing,
    print_estimate,
    print_json,
    print_models,
    print_result,
    run_log,
    stream_graph,
)
from storyjudge.apps.cli.options import Settings, flag_option, with_settings
from storyjudge.core.concurrency import branch_threads
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.keptruns import new_run_id
from storyjudge.core.llm import ModelError, require_models
from storyjudge.core.models import check_spec, resolve_spec
from storyjudge.core.rundir import (
    RESUMABLE_CHANGES,
    RunDir,
    RunDirMismatch,
    default_run_dir,
    document_hash,
    run_settings,
)
from storyjudge.core.servercheck import check_server
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import reset_ledger


@dataclass(frozen=True)
class Job:
    """A command's input, read and checked: the graph's input and what the output writer needs besides."""

    graph_input: dict[str, Any]
    source: Path | None = None  # the narrative's file
    text: str = ""  # the narrative: its hash names the default run directory and guards it
    title: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def doc_hash(self) -> str:
        """The narrative's content hash."""
        return document_hash(self.text)


@dataclass(frozen=True)
class Run:
    """What an output writer gets: the job, the settings it ran with, its run directory and final state."""

    job: Job
    ctx: Context
    rd: RunDir | None
    final: dict[str, Any]
    seconds: float  # wall time of the command so far
    as_json: bool = False  # --json: the result record alone on stdout, as JSON

    def show(self, record: Any, line: str) -> None:
        """The result alone on stdout: its record as JSON with --json, else its line."""
        if self.as_json:
            print_json(record)
        else:
            print_result(line)


@dataclass(frozen=True)
class GraphCommand:
    """A command that runs one graph, described for ``run_graph``."""

    name: str  # the command's name and, unless ``graph`` says otherwise, its graph's (a module of graphs/)
    roles: tuple[str, ...] | Callable[[Context], tuple[str, ...]]  # the model roles it calls, checked first
    settings: tuple[str, ...]  # the Context fields it takes as options (any other through --set)
    read: Callable[..., Job]  # its typer-annotated parameters are the command's (its help: COMMANDS)
    write: Callable[[Run], None]
    graph: str = ""
    prepare: Callable[[Job, Context], Job] | None = None  # input checks that depend on a setting
    run_dir: bool = True  # claims a run directory for the document
    checkpointed: bool = False  # checkpoints in the run directory; --resume continues them
    max_concurrency: Callable[[Context], int | None] = branch_threads  # graph branches in flight
    estimate: Callable[[Job, Context], dict[str, Any]] | None = None  # --dry-run: what a run would take


JsonOpt = flag_option(
    "--json",
    "Print the result record alone on standard output, as JSON (tables and progress go to standard error).",
    "Output",
)
DryRunOpt = flag_option(
    "--dry-run",
    "Estimate the fewest and the most LLM calls, tokens and cost the run can take, from the text and the "
    "settings; call no model and write nothing.",
    "Operation",
)
ResumeOpt = flag_option(
    "--resume", "Continue the interrupted run in --run-dir (checkpoints and LLM cache).", "Operation"
)
YesOpt = flag_option(
    "--yes", "Go on with an input far larger than its kind usually is (a summary of over 20,000 tokens)."
)
SUMMARY_TOKENS = 20_000
"""Tokens of the longest summary scored without --yes: book summaries are a few thousand."""


AllowChangeOpt = Annotated[
    str,
    typer.Option(
        "--allow-change",
        help="With --resume: settings that may differ from the run's own, comma-separated, among "
        f"{', '.join(sorted(RESUMABLE_CHANGES))} (e.g. more iterations). Default: none.",
        rich_help_panel="Operation",
    ),
]


def add_graph_command(command: GraphCommand) -> None:
    """Register a command: the reader's parameters, its output, resume and dry-run options, then the settings'."""
    extra: dict[str, tuple[Any, Any]] = {"as_json": (JsonOpt, False), "yes": (YesOpt, False)}
    if command.checkpointed:
        extra |= {"resume": (ResumeOpt, False), "allow_change": (AllowChangeOpt, "")}
    if command.estimate is not None:
        extra["dry_run"] = (DryRunOpt, False)

    body = partial(run_graph, command)  # the reader lends its parameters, COMMANDS its help
    app.command(command.name, help=COMMANDS[command.name][1])(
        with_settings(*command.settings, extra=extra, body=body)(command.read)
    )


def run_graph(
    command: GraphCommand,
    settings: Settings,
    *,
    resume: bool = False,
    as_json: bool = False,
    dry_run: bool = False,
    allow_change: str = "",
    yes: bool = False,
    **arguments: Any,
) -> None:
    """Run a command's graph: read, check every setting, claim, print models, stream, write."""
    started = time.perf_counter()
    allowed = tuple(name.strip().replace("-", "_") for name in allow_change.split(",") if name.strip())
    unknown = sorted(set(allowed) - RESUMABLE_CHANGES)
    if unknown:
        fail(
            f"--allow-change accepts {', '.join(sorted(RESUMABLE_CHANGES))}, not {', '.join(unknown)}: "
            "other settings change what the run computed; start a new run for them."
        )
    job = command.read(**arguments)
    ctx = settings.context()
    roles = command.roles(ctx) if callable(command.roles) else command.roles
    with failing(ConfigError):
        if dry_run:  # no call is made: a spec must be valid, but no API key is needed to price it
            for role in roles:
                check_spec(resolve_spec(ctx, role), ctx, need_key=False)
        else:
            require_models(ctx, roles)
    if command.prepare is not None:
        job = command.prepare(job, ctx)
    _check_summaries_fit(job, ctx, yes)
    if dry_run and command.estimate is not None:
        print_models(ctx, roles)
        print_estimate(command.estimate(job, ctx), as_json)
        return
    with failing(ValueError):
        prompts.check_dir(ctx.prompt_dir)
    rd: RunDir | None = None
    if command.run_dir:  # a directory the run cannot use is named (read only) before the server is asked
        rd = RunDir(Path(ctx.run_dir) if ctx.run_dir else default_run_dir(job.title, job.doc_hash))
        specs = {role: resolve_spec(ctx, role) for role in roles}
        recorded = run_settings(ctx.public_dict(), specs, prompts.versions(ctx.prompt_dir))
        _check_checkpoints(rd)
        with _using(rd):
            rd.check(job.doc_hash, resume=resume, kind=command.name, settings=recorded, allow_change=allowed)

    def servers_ok() -> None:
        """A dead server, a refused key, an unknown model: named now, not after the index."""
        with failing(ConfigError):
            check_server(ctx, {resolve_spec(ctx, role) for role in roles})

    if not resume:  # a resume looks once it knows the run is not finished: a finished one calls no model
        servers_ok()  # before the claim: a command that cannot make its first call leaves no folder behind
    if rd is not None:  # claim and lock it for this document, beside the runs of other kinds
        with _using(rd):
            rd.claim(
                job.doc_hash,
                str(job.source),
                resume=resume,
                kind=command.name,
                settings=recorded,
                allow_change=allowed,
            )
        ctx = ctx.replace(run_dir=str(rd.root))
    print_models(ctx, roles)
    try:
        with run_log(rd):
            final = _stream(command, job, ctx, rd, servers_ok if resume else None)
    except ModelError as exc:
        fail(f"{exc} {_kept(command, ctx, rd)}")
    except (ConfigError, ValueError) as exc:
        fail(str(exc))
    except (OSError, sqlite3.OperationalError) as exc:
        if getattr(exc, "errno", None) != errno.ENOSPC and "disk is full" not in str(exc):
            raise
        where = sorted({str(rd.root) if rd else "", ctx.cache_dir or ""} - {""})
        fail(
            f"The disk is full ({exc}) while writing under {' and '.join(where) or 'the current folder'}: free "
            f"space there, or choose another --run-dir / --cache-dir. {_kept(command, ctx, rd)}"
        )
    command.write(Run(job, ctx, rd, final, time.perf_counter() - started, as_json))


def _check_summaries_fit(job: Job, ctx: Context, yes: bool) -> None:
    """Refuse a summary over the context window, or (without --yes) far longer than summaries (cost: its square)."""
    given = job.graph_input
    texts = [("summary", given["summary"])] if isinstance(given.get("summary"), str) else []
    texts += [(f"summary {item['id']!r}", item["summary"]) for item in given.get("summaries") or []]
    for what, text in texts:
        if len(text.encode("utf-8")) > 2 * min(ctx.context_window, SUMMARY_TOKENS):  # else it is short enough
            tokens = count_tokens(text)
            if tokens > ctx.context_window:
                fail(
                    f"The {what} is {tokens} tokens, more than context_window ({ctx.context_window}): each of "
                    "its prompts holds it whole. Shorten it, or set context_window to the model's real window."
                )
            if tokens > SUMMARY_TOKENS and not yes:
                fail(
                    f"The {what} is {tokens} tokens, far longer than a summary ({SUMMARY_TOKENS} at most here): "
                    "each of its sentences sends it whole, a cost that grows with the square of its length. "
                    "Check the input, or add --yes to go on."
                )


def _kept(command: GraphCommand, ctx: Context, rd: RunDir | None) -> str:
    """What of a stopped run is kept, and the command that continues it."""
    again = ["storyjudge", *(arg for arg in sys.argv[1:] if arg != "--resume")]
    if command.checkpointed and rd is not None:
        resume = shlex.join([*again, "--resume"])
        return f"Finished work is checkpointed in {rd.root}; continue with: {resume}"
    cache = ctx.cache_dir or (str(rd.root / "cache") if rd is not None else ".storyjudge/cache")
    line = shlex.join(again)
    return f"Answers so far are cached in {cache}; the same command again continues from them: {line}"


@contextmanager
def _using(rd: RunDir) -> Iterator[None]:
    """A run directory that is another run's, or that cannot be written (no permission, a read-only disk)."""
    try:
        yield
    except RunDirMismatch as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"Cannot use {rd.root} as the run directory: {exc.strerror or exc}; choose another --run-dir.")


def _check_checkpoints(rd: RunDir) -> None:
    """Refuse a checkpoints file that is not SQLite, is corrupt, or has another layout than the installed one."""
    if not rd.checkpoints.exists():
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    with closing(sqlite3.connect(":memory:", check_same_thread=False)) as conn:  # the installed layout
        SqliteSaver(conn).setup()
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        layout = {t: {row[1] for row in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
    problem = ""
    try:
        with closing(sqlite3.connect(f"file:{rd.checkpoints}?mode=ro", uri=True)) as conn:
            found = conn.execute("PRAGMA quick_check(1)").fetchone()
            if found and found[0] != "ok":
                problem = "it is corrupt: " + " ".join(str(found[0]).split())
            else:
                for table, columns in layout.items():
                    have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                    if have and not columns <= have:
                        problem = f"its {table} table has another layout, from another LangGraph version"
                        break
    except sqlite3.DatabaseError as exc:
        problem = " ".join(str(exc).split())
    if problem:
        fail(
            f"{rd.checkpoints} is not a checkpoint database this version can read ({problem}); remove it to "
            "start the run anew, or choose another --run-dir."
        )


def _build(command: GraphCommand, checkpointer: Any = None) -> Any:
    """The command's compiled graph (``graphs.<name>``), imported now: seconds that only a run needs."""
    import importlib

    graph = importlib.import_module(f"graphs.{command.graph or command.name}")
    return graph.build_graph(checkpointer=checkpointer)


def _stream(
    command: GraphCommand, job: Job, ctx: Context, rd: RunDir | None, servers_ok: Callable[[], None] | None
) -> dict[str, Any]:
    """The graph's final state: streamed anew, resumed, or a finished run's (``servers_ok``: given on a resume)."""
    resume = servers_ok is not None
    servers_ok = servers_ok or (lambda: None)
    config: dict[str, Any] = {"max_concurrency": command.max_concurrency(ctx)}  # None: no limit
    if not command.checkpointed or rd is None:
        return dict(stream_graph(_build(command), job.graph_input, ctx, config) or {})
    from langgraph.checkpoint.sqlite import SqliteSaver

    from storyjudge.core.checkpointblobs import BlobSerializer

    with closing(sqlite3.connect(rd.checkpoints, check_same_thread=False)) as conn:
        graph = _build(command, SqliteSaver(conn, serde=BlobSerializer(rd.checkpoint_blobs)))
        thread, resuming = _thread(rd, command.name, resume)
        config["configurable"] = {"thread_id": thread}
        if resuming:
            snapshot = graph.get_state(config)
            if snapshot.created_at is None:  # stopped before its first checkpoint: nothing to continue
                console.print(
                    f"Nothing was checkpointed in {thread}; starting it (cached answers count).", markup=False
                )
            elif not snapshot.next and not snapshot.tasks:
                console.print(
                    f"[green]The run in {escape(str(rd.root))} already finished;[/] showing its result."
                )
                return dict(snapshot.values)
            else:
                # tasks that finished before the stop have saved their writes; the stream applies them, goes on
                pending = snapshot.next or tuple(task.name for task in snapshot.tasks)
                console.print(f"Resuming {thread} at {', '.join(pending)}", markup=False)
                servers_ok()
                return dict(stream_graph(graph, None, ctx, config))
        servers_ok()
        return dict(stream_graph(graph, job.graph_input, ctx, config))


def _thread(rd: RunDir, kind: str, resume: bool) -> tuple[str, bool]:
    """The checkpoint thread of this run: the last one on --resume, a new one otherwise."""
    meta = rd.read_meta()
    key = f"{kind}_thread"
    if resume and meta.get(key):
        return meta[key], True
    # Also the kept run's id: to the millisecond, so runs kept within one second keep their order.
    thread = new_run_id(kind)
    reset_ledger(str(rd.root))  # a new run: its usage ledger starts empty
    meta[key] = thread
    rd.write_json(rd.meta, meta)
    return thread, False
