"""The ``storyjudge`` command line: one module per command, all sharing ``common``'s options."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(
    name="storyjudge",
    help="Faithful, coherent summaries of long narratives, with evidence for every claim.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
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


# each command module registers its commands on ``app`` when imported
from storyjudge.apps.cli import (  # noqa: E402,F401
    bench,
    coherence,
    doctor,
    evaluate,
    index,
    refine,
    report,
    summarize,
    ui,
)

__all__ = ["app"]
