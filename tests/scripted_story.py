"""A tiny story and a scripted model that plays every storyjudge role over HTTP, for end-to-end tests.

The responder recognises each call by its structured-output schema name (sent as the JSON-schema response format)
or, for text calls, by its prompt. Its summary contains one false fact ("Bob steals the map"); the judge flags it,
the refiner fixes it, and the next round is fully supported — so a refine run goes 2/3 -> 1.0 and stops on target.
Like a careful model, its judge rejects a fact, and its annotator flags a sentence, that names someone the story
never does (the planted controls of ``storyjudge.core.planted``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from storyjudge.apps.cli import app
from storyjudge.core.scripted_server import all_text, last_user_text

STORY = """Chapter 1

Alice waits at the harbour of Port Wren. Bob arrives on the morning ferry and greets Alice warmly.
Alice tells Bob that her grandfather hid a treasure on Gull Island.

Chapter 2

Bob gives Alice an old map of Gull Island. Alice thanks Bob, and together they sail to the island.
On the island, Alice finds the treasure under the lighthouse, and Bob is amazed.
"""

WRONG = "Bob steals the map from Alice."
RIGHT = "Bob gives Alice the map of Gull Island."
FIRST_SUMMARY = (
    f"Alice meets Bob at the harbour of Port Wren. {WRONG} Alice finds the treasure on Gull Island."
)
FIXED_SUMMARY = (
    f"Alice meets Bob at the harbour of Port Wren. {RIGHT} Alice finds the treasure on Gull Island."
)

TRIPLES = {
    "characters": [{"name": "Alice", "aliases": []}, {"name": "Bob", "aliases": []}],
    "triples": [
        {"subject": "Bob", "predicate": "greets", "object": "Alice"},
        {"subject": "Bob", "predicate": "gives map to", "object": "Alice"},
        {"subject": "Alice", "predicate": "finds treasure", "object": None},
    ],
}


def _block(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}[^>]*>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return match.group(1).strip() if match else ""


def strangers(text: str, story: str = STORY) -> list[str]:
    """Full names in ``text`` (two capitalised words) neither of whose words ``story`` uses: people it never names."""
    known = {word.casefold() for word in re.findall(r"[A-Za-z']+", story)}
    pairs = re.findall(r"\b([A-Z][a-z]+) ([A-Z][a-z]+)\b", text)
    return [f"{a} {b}" for a, b in pairs if a.casefold() not in known and b.casefold() not in known]


def schema_name(body: dict[str, Any]) -> str:
    """The JSON-schema name of a structured request ('' for text requests)."""
    fmt = body.get("response_format") or {}
    return str((fmt.get("json_schema") or {}).get("name", ""))


class StoryResponder:
    """Callable responder; counts calls per kind in ``self.calls``."""

    def __init__(self, *, fix: bool = True) -> None:
        self.fix = fix
        self.calls: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        self.calls[kind] = self.calls.get(kind, 0) + 1

    def __call__(self, body: dict[str, Any]) -> str:
        name = schema_name(body)
        text = last_user_text(body)
        if name == "SceneTriples" or "List the characters of one scene" in text:
            self._count("extract")
            return json.dumps(TRIPLES)
        if name == "AtomicFacts":
            self._count("decompose")
            sentence = _block(text, "sentence")
            return json.dumps({"facts": [sentence] if sentence else []})
        if name == "Verdict":
            self._count("judge")
            fact = _block(text, "fact")
            if strangers(fact):
                return json.dumps(
                    {
                        "rationale": f"The story never names {strangers(fact)[0]}.",
                        "supported": False,
                        "feedback": "No such character in the story.",
                        "evidence": [],
                    }
                )
            if "steals" in fact:
                return json.dumps(
                    {
                        "rationale": "Chapter 2 says Bob gives Alice the map; nothing says he steals it.",
                        "supported": False,
                        "feedback": "Bob does not steal the map: he gives Alice the map of Gull Island.",
                        "evidence": ["S002"],
                    }
                )
            return json.dumps(
                {"rationale": "The scenes state this.", "supported": True, "feedback": "", "evidence": []}
            )
        if name == "BatchedConfusions":
            self._count("coherence")
            return json.dumps({"sentences": []})
        if name:
            self._count(name)
            return "{}"
        whole = all_text(body)
        if "You revise a summary" in whole:
            self._count("refine")
            return FIXED_SUMMARY if self.fix else FIRST_SUMMARY
        if "causes any confusion" in whole:
            self._count("coherence")
            stranger = strangers(_block(text, "sentence"))
            if stranger:
                return f"Questions: Who is {stranger[0]}?\nTypes: entity omission"
            return "Questions: no confusion\nTypes: no confusion"
        self._count("summarize")
        return FIRST_SUMMARY


def cli_refine(
    base_url: str, tmp_path: Path, *options: str, env: dict[str, str] | None = None, ok: bool = True
) -> tuple[Result, dict[str, Any]]:
    """``storyjudge refine`` of ``STORY`` against the scripted server at ``base_url``, one CKG sample.

    Writes the story and the run into ``tmp_path``; returns the CLI's result and the run's ``result.json``
    (empty when the run wrote none). ``ok``: the run must exit 0.
    """
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["refine", str(story), "--model", "openai:scripted", "--base-url", base_url]
        + ["--run-dir", str(run_dir), "--ckg-samples", "1", *options],
        env=env,
    )
    if ok:
        assert result.exit_code == 0, result.output
    path = run_dir / "result.json"
    return result, json.loads(path.read_text()) if path.is_file() else {}
