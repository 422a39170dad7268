"""BooookScore nodes: split summaries into sentences, annotate them concurrently, score.

``per-sentence`` is the paper's setting (one call per sentence); ``batched`` asks about several sentences per
call with a JSON answer: cheaper, not what the paper validated, and its scores say so. Planted confusing
sentences (``storyjudge.core.planted``) are annotated the same way into their own channel, never counted.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from functools import partial, reduce
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

from prompts import data_block, load
from prompts.schemas import BatchedConfusions
from state import CoherenceState, CoherenceTask
from storyjudge.core import heavy_imports, progress
from storyjudge.core.booookscore import coherence_report
from storyjudge.core.concurrency import in_parallel
from storyjudge.core.confusion import ConfusionAnswer, normalise_types, parse_confusion, says_no_confusion
from storyjudge.core.context import Context, context_of
from storyjudge.core.llm import CallFailed, Message, ask_structured, ask_text, cut_off
from storyjudge.core.models import resolve_spec
from storyjudge.core.planted import plant_sentences
from storyjudge.core.records import SentenceAnnotation
from storyjudge.core.textsplit import NO_WORDS, has_words
from storyjudge.core.textsplit import sentences as split_sentences
from storyjudge.core.usage import Usage, failure, merge_usage

ROLE = "coherence"
PER_SENTENCE = "per-sentence"
BATCHED = "batched"
BATCH_SENTENCES = 8  # sentences per call in batched mode
# sentences per task in the per-sentence setting (each still its own call): LangGraph's bookkeeping of a step
# grows with the square of its tasks, so a task per sentence cost seconds of CPU on 100 summaries
SENTENCE_GROUP = 4
ANSWER_TOKENS = 256  # a per-sentence answer is two short lines; a cap keeps a rambling model cheap
SINGLE_ID = "summary"  # id of the summary given as {"summary": ...}
GIVEN = "given"  # the split recorded for a summary whose sentences came with the input
FORMAT_REMINDER = (
    "That answer could not be read. Annotate the same sentence again and answer in exactly this form, "
    'nothing else:\nQuestions: <your clarifying questions, or "no confusion">\n'
    'Types: <the confusion types, separated by commas, or "no confusion">'
)


def given_sentences(summary_id: str, value: Any) -> list[str]:
    """A summary's own sentence list from the input (stripped, blanks dropped), validated."""
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise ValueError(
            f"Summary {summary_id!r}: 'sentences' must be a list of strings (the summary split)."
        )
    found = [s.strip() for s in value if s.strip()]
    if not found:
        raise ValueError(f"Summary {summary_id!r}: 'sentences' holds no sentence; drop it or give them.")
    if not any(has_words(s) for s in found):
        raise ValueError(
            f"Summary {summary_id!r}: 'sentences' " + NO_WORDS.format(sample=" ".join(found)[:40]) + "."
        )
    return found


def input_summaries(state: CoherenceState) -> list[dict[str, Any]]:
    """The summaries to score as ``[{"id", "summary"}]`` (plus ``sentences`` when given), validated."""
    single, many = state.get("summary"), state.get("summaries")
    if single is not None and many is not None:
        raise ValueError(
            "Give either 'summary' (one text) or 'summaries' (a list of {id, summary}), not both"
        )
    if many is None:
        if not isinstance(single, str) or not single.strip():
            raise ValueError("No summary to score: pass {'summary': text} or {'summaries': [{id, summary}]}")
        if not has_words(single):
            raise ValueError("The summary to score " + NO_WORDS.format(sample=single.strip()[:40]) + ".")
        return [{"id": SINGLE_ID, "summary": single}]
    if not isinstance(many, list) or not many:
        raise ValueError("'summaries' must be a non-empty list of {'id': ..., 'summary': ...} objects.")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, item in enumerate(many):
        if not isinstance(item, dict) or not isinstance(item.get("summary"), str):
            raise ValueError(f"summaries[{position}] must be an object with a 'summary' string.")
        summary_id = str(item.get("id", position))
        if summary_id in seen:
            raise ValueError(f"Summary id {summary_id!r} appears twice; give every summary its own id.")
        seen.add(summary_id)
        if not item["summary"].strip():
            raise ValueError(f"Summary {summary_id!r} is empty; remove it or give its text.")
        if not has_words(item["summary"]):
            sample = item["summary"].strip()[:40]
            raise ValueError(f"Summary {summary_id!r} " + NO_WORDS.format(sample=sample) + ", or remove it.")
        entry: dict[str, Any] = {"id": summary_id, "summary": item["summary"]}
        if item.get("sentences") is not None:
            entry["sentences"] = given_sentences(summary_id, item["sentences"])
        out.append(entry)
    return out


