"""``storyjudge compare RUN RUN [RUN...]``: summaries of one story side by side, with intervals, fact by fact."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import console, fail, out, print_json


@app.command("compare")
def compare_command(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="Two or more runs of one story: a run folder (a story's runs/<id>/) or its result.json; "
            "RUN#N names round N of a refinement (0: the first summary), RUN alone its best round."
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="The comparison alone on standard output, as JSON. Default: off.")
    ] = False,
    html: Annotated[
        Path, typer.Option("--html", help="Where to write the self-contained compare page.")
    ] = Path("compare.html"),
) -> None:
    """Compare summaries of one story: scores with 95% intervals, differences, the facts only one supports."""
    from storyjudge.apps.compare import compare, pair_line, render_html, table_rows
    from storyjudge.apps.report.assets import write_page
    from storyjudge.core.keptruns import RunRef

    try:
        result = compare([RunRef.parse(r) for r in runs])
    except ValueError as exc:
        fail(str(exc))
    try:
        page = write_page(html, render_html(result))
    except OSError as exc:
        fail(f"Cannot write {html}: {exc.strerror or exc}; choose another --html path.")
    if as_json:
        console.print(f"Compare page: {page}", soft_wrap=True, highlight=False)
        print_json(result)
        return
    table = Table(title=escape(f"Compare: {result['story'] or 'untitled'}"), header_style="bold")
    table.add_column("")
    for view in result["summaries"]:
        table.add_column(escape(view["label"]), overflow="fold")
    for name, cells in table_rows(result):
        table.add_row(name, *(escape(c) for c in cells))
    out.print(table)
    say = partial(out.print, soft_wrap=True, highlight=False, markup=False)  # the runs' words, as they are
    for pair in result["pairs"]:
        say(pair_line(pair))
        for side, facts in ((pair["a"], pair["only_a"]), (pair["b"], pair["only_b"])):
            say(f"  supported only in {side}: {len(facts)}")
            for item in facts:
                other = item["counterpart"]
                there = f"{other['verdict']}: {other['text']}" if other else "no counterpart"
                say(f"    - {item['fact']['text']}  [other: {there}]")
    out.print(f"Compare page: {page}", soft_wrap=True, highlight=False)
