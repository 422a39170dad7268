"""Context: defaults, STORYJUDGE_<FIELD> overrides, validation, and normalising what callers pass."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from storyjudge.core.context import ROLES, ConfigError, Context, as_context, context_of


def test_defaults_are_usable_and_every_field_is_described() -> None:
    ctx = Context()
    assert ctx.model == ""
    assert all(getattr(ctx, f"{role}_model") == "" for role in ROLES)
    assert ctx.concurrency == 4
    assert ctx.chunk_size == 2048
    assert ctx.max_summary_tokens == 900
    assert ctx.temperature == 0.0
    assert ctx.embedder == "minilm"
    assert ctx.artifact_removal is True
    undescribed = [name for name, f in Context.model_fields.items() if not f.description]
    assert undescribed == []


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("concurrency", "8", 8),
        ("temperature", "0.3", 0.3),
        ("coherence_guard", "yes", True),
        ("artifact_removal", "0", False),
        ("artifact_removal", "FALSE", False),
        ("judge_model", "openai:gpt-4o", "openai:gpt-4o"),
        ("base_url", "http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ],
)
def test_environment_overrides_defaults_with_the_field_type(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str, expected: object
) -> None:
    monkeypatch.setenv(f"STORYJUDGE_{name.upper()}", raw)
    value = getattr(Context(), name)
    assert value == expected
    assert type(value) is type(expected)


def test_explicit_values_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORYJUDGE_CONCURRENCY", "8")
    monkeypatch.setenv("STORYJUDGE_MODEL", "openai:from-env")
    assert Context(concurrency=2, model="local:smollm2").concurrency == 2
    assert Context(model="local:smollm2").model == "local:smollm2"


def test_explicit_value_equal_to_the_default_still_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    # --concurrency 4 on the command line must not be replaced by a shell-wide STORYJUDGE_CONCURRENCY=8
    monkeypatch.setenv("STORYJUDGE_CONCURRENCY", "8")
    monkeypatch.setenv("STORYJUDGE_ARTIFACT_REMOVAL", "false")
    ctx = Context(concurrency=4, artifact_removal=True)
    assert ctx.concurrency == 4
    assert ctx.artifact_removal is True
    assert Context().concurrency == 8


def test_replace_keeps_environment_values_and_applies_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORYJUDGE_RETRIEVAL_K", "7")
    ctx = Context().replace(concurrency=2)
    assert (ctx.retrieval_k, ctx.concurrency) == (7, 2)
    with pytest.raises(ConfigError, match="concurrency"):
        ctx.replace(concurrency=0)


@pytest.mark.parametrize(
    ("name", "raw"), [("concurrency", "many"), ("temperature", "warm"), ("coherence_guard", "maybe")]
)
def test_unparseable_environment_value_names_the_field(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    monkeypatch.setenv(f"STORYJUDGE_{name.upper()}", raw)
    with pytest.raises(ConfigError) as info:
        Context()
    assert name in str(info.value)
    assert raw in str(info.value)


@pytest.mark.parametrize(
    ("changes", "field_name"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"chunk_size": 10}, "chunk_size"),
        ({"predicate_threshold": 1.5}, "predicate_threshold"),
        ({"strategy": "random"}, "strategy"),
        ({"target_score": -0.1}, "target_score"),
        ({"temperature": -1.0}, "temperature"),
        ({"patience": 0}, "patience"),
    ],
)
def test_invalid_values_raise_config_error_naming_the_field(
    changes: dict[str, object], field_name: str
) -> None:
    with pytest.raises(ConfigError, match=field_name):
        Context(**changes)  # type: ignore[arg-type]


def test_invalid_environment_value_is_validated_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORYJUDGE_CONCURRENCY", "0")
    with pytest.raises(ConfigError, match="concurrency"):
        Context()


def test_wrongly_typed_values_are_coerced_or_rejected_by_name() -> None:
    # a form or JSON payload may send numbers as strings
    assert Context(concurrency="3").concurrency == 3  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="concurrency"):
        Context(concurrency="lots")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="retrieval_k"):
        Context(retrieval_k=[3])  # type: ignore[arg-type]
    assert Context(run_dir=Path("runs/x")).run_dir == "runs/x"  # type: ignore[arg-type]


def test_as_context_accepts_none_dict_and_context() -> None:
    assert as_context(None) == Context()
    ctx = Context(concurrency=2)
    assert as_context(ctx) is ctx
    from_dict = as_context({"concurrency": 3, "judge_model": "local:smollm2"})
    assert isinstance(from_dict, Context)
    assert (from_dict.concurrency, from_dict.judge_model) == (3, "local:smollm2")


def test_as_context_rejects_unknown_keys_by_name() -> None:
    with pytest.raises(ConfigError, match="concurency"):
        as_context({"concurency": 3})


def test_as_context_rejects_other_types() -> None:
    with pytest.raises(ConfigError, match="list"):
        as_context([("concurrency", 3)])  # type: ignore[arg-type]


def test_context_of_falls_back_to_defaults() -> None:
    assert context_of(None) == Context()
    assert context_of(SimpleNamespace(context=None)) == Context()  # type: ignore[arg-type]
    assert context_of(SimpleNamespace(context={"retrieval_k": 5})).retrieval_k == 5  # type: ignore[arg-type]
    ctx = Context(retrieval_k=6)
    assert context_of(SimpleNamespace(context=ctx)) is ctx  # type: ignore[arg-type]


def test_public_dict_lists_every_field() -> None:
    record = Context(model="local:smollm2").public_dict()
    assert set(record) == set(Context.model_fields)
    assert record["model"] == "local:smollm2"


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"strategy": "magic"}, "strategy must be 'hierarchical' or 'incremental', not 'magic'"),
        ({"preset": "paper"}, "preset must be empty, 'booookscore-paper' or 'nfs-paper', not 'paper'"),
        ({"predicate_threshold": 1.5}, "predicate_threshold must be between 0 and 1, not 1.5"),
        ({"concurrency": 0}, "concurrency must be >= 1, not 0"),
        ({"request_timeout": 0}, "request_timeout must be > 0, not 0"),
        ({"concurrency": "lots"}, "concurrency must be an integer, not 'lots'"),
        ({"temperature": "warm"}, "temperature must be a number, not 'warm'"),
        (
            {"coherence_guard": "maybe"},
            "coherence_guard must be on or off (true/false, yes/no, 1/0), not 'maybe'",
        ),
        ({"model": 3}, "model must be text, not 3"),
        (
            {"summary_temperature": -0.5},
            "summary_temperature must be >= 0, or -1 for the temperature setting",
        ),
        (
            {"base_url": "ftp://host/v1"},
            "base_url 'ftp://host/v1' is not a valid URL (the scheme must be http",
        ),
        ({"retrival_k": 2}, "there is no setting 'retrival_k'; did you mean retrieval_k?"),
        (
            {"patience": 0, "chunker": "words"},
            "chunker must be 'sentences' or 'official', not 'words'; patience must be >= 1, not 0.",
        ),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_field_and_what_it_takes(
    changes: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        Context(**changes)  # type: ignore[arg-type]
    message = str(raised.value)
    assert message.startswith("Invalid setting: ") and says in message
    assert "\n" not in message


def test_a_bad_environment_value_says_which_variable_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORYJUDGE_RETRIEVAL_K", "-2")
    with pytest.raises(ConfigError) as raised:
        Context()
    assert "retrieval_k must be >= 1, not '-2' (from STORYJUDGE_RETRIEVAL_K='-2': fix or unset it)" in str(
        raised.value
    )
    assert Context(retrieval_k=2).retrieval_k == 2  # a value given wins over the bad variable


def test_the_context_is_frozen_and_replace_validates() -> None:
    ctx = Context()
    with pytest.raises(ValueError, match="frozen"):
        ctx.concurrency = 2  # type: ignore[misc]
    assert ctx.replace(concurrency=2).concurrency == 2 and ctx.concurrency == 4


def test_studio_schema_carries_descriptions_choices_and_bounds() -> None:
    """LangGraph builds Studio's form from the context schema: every field, its help, its choices and bounds."""
    properties = Context.model_json_schema()["properties"]
    assert set(properties) == set(Context.model_fields)
    assert all(p.get("description") for p in properties.values())
    assert properties["strategy"]["enum"] == ["hierarchical", "incremental"]
    assert properties["concurrency"]["minimum"] == 1
    assert (properties["coverage_floor"]["minimum"], properties["coverage_floor"]["maximum"]) == (0, 1)
