"""LangGraph Studio draws its input and configuration forms from these JSON schemas: each must build."""

from __future__ import annotations

import importlib

import pytest

GRAPHS = ("index", "summarize", "factscore", "coherence", "refine")


@pytest.mark.parametrize("name", GRAPHS)
@pytest.mark.parametrize("kind", ("input", "output", "context"))
def test_every_graph_schema_builds(name: str, kind: str) -> None:
    graph = importlib.import_module(f"graphs.{name}").graph
    schema = getattr(graph, f"get_{kind}_jsonschema")()
    assert schema.get("properties"), f"{name} {kind} schema has no fields"


def test_the_context_form_describes_every_setting() -> None:
    from graphs.refine import graph

    properties = graph.get_context_jsonschema()["properties"]
    assert "coverage_floor" in properties and "judge_model" in properties
    undescribed = [name for name, field in properties.items() if not field.get("description")]
    assert not undescribed, f"settings without a description in Studio's form: {undescribed}"


def test_the_refine_input_form_asks_for_the_document() -> None:
    from graphs.refine import graph

    assert {"document", "scenes", "title", "summary"} <= set(graph.get_input_jsonschema()["properties"])


@pytest.mark.parametrize("name", GRAPHS)
def test_studio_input_fields_are_described_and_internal_ones_hidden(name: str) -> None:
    """Every field of a graph's input form says what it is; only what a caller program sets stays out."""
    schema = importlib.import_module(f"graphs.{name}").graph.get_input_jsonschema()
    undescribed = [field for field, spec in schema["properties"].items() if not spec.get("description")]
    assert not undescribed, f"{name} input fields without a description: {undescribed}"
    assert not {"started_at", "iteration", "previous_summary"} & set(schema["properties"])
    assert schema.get("required", []) == (["summary"] if name == "factscore" else [])
