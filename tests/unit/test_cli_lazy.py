"""The CLI imports a command's module only when that command runs; ``--help`` still lists every command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from storyjudge.apps.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_help_lists_every_command_without_importing_one() -> None:
    out = json.loads(
        _python(
            "import json, sys\n"
            "from typer.testing import CliRunner\n"
            "from storyjudge.apps.cli import app\n"
            "result = CliRunner().invoke(app, ['--help'], env={'COLUMNS': '200'})\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('storyjudge.apps.cli.'))\n"
            "heavy = sorted(m for m in ('langgraph', 'langchain_core', 'torch') if m in sys.modules)\n"
            "print(json.dumps({'code': result.exit_code, 'output': result.output, 'loaded': loaded, "
            "'heavy': heavy}))\n"
        )
    )
    assert out["code"] == 0, out["output"]
    for name, (_, help_line) in COMMANDS.items():
        assert f" {name} " in out["output"], name
        assert help_line.split(":")[0] in out["output"], name
    assert out["loaded"] == []
    assert out["heavy"] == []


def test_each_command_module_registers_the_commands_and_help_lines_listed() -> None:
    """Import the modules one at a time in a fresh process: each adds exactly the commands COMMANDS gives it."""
    found = json.loads(
        _python(
            "import importlib, json\n"
            "from storyjudge.apps.cli import COMMANDS, app\n"
            "def names():\n"
            "    out = {}\n"
            "    for info in app.registered_commands:\n"
            "        doc = info.help or (info.callback.__doc__ if info.callback else '') or ''\n"
            "        out[info.name or info.callback.__name__] = doc.strip().splitlines()[0]\n"
            "    for group in app.registered_groups:\n"
            "        out[group.name] = (group.typer_instance.info.help or '').strip().splitlines()[0]\n"
            "    return out\n"
            "by_module = {}\n"
            "for module in dict.fromkeys(m for m, _ in COMMANDS.values()):\n"
            "    before = names()\n"
            "    importlib.import_module('storyjudge.apps.cli.' + module)\n"
            "    after = names()\n"
            "    by_module[module] = {n: h for n, h in after.items() if n not in before}\n"
            "print(json.dumps(by_module))\n"
        )
    )
    expected: dict[str, dict[str, str]] = {}
    for name, (module, help_line) in COMMANDS.items():
        expected.setdefault(module, {})[name] = help_line
    assert found == expected


def test_a_command_runs_and_a_misspelt_one_gets_a_suggestion() -> None:
    from typer.testing import CliRunner

    from storyjudge.apps.cli import app

    shown = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "RUN_DIR" in shown.output
    wrong = CliRunner().invoke(app, ["refin"], env={"COLUMNS": "200"})
    assert wrong.exit_code != 0
    assert "Did you mean 'refine'?" in wrong.output


def _storyjudge(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "storyjudge", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_the_quick_exit_keeps_the_output_and_the_exit_status() -> None:
    shown = _storyjudge("--version")
    assert shown.returncode == 0 and shown.stdout.startswith("storyjudge ")
    listed = _storyjudge("--help")  # long output into a pipe: everything arrives before the process ends
    assert listed.returncode == 0
    assert all(f" {name} " in listed.stdout for name in COMMANDS)
    wrong = _storyjudge("refin")
    assert wrong.returncode == 2
    assert "Did you mean 'refine'?" in wrong.stderr
    refused = _storyjudge("doctor", "--concurrency", "0")
    assert refused.returncode == 1
    assert "concurrency must be >= 1" in refused.stdout + refused.stderr
