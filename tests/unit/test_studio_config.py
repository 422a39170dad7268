"""`langgraph dev` reads the `.env` the README tells users to create from `.env.example`."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _assignments(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.split("#")[0].strip()
    return values


def test_langgraph_json_reads_the_env_file() -> None:
    config = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))
    assert config["env"] == ".env"  # a path: the file users copy, not inline values that ignore it
    assert ".env" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()


def test_env_example_is_offline_and_says_how_to_trace() -> None:
    example = ROOT / ".env.example"
    values = _assignments(example)
    assert values["LANGSMITH_TRACING"] == "false"
    assert values["LANGGRAPH_NO_VERSION_CHECK"] == "true" and values["HF_HUB_OFFLINE"] == "1"
    text = example.read_text(encoding="utf-8")
    assert "# LANGSMITH_TRACING=true" in text and "# LANGSMITH_API_KEY=" in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "cp .env.example .env" in readme
    assert "LANGSMITH_TRACING=true" in readme and "LANGSMITH_API_KEY" in readme
