"""The ``storyjudge`` command line: a command's module (LangGraph, LangChain: seconds) is imported when it runs."""

from __future__ import annotations

import importlib
from typing import Annotated

import typer
import typer.core
import typer.main
from typer import _click as click  # typer vendors its own click; its commands are of these classes

from storyjudge.core import heavy_imports

COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": (
        "doctor",
        "Check the set-up: the models in use, one structured call to a server, the model files; --deep runs them.",
    ),
    "index": (
        "index",
        "Cut a narrative into scenes, graph who does what to whom, and index the scenes for search.",
    ),
    "summarize": (
        "summarize",
        "Summarize a book-length narrative by hierarchical merging or incremental updating.",
    ),
    "refine": (
        "refine",
        "Summarize a narrative, check each fact of the summary against it, revise until the score stops rising.",
    ),
    "score": (
        "refine",
        "How faithful a summary is to its narrative (NarrativeFactScore): each of its facts checked, with evidence.",
    ),
    "coherence": (
        "coherence",
        "Score summary coherence with BooookScore: the share of sentences that cause a reader no confusion.",
    ),
    "compare": (
        "compare",
        "Compare summaries of one story: scores with 95% intervals, differences, the facts only one supports.",
    ),
    "report": (
        "report",
        "Write RUN_DIR/report.html: the character graph drawn, iterations with unsupported facts marked, evidence.",
    ),
    "ui": (
        "ui",
        "Serve the demo: pick a narrative, build its knowledge graph, summarize, score and refine it.",
    ),
    "eval": (
        "evaluate",
        "Experiments and meta-evaluation: 'storyjudge eval CONFIG.yaml' (or 'eval run CONFIG.yaml'), "
        "'eval storysumm DATASET', 'eval squality DATASET'.",
    ),
    "data": (
        "data",
        "Fetch the public datasets (STORYSUMM, SQuALITY, BooookScore annotations) by name into the data cache.",
    ),
    "bench": (
        "bench",
        "Measure every performance goal: latency against its bound, chains of calls, checkpoints, start-up, embedding.",
    ),
}
"""Command name -> (module under ``storyjudge.apps.cli``, the first line of its help, which a test keeps equal)."""


def _no_type_on_flags(self: typer.core.TyperOption, ctx: click.Context) -> str | None:
    """A flag's help shows no ``<bool>`` placeholder; other options keep ``<int>``, ``<str>``."""
    if self.is_flag:
        return None
    return _option_type(self, ctx)


def _argument_in_usage(self: typer.core.TyperArgument) -> str:
    """An argument in the usage line as FILE (optional: [FILE]), not typer's ``{file}``."""
    name = self.display_name_raw.upper()
    name = name if self.required else f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


# help in words: typer's placeholders read as code; every command's help goes through these two
_option_type = typer.core.TyperOption.display_type_rich
typer.core.TyperOption.display_type_rich = _no_type_on_flags  # type: ignore[method-assign]
typer.core.TyperArgument._usage_display_name = _argument_in_usage  # type: ignore[method-assign]


class LazyGroup(typer.core.TyperGroup):
    """A command group that imports a command's module only when that command is looked up to run."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command, loaded or not."""
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The group's help lists commands from ``COMMANDS``, importing none of them."""
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, its module imported first; while listing help, a stand-in carrying its help line."""
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name not in COMMANDS:
            return None
        module, help_line = COMMANDS[cmd_name]
        if self._listing:
            return typer.core.TyperCommand(cmd_name, help=help_line)
        # LangGraph, LangChain: seconds of imports, none of them garbage
        with heavy_imports.collector_paused():
            importlib.import_module(f"{__name__}.{module}")  # registers its commands on ``app``
        loaded = typer.main.get_command(app)  # a group built from every command registered by now
        for name, command in getattr(loaded, "commands", {}).items():
            self.commands.setdefault(name, command)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As typer's, with "did you mean" suggestions drawn from every command, not only the loaded ones."""
        try:
            return self._click_resolve_command(ctx, args)
        except click.exceptions.UsageError as exc:
            if self.suggest_commands and args:
                import difflib

                matches = difflib.get_close_matches(args[0], self.list_commands(ctx))
                if matches:
                    exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
            raise


app = typer.Typer(
    name="storyjudge",
    help="Faithful, coherent summaries of long narratives, with evidence for every claim.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=LazyGroup,
)


def _version(value: bool) -> None:
    if value:
        from storyjudge import __version__

        typer.echo(f"storyjudge {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit. Default: off."
        ),
    ] = False,
) -> None:
    """Faithful, coherent summaries of long narratives, with evidence for every claim."""


def entry() -> None:
    """The ``storyjudge`` program; it exits without tearing down the interpreter's modules (0.6-0.9 s).

    The atexit handlers still run and the streams are flushed; a Chroma store (it may write as it is torn down)
    keeps the ordinary exit.
    """
    import atexit
    import contextlib
    import os
    import sys

    heavy_imports.own_process()
    try:
        app()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if "chromadb" in sys.modules:
        raise SystemExit(code)
    if isinstance(code, str):
        sys.stderr.write(f"{code}\n")
    status = 0 if code is None else code if isinstance(code, int) else 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said on it
            stream.flush()
    os._exit(status)


__all__ = ["COMMANDS", "LazyGroup", "app", "entry"]
