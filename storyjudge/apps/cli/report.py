"""``storyjudge report RUN_DIR``: rebuild a run directory's self-contained ``report.html``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from storyjudge.apps.cli import app
from storyjudge.apps.cli.common import fail, out


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="Run directory holding result.json (and ckg.json).")],
) -> None:
    """Write RUN_DIR/report.html: the character graph drawn, iterations with unsupported facts marked, evidence."""
    from storyjudge.apps.report import write_report
    from storyjudge.core.runrecord import RunRecordError

    if not run_dir.is_dir():
        fail(f"{run_dir} is not a directory; give the run directory of a refine or score run.")
    try:
        path = write_report(run_dir)
    except (FileNotFoundError, RunRecordError) as exc:
        fail(str(exc))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        fail(f"cannot read the run record in {run_dir}: {exc}")
    out.print(f"Report: {path} (opens offline: {path.resolve().as_uri()})", markup=False)
