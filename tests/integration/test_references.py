"""State carries references, not copies: Send payloads name the scenes and the CKG, verdicts name their evidence.

A refine run over the scripted story, checkpointed in memory: every per-sentence ``Send`` is read back from the
checkpoints, and the run record's evidence is read back through its ``passages`` against the very prompts the
judge was sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Send

from graphs.refine import build_graph
from storyjudge.core import storyref
from storyjudge.core.passages import span_text
from storyjudge.core.scripted_server import OpenAIServer, last_user_text
from tests.scripted_story import STORY, StoryResponder, schema_name


def _sends(saver: InMemorySaver) -> list[Send]:
    """Every Send the run checkpointed (a node's pending writes to the task channel), in any namespace."""
    found = []
    for checkpoint in saver.list(None):
        for _, _, value in checkpoint.pending_writes or []:
            if isinstance(value, Send):
                found.append(value)
    return found


def test_sends_carry_references_and_verdicts_name_their_evidence(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Any], tmp_path: Path
) -> None:
    server = scripted_server(StoryResponder())
    saver = InMemorySaver()
    out = build_graph(checkpointer=saver).invoke(
        {"document": STORY, "title": "t"},
        {"configurable": {"thread_id": "refs"}},
        context=ctx_for(server, ckg_samples=1),
    )
    assert len(out["iterations"]) == 2
    record = json.loads((tmp_path / "run" / "result.json").read_text())
    scenes = json.loads(next((tmp_path / "run" / "story").glob("scenes-*.json")).read_text())
    assert scenes and all(len(scene["text"]) > 60 for scene in scenes)

    sentences = [send for send in _sends(saver) if send.node == "check_sentence"]
    assert len(sentences) >= 6, "both rounds' sentences were sent"
    for send in sentences:
        payload = json.dumps(send.arg, default=str)
        assert set(send.arg) == {
            "summary",
            "sentence",
            "sentence_index",
            "iteration",
            "story",
            "index",
            "new",
        }
        assert not any(scene["text"][:60] in payload for scene in scenes), "no scene text in a payload"
        assert storyref.scenes_of(send.arg["story"]) == scenes, "the reference names the run's scenes"
        assert storyref.ckg_of(send.arg["story"])["nodes"], "and its CKG"

    passages = record["passages"]
    assert passages and passages == {s["id"]: s["text"] for s in scenes if s["id"] in passages}
    judged = {}  # fact text -> the judge's prompt for it
    for body in server.requests:
        if schema_name(body) == "Verdict":
            prompt = last_user_text(body)
            judged[prompt.split("<fact>\n")[-1].split("\n</fact>")[0]] = prompt
    cited = 0
    for iteration in record["iterations"]:
        for verdict in iteration["factscore"]["verdicts"]:
            assert verdict["evidence"]["scenes"], "each verdict keeps its evidence"
            for scene in verdict["evidence"]["scenes"]:
                assert "text" not in scene and 0 <= scene["start"] < scene["end"]
                shown = span_text(scene, passages)
                assert shown and shown in judged[verdict["fact"]["text"]], "the text the judge was shown"
                cited += 1
    assert cited > len(passages), "a text cited many times is kept once"
