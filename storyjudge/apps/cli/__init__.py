"""The ``storyjudge`` command line: one module per command, all sharing ``common``'s options."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="storyjudge",
    help="Faithful, coherent summaries of long narratives, with evidence for every claim.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def main() -> None:
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
