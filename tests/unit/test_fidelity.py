"""The papers' rules as settings: the table of differences, NarrativeFactScore's indicator, sentences keyed once."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphs.coherence import graph as coherence_graph
from prompts import load
from storyjudge.core import presets
from storyjudge.core.context import Context
from storyjudge.core.narrativefactscore import score_card
from storyjudge.core.records import FactVerdict
from storyjudge.core.scripted_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
FIDELITY = ROOT / "FIDELITY.md"


def shown(value: Any) -> str:
    """A setting's value as FIDELITY.md writes its switch: ``field=value``, booleans in lower case."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_fidelity_table_holds_every_preset_value_and_is_linked_from_the_readme() -> None:
    text = FIDELITY.read_text(encoding="utf-8")
    for name, rows in presets.PRESETS.items():
        assert f"`--preset {name}`" in text, name
        for field_name, setting in rows.items():
            assert f"`{field_name}={shown(setting.value)}`" in text, (name, field_name)
    assert "(FIDELITY.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    # every row says where its values come from, in the words presets.py uses
    for row in (line for line in text.splitlines() if line.startswith("| ") and "---" not in line):
        assert re.search(r"seed 00[01]|official code|ours", row, re.IGNORECASE), row


def verdict(index: int, status: str) -> FactVerdict:
    fact = {"id": f"i0-s0-f{index}", "iteration": 0, "sentence_index": 0, "text": f"fact {index}"}
    evidence = {"query": "", "scenes": [], "ckg_lines": []}
    return {"fact": fact, "status": status, "rationale": "", "feedback": "", "raw": "", "evidence": evidence}  # type: ignore[typeddict-item]


def test_unread_verdicts_count_as_not_supported_under_the_papers_indicator() -> None:
    verdicts = [
        verdict(0, "supported"),
        verdict(1, "supported"),
        verdict(2, "unsupported"),
        verdict(3, "unjudged"),
    ]
    ours = score_card(0, ["s0"], verdicts, 0)
    paper = score_card(0, ["s0"], verdicts, 0, unjudged="unsupported")
    assert ours["score"] == 2 / 3 and ours["unjudged_rule"] == "exclude"
    assert (
        paper["score"] == 2 / 4 and paper["unjudged_rule"] == "unsupported"
    )  # every fact in the denominator
    assert paper["per_sentence"][0]["score"] == 2 / 4
    assert paper["coverage"] == ours["coverage"] == 0.75  # the unread verdict is reported either way
    nothing_read = score_card(0, ["s0"], [verdict(0, "unjudged")], 0, unjudged="unsupported")
    assert nothing_read["score"] == 0.0 and not nothing_read["reliable"]


def test_a_repeated_sentence_is_asked_once_when_keyed_by_sentence(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], tmp_path: Path
) -> None:
    summary = "Mara inherits a lighthouse. The Guild wants it. Mara inherits a lighthouse."

    def responder(body: dict[str, Any]) -> str:
        confused = '<sentence number="1">' in body["messages"][-1]["content"]
        return (
            "Questions: Who is Mara?\nTypes: entity omission"
            if confused
            else "Questions: no confusion\nTypes: no confusion"
        )

    server = scripted_server(responder)
    each = coherence_graph.invoke({"summary": summary}, context=ctx_for(server))
    assert (len(server.completions), each["coherence"]["sentences"]) == (3, 3)
    assert each["coherence"]["score"] == 2 / 3 and each["coherence"]["repeated_sentences"] == "each"
    once = coherence_graph.invoke(
        {"summary": summary},
        context=ctx_for(server, repeated_sentences="once", cache_dir=str(tmp_path / "once")),
    )
    assert len(server.completions) == 3 + 2 and once["coherence"]["sentences"] == 2
    assert (
        once["coherence"]["score"] == 1 / 2
    )  # the official scorer: 1 - confusing / sentences, keyed by text
    assert [a["sentence"] for a in once["annotations"]] == [
        "Mara inherits a lighthouse.",
        "The Guild wants it.",
    ]


def test_the_judge_prompt_states_its_rules() -> None:
    text = load("judge").text.lower()
    assert "negat" in text and "partly" in text and "graph" in text and "only" in text
