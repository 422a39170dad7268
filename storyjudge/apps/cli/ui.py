"""``storyjudge ui``: the demo in a browser, served from this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import console, fail
from storyjudge.apps.cli.options import Settings, with_settings
from storyjudge.core.context import ConfigError


@app.command("ui")
@with_settings("model", "base_url", "ckg_samples", other_settings=False)
def ui_command(
    host: Annotated[
        str, typer.Option(help="Address to bind; the default is reachable from this machine only.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0 picks a free one).")] = 8765,
    runs_dir: Annotated[
        Path, typer.Option("--runs-dir", help="The folder in which the UI makes a run directory per run.")
    ] = Path("runs"),
    squality: Annotated[
        Path | None,
        typer.Option(
            help="SQuALITY JSONL to offer stories from. Default: the dev split bundled in eval/data.",
        ),
    ] = None,
    *,
    settings: Settings,
) -> None:
    """Serve the demo: pick a narrative, build its knowledge graph, summarize, score and refine it.

    The model and ckg-samples options set the defaults of new runs; the page can change them.
    """
    from storyjudge.apps.ui.server import is_loopback, make_server

    if squality is not None and not squality.is_file():
        fail(f"{squality} does not exist; give the path of SQuALITY's dev.jsonl or leave --squality out.")
    defaults = {name: value for name, value in settings.options.items() if value is not None}
    try:
        server = make_server(host, port, runs_dir=runs_dir, defaults=defaults, squality=squality)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port.")
    if not is_loopback(host):
        console.print(
            f"[yellow]Listening on {escape(host)}: anyone who can reach this machine can use the UI.[/]"
        )
    console.print(f"storyjudge UI at {server.url} (runs in {runs_dir}/). Ctrl-C stops it.", markup=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("Stopped.")
    finally:
        server.server_close()
