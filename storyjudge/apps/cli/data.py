"""``storyjudge data``: the public datasets by name, fetched from their published sources into the data cache."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from storyjudge.apps.cli import COMMANDS, app
from storyjudge.apps.cli.common import console, failing, out, say

data_app = typer.Typer(name="data", help=COMMANDS["data"][1], no_args_is_help=True)
app.add_typer(data_app, name="data")

DirOpt = Annotated[
    Path | None,
    typer.Option(
        "--dir",
        help="The data folder. Default: STORYJUDGE_DATA_DIR, else ~/.cache/storyjudge/data "
        "($XDG_CACHE_HOME/storyjudge/data).",
    ),
]

USE = {
    "storysumm": "storyjudge eval storysumm {ref}",
    "squality": "storyjudge eval squality {ref}",
    "booookscore": "storyjudge coherence {path}",
}


@data_app.command("get")
def get_command(
    name: Annotated[str, typer.Argument(help="storysumm, squality or booookscore.")],
    split: Annotated[
        str | None,
        typer.Option(
            "--split",
            help="storysumm: val, test; squality: train, dev, test; booookscore: chatgpt-2048-inc. "
            "Default: val, dev, chatgpt-2048-inc.",
        ),
    ] = None,
    folder: DirOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Fetch again even files already here. Default: off.")
    ] = False,
) -> None:
    """Download one split from its published source, check its checksum, convert it for the loaders.

    Files come from the authors' GitHub repositories at fixed commits (STORYJUDGE_DATA_URL: a mirror instead).
    """
    from eval.download import get

    with failing(ValueError):
        fetched = get(name, split, home=folder, force=force, say=say)  # a URL is text, never markup
    for note in fetched.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    ref = f"{fetched.name}:{fetched.split}"
    use = USE[fetched.name].format(ref=ref if folder is None else fetched.path, path=fetched.path)
    sources = ", ".join(str(p) for p in fetched.sources)
    said = (f"{ref}: {fetched.items} item(s) -> {fetched.path}", f"  sources: {sources}", f"  use it: {use}")
    for line in said:
        say(line, to=out)


@data_app.command("list")
def list_command(folder: DirOpt = None) -> None:
    """Every dataset name and split, and where it is: bundled, fetched, or not here."""
    from eval.datasets import BUNDLED_DATA, PUBLISHED, data_home, split_file

    home = folder or data_home()
    for name, published in PUBLISHED.items():
        for split in published.splits:
            bundled = BUNDLED_DATA / name / f"{split}{published.suffix}"
            fetched = split_file(name, split, home)
            where = (
                f"bundled: {bundled}"
                if bundled.is_file()
                else f"fetched: {fetched}"
                if fetched.is_file()
                else f"not here: storyjudge data get {name} --split {split}"
            )
            say(f"{name + ':' + split:<29} {where}", to=out)
    if not home.is_dir():
        say(f"(data folder {home} does not exist yet)", soft_wrap=False)
