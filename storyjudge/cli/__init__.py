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


from storyjudge.cli import doctor  # noqa: E402,F401  - registers commands
from storyjudge.cli import coherence  # noqa: E402,F401
from storyjudge.cli import summarize  # noqa: E402,F401
from storyjudge.cli import report  # noqa: E402,F401
from storyjudge.cli import ui  # noqa: E402,F401
from storyjudge.cli import evaluate  # noqa: E402,F401
from storyjudge.cli import index  # noqa: E402,F401

__all__ = ["app"]
