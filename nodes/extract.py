"""CKG triple extraction (NarrativeFactScore stage 1): k samples per scene, one ``Send`` branch each.

Sample ``i`` is its own cache entry; branches go scene by scene so an in-process model reuses its prompt cache.
A scene longer than the extractor's window is read in parts, one branch each.
"""

from __future__ import annotations

import time
from itertools import accumulate
from pathlib import Path
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

import prompts
from prompts.schemas import SceneTriples
from state import ExtractTask, IndexState, SceneExtraction
from storyjudge.core import progress
from storyjudge.core.concurrency import AFTER_EVERY_OTHER, priority
from storyjudge.core.context import Context, context_of
from storyjudge.core.llm import ask_structured, schema_instruction
from storyjudge.core.models import LOCAL_MODELS, is_local, resolve_spec
from storyjudge.core.records import CharacterRecord, Scene, TripleRecord
from storyjudge.core.rundir import RunDir
from storyjudge.core.textsplit import split_by_tokens
from storyjudge.core.tokens import count_tokens

PROMPT = "extract_triples"
TOKENIZER_MARGIN = 0.8  # share of the window for scene text: the extractor's tokenizer may count more


def extractor_window(ctx: Context) -> int:
    """The extractor's context window in tokens (the embedded model's own when it is smaller)."""
    spec = resolve_spec(ctx, "extractor")
    local = LOCAL_MODELS.get(spec.partition(":")[2]) if is_local(spec) else None
    return min(ctx.context_window, local.context_window) if local else ctx.context_window


def scene_budget(ctx: Context) -> int:
    """Largest scene text (cl100k_base tokens) one extraction prompt may carry."""
    prompt = prompts.load(PROMPT, ctx.prompt_dir)
    overhead = count_tokens(prompt.render(scene=prompts.data_block("scene", "", id="S000.0", title="")))
    overhead += count_tokens(schema_instruction(SceneTriples))
    room = extractor_window(ctx) - ctx.max_output_tokens - overhead
    return max(64, int(room * TOKENIZER_MARGIN))


def extraction_tasks(scenes: list[Scene], ctx: Context, run_dir: str = "") -> list[ExtractTask]:
    """One task per (scene, sample, part), scene-major so the samples of a scene run back to back."""
    budget = scene_budget(ctx)
    tasks: list[ExtractTask] = []
    for scene in scenes:
        pieces = split_by_tokens(scene["text"], budget) if scene["text"].strip() else []
        starts = accumulate((len(piece) for piece in pieces), initial=scene["start"])
        parts = [
            Scene(**{**scene, "text": piece, "start": start, "end": start + len(piece)})
            for piece, start in zip(pieces, starts, strict=False)
        ]
        for sample in range(ctx.ckg_samples):
            for number, part in enumerate(parts, start=1):
                task = ExtractTask(scene=part, sample=sample, run_dir=run_dir)
                if len(parts) > 1:
                    task["part"] = number
                tasks.append(task)
    return tasks


def run_context(ctx: Context, run_dir: str) -> Context:
    """The context of the run in ``run_dir``: its calls are cached there when the caller named no cache."""
    if not ctx.cache_dir and not ctx.run_dir and run_dir:
        return ctx.replace(cache_dir=str(RunDir(Path(run_dir)).cache))
    return ctx


def index_beside_extraction(ctx: Context) -> bool:
    """Whether the passages are embedded while the scenes are extracted: only with a remote extractor.

    An in-process extractor needs the cores the embedder uses, so the index waits for the CKG then.
    """
    return not is_local(resolve_spec(ctx, "extractor"))


def route_extraction(
    state: IndexState, runtime: Runtime[Context]
) -> list[Send | Literal["build_ckg"]] | Literal["build_ckg"]:
    """Fan out one extraction branch per (scene, sample, part), with the index first beside them when it may.

    Branches start in the order they are sent, and on a novel the embedding takes longest.
    """
    ctx = context_of(runtime)
    scenes = state.get("scenes") or []
    tasks = extraction_tasks(scenes, ctx, state.get("run_dir", ""))
    beside: list[Send | Literal["build_ckg"]] = []
    if index_beside_extraction(ctx):
        beside.append(Send("store_index", IndexState(scenes=scenes, run_dir=state.get("run_dir", ""))))
    if not tasks:
        return [*beside, "build_ckg"] if beside else "build_ckg"
    progress.emit("extract", total=len(tasks))
    return [*beside, *(Send("extract_scene", task) for task in tasks)]


def extract_scene(task: ExtractTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Characters and triples of one scene (part) in one sample; a failed parse is recorded, not defaulted."""
    ctx = run_context(context_of(runtime), task.get("run_dir", ""))
    started = time.perf_counter()
    scene = task["scene"]
    prompt = prompts.load(PROMPT, ctx.prompt_dir)
    attributes: dict[str, object] = {"id": scene["id"]}
    if scene["title"]:
        attributes["title"] = scene["title"]
    text = prompt.render(scene=prompts.data_block("scene", scene["text"], **attributes))
    sample = task["sample"]
    # the CKG build waits for every sample, the summarizer's next call beside the index for one of its own
    with priority(AFTER_EVERY_OTHER):
        answer = ask_structured(
            ctx,
            "extractor",
            prompt,
            [("user", text)],
            SceneTriples,
            temperature=ctx.extraction_temperature,
            sample=sample,
        )
    characters, triples = (answer.value.characters, answer.value.triples) if answer.value else ([], [])
    record = SceneExtraction(
        scene_id=scene["id"],
        sample=sample,
        ok=answer.ok,
        characters=[CharacterRecord(name=c.name, aliases=list(c.aliases)) for c in characters],
        triples=[TripleRecord(subject=t.subject, predicate=t.predicate, object=t.object) for t in triples],
    )
    if task.get("part"):
        record["part"] = task["part"]
    if not answer.ok:
        record["error"] = answer.error or "no answer"
    progress.emit("extract", advance=1)
    return {
        "extractions": [record],
        "usage": answer.usage,
        "timings": {"extract": time.perf_counter() - started},
    }
