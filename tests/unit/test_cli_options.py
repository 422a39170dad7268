"""CLI options are made from the Context fields: one flag per field, its help and default from the field."""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.testing import CliRunner

from storyjudge.apps.cli import COMMANDS, app
from storyjudge.apps.cli.options import field_help, flag
from storyjudge.core.context import Context


def _commands() -> dict[str, Any]:
    """Every command by its full name (typer's own click objects: compared by their attributes)."""
    for module in dict.fromkeys(module for module, _ in COMMANDS.values()):  # they load lazily
        importlib.import_module(f"storyjudge.apps.cli.{module}")
    root: Any = typer.main.get_command(app)
    found: dict[str, Any] = {}
    for name, command in root.commands.items():
        if hasattr(command, "commands"):
            found.update({f"{name} {sub}": c for sub, c in command.commands.items()})
        else:
            found[name] = command
    return found


def test_every_field_help_says_what_it_means_and_its_default() -> None:
    for name in Context.model_fields:
        text = field_help(name)
        assert ("Default: " in text) or ("Empty: " in text), name
        for jargon in ("G_n", " W ", "seed + i", "(k)"):
            assert jargon not in text, (name, jargon)


def test_a_field_has_the_same_flag_and_help_in_every_command() -> None:
    names = set(Context.model_fields)
    seen: dict[str, tuple[tuple[str, ...], str]] = {}
    for command_name, command in _commands().items():
        for param in command.params:
            if (
                param.name not in names or param.param_type_name != "option"
            ):  # report's RUN_DIR is an argument
                continue
            assert param.opts[0] == flag(param.name), (command_name, param.opts)
            key = (tuple(param.opts), param.help or "")
            assert seen.setdefault(param.name, key) == key, (command_name, param.name)
            assert param.help == field_help(param.name)


def test_every_option_shows_its_default() -> None:
    for command_name, command in _commands().items():
        for param in command.params:
            if param.param_type_name != "option" or param.name == "help" or param.required:
                continue
            # "Empty: ..." says what an empty default means: that is how a field with an empty default shows it
            shown = (
                "Default" in (param.help or "")
                or "Empty: " in (param.help or "")
                or (
                    param.default not in (None, "")  # typer shows "[default: X]" for these, not for ""
                    and not (param.is_flag and not param.secondary_opts)
                )
            )
            assert shown, (command_name, param.name)


def test_version_and_help_without_internal_names() -> None:
    from storyjudge import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"storyjudge {__version__}\n"
    for command_name, command in _commands().items():
        for jargon in ("CKG", "critical-path", "saturates", "atomic fact"):
            assert jargon not in (command.help or ""), (command_name, jargon)


def test_graph_commands_take_any_setting_and_their_roles_models() -> None:
    commands = _commands()
    expected = {
        "index": ("extractor_model",),
        "summarize": ("summarizer_model",),
        "score": ("extractor_model", "decomposer_model", "judge_model"),
        "refine": ("summarizer_model", "judge_model", "refiner_model", "coherence_model"),
        "coherence": ("coherence_model",),
    }
    for name, roles in expected.items():
        params = {p.name for p in commands[name].params}
        assert {"model", "base_url", "concurrency", "preset", "prompt_dir", "set_values", *roles} <= params, (
            name
        )


def test_help_is_in_words_and_refine_groups_its_options_in_panels() -> None:
    """No ``<bool>`` on a flag, no ``{file}`` in a usage line; refine's panels from model to operation."""
    from typer.testing import CliRunner

    from storyjudge.apps.cli import app

    runner = CliRunner()
    for command in ("refine", "score", "index", "summarize", "coherence", "report", "doctor", "ui"):
        shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "120"})
        assert shown.exit_code == 0, shown.output
        assert "<bool>" not in shown.output, (command, shown.output)
        usage = next(line for line in shown.output.splitlines() if "Usage:" in line)
        assert "{" not in usage and "}" not in usage, usage
    text = runner.invoke(app, ["refine", "--help"], env={"COLUMNS": "120"}).output
    assert "Usage: storyjudge refine [OPTIONS] FILE" in text
    panels = [line.split("─ ")[1].split(" ─")[0] for line in text.splitlines() if line.startswith("╭─ ")]
    assert panels == ["Arguments", "Options", "Model", "Method", "Loop", "Output", "Operation"], panels
    assert "<int>" in text  # options that take a value still say which kind