def split_summaries(state: CoherenceState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Normalise the input and split every summary into sentences, unless the input gives its ``sentences``.

    With ``repeated_sentences="once"`` a repeated sentence is asked about and counted once, as the official code.
    """
    ctx = context_of(runtime)
    summaries = input_summaries(state)
    split = {item["id"]: GIVEN if "sentences" in item else ctx.sentence_splitter for item in summaries}
    sentences = {
        item["id"]: item.get("sentences") or split_sentences(item["summary"], ctx.sentence_splitter)
        for item in summaries
    }
    if ctx.repeated_sentences == "once":
        sentences = {key: list(dict.fromkeys(found)) for key, found in sentences.items()}
    planted = {
        key: plant_sentences(found, count=ctx.planted_sentences, seed=ctx.seed, summary_id=key)
        for key, found in sentences.items()
    }
    total = sum(len(s) for s in sentences.values()) + sum(len(p) for p in planted.values())
    progress.emit("coherence", total=total)
    heavy_imports.load_before_branches()  # numpy, for the score, imported before the branches start
    return {
        "planted": planted,
        "summary": None,  # consumed: the next invocation on a checkpointed thread brings its own input
        "summaries": None,
        "to_score": [{"id": item["id"], "summary": item["summary"]} for item in summaries],
        "sentences": sentences,
        "split": split,
        "run": uuid.uuid4().hex,
        "mode": BATCHED if ctx.batched_coherence else PER_SENTENCE,
        "started": time.time(),
    }


def tasks_for(state: CoherenceState) -> list[CoherenceTask]:
    """One task per ``SENTENCE_GROUP`` consecutive sentences, or per ``BATCH_SENTENCES`` in batched mode."""
    size = BATCH_SENTENCES if state.get("mode") == BATCHED else SENTENCE_GROUP
    tasks: list[CoherenceTask] = []
    for item in state["to_score"]:
        sents = state["sentences"][item["id"]]
        task = partial(CoherenceTask, run=state["run"], summary_id=item["id"])
        for start in range(0, len(sents), size):
            targets = sents[start : start + size]
            indices = list(range(start, start + len(targets)))
            tasks.append(task(summary=item["summary"], sentence_indices=indices, targets=targets))
        tasks += [
            task(
                summary=control["summary"],
                sentence_indices=[control["position"]],
                targets=[control["sentence"]],
                planted=True,
            )
            for control in (state.get("planted") or {}).get(item["id"], [])
        ]
    return tasks


def route_annotations(state: CoherenceState) -> list[Send] | Literal["score_coherence"]:
    """Fan the sentences out to the annotator of the chosen mode."""
    tasks = tasks_for(state)
    if not tasks:
        return "score_coherence"
    node = "annotate_batch" if state.get("mode") == BATCHED else "annotate_sentences"
    return [Send(node, task) for task in tasks]


def annotate_sentences(task: CoherenceTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Annotate a group of one summary's sentences, each with its own call (the paper's setting), asked at once."""
    ctx = context_of(runtime)
    done = in_parallel(
        [
            partial(annotate_one, ctx, task, index, sentence)
            for index, sentence in zip(task["sentence_indices"], task["targets"], strict=True)
        ]
    )
    usage: Usage = reduce(merge_usage, (cost for _, cost in done), Usage())
    return {_channel(task): [annotation for annotation, _ in done], "usage": usage}


def _channel(task: CoherenceTask) -> str:
    """Where a task's annotations go: a planted sentence's never reach the score's counts."""
    return "planted_annotations" if task.get("planted") else "annotations"


def annotate_one(
    ctx: Context, task: CoherenceTask, index: int, sentence: str
) -> tuple[SentenceAnnotation, Usage]:
    """Ask whether one sentence causes confusion; an unreadable answer is re-asked, then kept as unparsed."""
    prompt, summary = load("coherence", ctx.prompt_dir), task["summary"]
    if prompt.positional:  # the official format gets the raw texts, as the official code gives them
        text = prompt.render(summary=summary, sentence=sentence)
    else:
        text = prompt.render(
            summary=data_block("summary", summary),
            sentence=data_block("sentence", sentence, number=index + 1),
        )
    messages: list[Message] = [("user", text)]
    max_tokens = min(ctx.max_output_tokens, ANSWER_TOKENS)
    usage: Usage = {}
    raw, attempts = "", 0
    parsed = ConfusionAnswer(None, error="not asked")
    try:
        while attempts == 0 or (not parsed.parsed and attempts <= ctx.parse_retries):
            asked = messages
            if attempts:
                asked = [*messages, ("assistant", raw[:2000] or "(empty)"), ("user", FORMAT_REMINDER)]
            # a new sample number, so a deterministic cache or server does not hand back the same answer
            answer = ask_text(ctx, ROLE, prompt, asked, max_tokens=max_tokens, sample=attempts)
            attempts += 1
            usage, raw = merge_usage(usage, answer.usage), answer.text
            # a cut-off answer, or one copying the prompt or reminder, is unreadable
            if cut_off(finish := answer.finish_reason):
                parsed = ConfusionAnswer(None, error=f"answer cut off (finish_reason {finish!r})")
            else:
                parsed = parse_confusion(raw, prompt=(prompt.text, FORMAT_REMINDER), data=(summary, sentence))
    except CallFailed as exc:  # the server kept failing: this sentence is not scored, the run goes on
        parsed = ConfusionAnswer(None, error=f"no answer from the server: {exc}")
    if parsed.error:
        usage = merge_usage(usage, failure(resolve_spec(ctx, ROLE)))
    progress.emit("coherence", advance=1)
    return _annotation(task, index, sentence, parsed, raw, attempts), usage


def _annotation(
    task: CoherenceTask, index: int, sentence: str, parsed: ConfusionAnswer, raw: str, attempts: int
) -> SentenceAnnotation:
    """One sentence's annotation from its read answer (``other_types`` and ``error`` only when there are some)."""
    annotation = SentenceAnnotation(
        run=task["run"],
        summary_id=task["summary_id"],
        index=index,
        sentence=sentence,
        confused=parsed.confused,
        types=parsed.types,
        questions=parsed.questions,
        raw=raw,
        attempts=attempts,
    )
    if parsed.other_types:
        annotation["other_types"] = parsed.other_types
    if parsed.error:
        annotation["error"] = parsed.error
    return annotation


def annotate_batch(task: CoherenceTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Annotate several sentences in one structured call (not the paper's setting).

    Unlisted sentences cause no confusion, as the prompt says; a failed parse leaves the whole batch unparsed.
    """
    ctx = context_of(runtime)
    prompt = load("coherence_batched", ctx.prompt_dir)
    indices, targets = task["sentence_indices"], task["targets"]
    numbered = "\n".join(f"{i + 1}. {sentence}" for i, sentence in zip(indices, targets, strict=True))
    summary = data_block("summary", task["summary"])
    text = prompt.render(summary=summary, sentences=data_block("sentences", numbered))
    answer = ask_structured(ctx, ROLE, prompt, [("user", text)], BatchedConfusions)
    listed: defaultdict[int, dict[str, list[str]]] = defaultdict(lambda: {"questions": [], "labels": []})
    for entry in answer.value.sentences if answer.value is not None else []:
        questions = [q.strip() for q in entry.questions if q.strip() and not says_no_confusion(q)]
        listed[entry.index - 1]["questions"].extend(questions)
        listed[entry.index - 1]["labels"].extend(entry.types)
    annotations: list[SentenceAnnotation] = []
    for index, sentence in zip(indices, targets, strict=True):
        if answer.value is None:
            parsed, raw = ConfusionAnswer(None, error=answer.error or "unparseable answer"), answer.text
        else:
            found = listed.get(index, {"questions": [], "labels": []})  # adds no entry
            raw = json.dumps({"index": index + 1, **found}) if index in listed else ""
            types, other = normalise_types(found["labels"])
            parsed = ConfusionAnswer(
                bool(found["questions"] or types or other), found["questions"], types, other
            )
        annotations.append(_annotation(task, index, sentence, parsed, raw, answer.attempts))
    progress.emit("coherence", advance=len(targets))
    return {_channel(task): annotations, "usage": answer.usage}


def score_coherence(state: CoherenceState, runtime: Runtime[Context]) -> dict[str, Any]:
    """BooookScore per summary and for the set, from this invocation's annotations only."""
    ctx = context_of(runtime)
    run = state.get("run")
    mine = [a for a in state.get("annotations", []) if a.get("run") == run]
    mode = state.get("mode", PER_SENTENCE)
    result = coherence_report(
        state["sentences"],
        mine,
        mode=mode,
        order=[s["id"] for s in state["to_score"]],
        seed=ctx.seed,
        coverage_floor=ctx.coverage_floor,
        planted=state.get("planted") or {},
        planted_annotations=[a for a in state.get("planted_annotations", []) if a.get("run") == run],
        max_false_acceptance=ctx.max_false_acceptance,
    )
    split = state.get("split", {})
    for card in result["summaries"]:
        card["split"] = split.get(card["id"], ctx.sentence_splitter)
    result["sentence_splitter"] = ctx.sentence_splitter
    result["repeated_sentences"] = ctx.repeated_sentences
    result["sentences_given"] = sum(1 for card in result["summaries"] if card["split"] == GIVEN)
    prompt = load("coherence_batched" if mode == BATCHED else "coherence", ctx.prompt_dir)
    result["prompt"] = prompt.record
    result["prompt_version"] = prompt.version_id
    result["model"] = resolve_spec(ctx, ROLE)
    if mode == BATCHED:
        result["note"] = (
            f"batched: {BATCH_SENTENCES} sentences per call; not the paper's per-sentence setting"
        )
    return {"coherence": result, "timings": {"coherence": round(time.time() - state["started"], 4)}}
