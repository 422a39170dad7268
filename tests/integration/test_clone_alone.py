"""A clone alone: the committed repository, cloned into a folder with nothing beside it, runs what the README shows.

The clone is of the checkout's committed HEAD (``git clone``), in a temporary folder with no ``../shared``; its
code is what runs (``PYTHONPATH`` is the clone, the interpreter this one). From there: the example experiment's
dry run, the web UI's story list (the bundled examples and the 25 SQuALITY dev stories), and the README's
experiment block as written, with ``.venv/bin/storyjudge`` standing for this interpreter's program and the
default model sent to the scripted server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import StoryResponder

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a git checkout"
    ),
]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("alone") / "storyjudge"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(where)], check=True, timeout=120)
    assert sorted(p.name for p in where.parent.iterdir()) == ["storyjudge"]  # no shared/ beside it
    return where


def _env(clone: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STORYJUDGE_", "OPENAI_API_KEY"))}
    env.update(
        PYTHONPATH=str(clone),
        STORYJUDGE_DATA_DIR=str(
            clone.parent / "empty-data-cache"
        ),  # no fetched data: only what the clone has
        HF_HUB_OFFLINE="1",
        COLUMNS="200",
        **extra,
    )
    return env


def _run(clone: Path, args: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=clone, env=_env(clone, **extra), capture_output=True, text=True, timeout=900
    )


def test_the_example_dry_run_and_the_ui_story_list_work_from_a_lone_clone(clone: Path) -> None:
    dry = _run(
        clone, [sys.executable, "-m", "storyjudge", "eval", "run", "eval/configs/example.yaml", "--dry-run"]
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "Traceback" not in dry.stderr
    assert "Dry run: estimated LLM work" in dry.stdout
    cells = [
        [c.strip() for c in re.split(r"[│|]", line)]
        for line in dry.stdout.splitlines()
        if "squality-" in line
    ]
    assert [row[3] for row in cells] == ["2"] * 4  # 4 cells (2 strategies x 2 loops) of 2 stories each

    listed = _run(
        clone,
        [
            sys.executable,
            "-c",
            "import json, storyjudge\n"
            "from storyjudge.apps.ui.examples import list_examples\n"
            "print(json.dumps({'package': storyjudge.__file__, "
            "'examples': [[e.id, e.group, str(e.path)] for e in list_examples()]}))",
        ],
    )
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    assert Path(shown["package"]).is_relative_to(clone)  # the clone's code ran
    ids = [ident for ident, _, _ in shown["examples"]]
    assert ids[:2] == ["macbeth-witches", "macbeth-act1"]
    squality = [(ident, path) for ident, group, path in shown["examples"] if group.startswith("SQuALITY")]
    assert len(squality) == 25
    assert {path for _, path in squality} == {str(clone / "eval" / "data" / "squality" / "dev.jsonl")}


def test_a_missing_dataset_is_one_line_from_a_lone_clone(clone: Path, tmp_path: Path) -> None:
    config = tmp_path / "test-split.yaml"
    config.write_text("datasets: [{kind: squality, path: 'squality:test'}]\n", encoding="utf-8")
    got = _run(clone, [sys.executable, "-m", "storyjudge", "eval", "run", str(config), "--dry-run"])
    assert got.returncode == 1
    assert "Traceback" not in got.stderr
    said = [line for line in got.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and said[0].startswith(f"error: {config}: dataset squality:test is not here")
    assert "storyjudge data get squality --split test" in said[0]


def readme_experiment(readme: Path) -> str:
    """The README's bash block that runs the example experiment."""
    blocks = re.findall(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.DOTALL)
    found = [block for block in blocks if "eval run eval/configs/example.yaml" in block]
    assert len(found) == 1, "the README has no block running eval/configs/example.yaml"
    return str(found[0])


def test_the_readme_experiment_runs_as_written(
    clone: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    block = readme_experiment(clone / "README.md")
    assert "--dry-run" in block and block.count("storyjudge eval run eval/configs/example.yaml") == 2
    program = clone / ".venv" / "bin" / "storyjudge"  # what `make install` makes; here this interpreter's
    program.parent.mkdir(parents=True)
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m storyjudge "$@"\n', encoding="utf-8")
    program.chmod(0o755)
    server = scripted_server(StoryResponder())
    done = _run(
        clone,
        ["bash", "-e", "-c", block],
        STORYJUDGE_MODEL="openai:scripted",
        STORYJUDGE_BASE_URL=server.base_url,
        STORYJUDGE_MAX_RETRIES="0",
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "Dry run: estimated LLM work" in done.stdout
    out = clone / "runs" / "eval-example"
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 8 and all(row["status"] == "ok" for row in rows), [r.get("error") for r in rows]
    for name in ("summary.md", "summary.csv", "score_per_iteration.png", "nfs_vs_booookscore.png"):
        assert (out / name).is_file(), name
    assert "refine cells (means over items" in done.stdout and "Wrote:" in done.stdout  # the table, the files
