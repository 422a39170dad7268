"""Command-line options made from the ``Context`` fields they set: one flag per field, the same in every command.

Typer reads options only from a callback's signature, so ``with_settings`` gives the command a PEP 362
``__signature__``. Choices (``Literal`` fields) are text options: a wrong one is the Context's one-line error.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_origin

import typer

from storyjudge.core.context import ConfigError, Context

FIELDS = Context.model_fields
# other names of an option: a letter where it cannot be mistaken for another setting, a singular
SHORT = {"model": "-m", "concurrency": "-j", "metrics": "--metric"}
SET_PARAM = "set_values"


def flag_option(decl: str, help: str, panel: str | None = None) -> Any:
    """``Annotated[bool, typer.Option(...)]``: an on/off option, off unless given."""
    return Annotated[bool, typer.Option(decl, help=f"{help} Default: off.", rich_help_panel=panel)]


PANELS: dict[str, tuple[str, ...]] = {
    "Model": (
        *("model", "extractor_model", "summarizer_model", "decomposer_model", "judge_model", "refiner_model"),
        *("coherence_model", "base_url", "temperature", "summary_temperature", "extraction_temperature"),
        *("max_output_tokens", "context_window", "seed"),
    ),
    "Method": (
        *("preset", "prompt_dir", "chunk_size", "ckg_samples", "predicate_threshold", "predicate_min_count"),
        *("embedder", "bge_m3_path", "retrieval_k", "evidence_tokens", "coverage_floor", "strategy"),
        "metrics",
        *("max_summary_tokens", "artifact_removal", "batched_coherence", "sentence_splitter"),
    ),
    "Loop": (
        *("max_iterations", "target_score", "min_delta", "patience", "refine_guard", "max_supported_loss"),
        *("min_length_ratio", "max_length_ratio", "max_copy_increase", "coherence_guard", "coherence_margin"),
    ),
    "Output": ("run_dir", "cache_dir"),
    "Operation": (
        *("concurrency", "request_timeout", "retry_budget_s", "parse_retries"),
        *("chroma_url", "scene_store"),
    ),
}
PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}


def flag(name: str) -> str:
    """The option that sets a Context field: its name with dashes."""
    return "--" + name.replace("_", "-")


def field_help(name: str) -> str:
    """An option's help: the field's description, then its default (an empty one is explained by the first)."""
    field = FIELDS[name]
    description = str(field.description)
    default = field.default
    if default == "":
        return description
    if isinstance(default, bool):
        default = "on" if default else "off"
    return f"{description} Default: {default if default != [] else 'none'}."


def setting_option(name: str) -> Any:
    """``Annotated[<type> | None, typer.Option(...)]`` for a Context field (None: not given on the command line)."""
    hint: Any = FIELDS[name].annotation
    metavar = None
    if get_origin(hint) is Literal:
        hint = str
    elif get_origin(hint) is list:  # repeatable; each value is checked by the Context
        hint, metavar = list[str], "SPEC"
    decls = [f"{flag(name)}/--no-{flag(name)[2:]}" if hint is bool else flag(name)]
    if name in SHORT:
        decls.append(SHORT[name])
    return Annotated[
        hint | None,
        typer.Option(
            *decls, metavar=metavar, help=field_help(name), rich_help_panel=PANEL_OF.get(name, "Method")
        ),
    ]


SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="FIELD=VALUE",
        help="Any other setting by its name, e.g. --set temperature=0.2 or --set judge_model=openai:gpt-4o "
        "(repeatable; the names are those of the STORYJUDGE_<FIELD> environment variables, in lower case). "
        "Default: none.",
        rich_help_panel="Operation",
    ),
]


def model_settings(*roles: str) -> tuple[str, ...]:
    """The settings that choose the models: one for every role, one per role used, the server."""
    return ("model", *(f"{role}_model" for role in roles), "base_url")


def run_settings(*roles: str) -> tuple[str, ...]:
    """What every graph command takes: the models of its roles, the server, concurrency, preset, prompts."""
    return (*model_settings(*roles), "concurrency", "preset", "prompt_dir")


@dataclass(frozen=True)
class Settings:
    """The settings a command was given: its own options (None where not given) and its ``--set`` pairs."""

    options: dict[str, Any]
    pairs: tuple[str, ...] = ()

    def values(self) -> dict[str, Any]:
        """Field -> value of everything given; a bad --set pair or a field given twice fails in one line."""
        from storyjudge.apps.cli.common import fail

        values = {name: value for name, value in self.options.items() if value not in (None, [])}
        from_set: set[str] = set()
        for pair in self.pairs:
            raw_name, sep, value = pair.partition("=")
            name = raw_name.strip().replace("-", "_")
            if not sep or not name:
                fail(f"--set {pair!r} is not FIELD=VALUE; write it like --set temperature=0.2.")
            if name not in FIELDS:
                close = difflib.get_close_matches(name, FIELDS, n=3, cutoff=0.6)
                hint = f"did you mean {', '.join(close)}?" if close else "see the options in --help."
                fail(f"--set {raw_name.strip()}: there is no setting of that name; {hint}")
            if name in values:
                given = "--set" if name in from_set else flag(name)
                fail(f"{name} is given twice ({given} and --set {name}); give it once.")
            values[name] = value  # a string: the Context converts it to the field's type, or says why not
            from_set.add(name)
        return values

    def context(self, **defaults: Any) -> Context:
        """The run's Context: given settings win over ``defaults``, which win over env vars and field defaults."""
        from storyjudge.apps.cli.common import failing

        with failing(ConfigError):
            return Context(**{**defaults, **self.values()})


def with_settings(
    *names: str,
    other_settings: bool = True,
    extra: dict[str, tuple[Any, Any]] | None = None,
    body: Callable[..., None] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., None]]:
    """Give a command an option per Context field in ``names``, the ``extra`` options (name: (type, default)), --set.

    Typer sees them in place of its ``settings: Settings``; given ``body``, calling the command calls ``body``.
    """
    keyword = inspect.Parameter.KEYWORD_ONLY

    def decorate(command: Callable[..., Any]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "settings"]
        added = [
            inspect.Parameter(key, keyword, annotation=hint, default=value)
            for key, (hint, value) in (extra or {}).items()
        ]
        added += [
            inspect.Parameter(name, keyword, annotation=setting_option(name), default=None) for name in names
        ]
        if other_settings:
            added.append(inspect.Parameter(SET_PARAM, keyword, annotation=SetOpt, default=None))
        run = body or command

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> None:
            options = {name: kwargs.pop(name, None) for name in names}
            pairs = tuple(kwargs.pop(SET_PARAM, None) or ())
            run(settings=Settings(options, pairs), **kwargs)

        parameters = _by_panel([*own, *added])
        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate


def _by_panel(parameters: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """Arguments first, in order; then the options in ``PANELS`` order (typer draws panels as it meets them)."""
    empty = inspect.Parameter.empty
    order = {panel: i for i, panel in enumerate([None, *PANELS])}

    def rank(parameter: inspect.Parameter) -> tuple[bool, int]:
        infos = getattr(parameter.annotation, "__metadata__", ())
        panel = next((info.rich_help_panel for info in infos if getattr(info, "rich_help_panel", None)), None)
        return parameter.default is not empty, order.get(panel, len(order))

    ordered = sorted(parameters, key=rank)
    return [p if p.default is empty else p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in ordered]
