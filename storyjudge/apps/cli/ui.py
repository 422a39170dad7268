"""``storyjudge ui``: the seed-001 demo in a browser, served from this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import BaseUrlOpt, ModelOpt, console, fail
from storyjudge.core.context import ConfigError


@app.command("ui")
def ui_command(
    host: Annotated[
        str, typer.Option(help="Address to bind; the default is reachable from this machine only.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0 picks a free one).")] = 8765,
    runs_dir: Annotated[
        Path, typer.Option("--runs-dir", help="Where the UI keeps its run directories.")
    ] = Path("runs"),
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    ckg_samples: Annotated[
        int | None, typer.Option(help="Default CKG extraction samples per scene (the page can change it).")
    ] = None,
    squality: Annotated[
        Path | None, typer.Option(help="SQuALITY JSONL to offer stories from (default: ../shared/data/...).")
    ] = None,
) -> None:
    """Serve the demo: pick a narrative, build its knowledge graph, summarize, score and refine it."""
    from storyjudge.apps.ui import Settings, make_server
    from storyjudge.apps.ui.server import is_loopback

    if squality is not None and not squality.is_file():
        fail(f"{squality} does not exist; give the path of SQuALITY's dev.jsonl or leave --squality out.")
    defaults = Settings(model=model or "", base_url=base_url or "", ckg_samples=ckg_samples)
    try:
        server = make_server(host, port, runs_dir=runs_dir, defaults=defaults, squality=squality)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port.")
    if not is_loopback(host):
        console.print(f"[yellow]Listening on {host}: anyone who can reach this machine can use the UI.[/]")
    console.print(f"storyjudge UI at {server.url} (runs in {runs_dir}/). Ctrl-C stops it.")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("Stopped.")
    finally:
        server.server_close()
