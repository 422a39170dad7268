"""``storyjudge compare RUN RUN [RUN...]``: summaries of one story side by side, with intervals, fact by fact."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import console, fail, failing, out, print_json, say, text_table


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

    with failing(ValueError):
        result = compare([RunRef.parse(r) for r in runs])
    try:
        page = write_page(html, render_html(result))
    except OSError as exc:
        fail(f"Cannot write {html}: {exc.strerror or exc}; choose another --html path.")
    if as_json:
        console.print(f"Compare page: {page}", soft_wrap=True, highlight=False)
        print_json(result)
        return
    columns = ["", *(escape(view["label"]) for view in result["summaries"])]
    rows = ((name, *map(escape, cells)) for name, cells in table_rows(result))
    out.print(text_table(escape(f"Compare: {result['story'] or 'untitled'}"), columns, rows))
    for pair in result["pairs"]:  # the runs' words, as they are
        say(pair_line(pair), to=out)
        for side, facts in ((pair["a"], pair["only_a"]), (pair["b"], pair["only_b"])):
            say(f"  supported only in {side}: {len(facts)}", to=out)
            for item in facts:
                other = item["counterpart"]
                there = f"{other['verdict']}: {other['text']}" if other else "no counterpart"
                say(f"    - {item['fact']['text']}  [other: {there}]", to=out)
    out.print(f"Compare page: {page}", soft_wrap=True, highlight=False)
