"""The summarize graph with a scripted model: budgets, merging order, regeneration, compression, artifacts."""

from __future__ import annotations

import itertools
import operator
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from graphs.summarize import build_graph
from nodes.artifacts import edit_damage
from nodes.hierarchical import (
    MergeRoom,
    close_group,
    grow_group,
    level_budgets,
    merge_overhead,
    prior_context,
)
from nodes.incremental import keep_newest
from nodes.summary_writer import (
    LEVEL_RATIO,
    MAX_REGENERATIONS,
    PROMPT_NAMES,
    clean_output,
    ends_sentence,
    prompt_cost,
    tree_outline,
    trim_to_last_sentence,
)
from prompts import load
from storyjudge.core.context import ENV_PREFIX, ConfigError, Context
from storyjudge.core.records import Scene, add_timings
from storyjudge.core.scripted_server import OpenAIServer, last_user_text
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import Usage, merge_usage

OUTPUT_KEYS = {"summary", "tree", "events", "usage", "timings"}


class Parent(TypedDict, total=False):
    """A parent graph's state that shares the summarize graph's output keys (like the refine graph's)."""

    document: str
    summary: str
    tree: list[dict[str, Any]]
    events: Annotated[list[dict[str, Any]], operator.add]
    usage: Annotated[Usage, merge_usage]
    timings: Annotated[dict[str, float], add_timings]
    summary_plan: dict[str, Any]
    chunks: list[Any]


@dataclass
class Call:
    prompt: str
    text: str
    max_tokens: int
    temperature: float
    sample: int


Reply = Callable[[Call], "str | tuple[str, str]"]


SUMMARIZER = "openai:summarizer"
"""The summarizer's model spec in these tests: the scripted server sees the model name of every request."""


def take_group(
    texts: list[str],
    start: int,
    prior: str,
    budget: int,
    context_window: int,
    words: int,
    where: dict[str, Any],
    prompt_dir: str = "",
) -> tuple[int, str, list[str], list[dict[str, Any]]]:
    """The next merge group from ``start`` when every summary of the level is known: the sequential method."""
    room = MergeRoom(budget, context_window, words, prompt_dir)
    context, notes = prior_context(prior, room, where)
    end = grow_group(texts, start, start + 1, context, room)
    end, context, group, more = close_group(texts, start, end, context, room, where)
    return end, context, group, notes + more


def prompt_of(text: str) -> str:
    """The summarizer prompt a user message was rendered from: the one whose fixed opening it starts with."""
    openings = {name: load(name).text.split("{{")[0].strip() for name in PROMPT_NAMES}
    matching = [name for name, opening in openings.items() if opening and text.startswith(opening)]
    assert matching, f"no summarizer prompt opens {text[:80]!r}"
    return max(matching, key=lambda name: len(openings[name]))


class FakeModel:
    """A script for the scripted HTTP server: records every summarizer request as a Call and answers it."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.calls: list[Call] = []
        self.other_models: list[str] = []
        self.lock = threading.Lock()
        self.server: OpenAIServer | None = None

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("model") != SUMMARIZER.split(":", 1)[1]:
            with self.lock:
                self.other_models.append(str(body.get("model")))
        text = last_user_text(body)
        call = Call(
            prompt_of(text),
            text,
            int(body.get("max_tokens") or body.get("max_completion_tokens") or 0),
            float(body.get("temperature", 0.0)),
            int(body.get("seed", 0)),  # seed 0 + sample i; the client sends no seed for sample 0
        )
        with self.lock:
            self.calls.append(call)
        out = self.reply(call)
        text, finish = (out, "stop") if isinstance(out, str) else out
        return {"content": text, "finish_reason": finish}

    @property
    def max_in_flight(self) -> int:
        return self.server.max_in_flight if self.server else 0

    def named(self, name: str) -> list[Call]:
        return [c for c in self.calls if c.prompt == name]


@pytest.fixture
def fake(
    scripted_server: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Callable[..., FakeModel]]:
    """``fake(reply, delay=0)``: a scripted HTTP server answering as ``reply`` says.

    Every Context the test builds, the module graph's default one included, sends the summarizer to it
    through ``STORYJUDGE_*`` settings (the other roles to a model name the test fails on).
    """
    models: list[FakeModel] = []

    def install(reply: Reply, delay: float = 0.0) -> FakeModel:
        model = FakeModel(reply)
        model.server = scripted_server(model, latency=delay)
        settings = {
            "MODEL": "openai:not-the-summarizer",
            "SUMMARIZER_MODEL": SUMMARIZER,
            "BASE_URL": model.server.base_url,
            "CACHE_DIR": str(tmp_path / "cache"),
            "RETRY_BUDGET_S": "0",
        }
        for name, value in settings.items():
            monkeypatch.setenv(ENV_PREFIX + name, value)
        models.append(model)
        return model

    yield install
    for model in models:
        assert model.other_models == [], "only the summarizer is asked"


# ------------------------------------------------------------------------------------------------------------
# helpers


def asked_words(text: str) -> int:
    return int(re.findall(r"(?:within|contain|less than) (\d+) words", text)[-1])


def blocks(text: str, tag: str) -> list[str]:
    return re.findall(rf"<{tag}[^>]*>\n(.*?)\n</{tag}>", text, re.S)


def padded(label: str, words: int) -> str:
    """``words`` words starting with ``label``, ending a sentence."""
    return " ".join([label, *["word"] * max(0, words - len(label.split()) - 1), "end."])


def with_tokens(n: int, head: str = "Story") -> str:
    """A sentence of exactly ``n`` cl100k tokens."""
    text = head + " word" * max(0, n - 2) + "."
    while count_tokens(text) > n:
        text = text[: text.rfind(" word")] + "."
    while count_tokens(text) < n:
        text = text[:-1] + " word."
    assert count_tokens(text) == n
    return text


def document(chunks: int) -> str:
    """``chunks`` paragraphs of one ~200-token sentence: with chunk_size 256 each paragraph is one chunk."""
    return "".join(
        f"Chunk {i} begins and " + "events unfold in the valley, " * 33 + "and it ends.\n\n"
        for i in range(chunks)
    )


def chunk_number(call: Call) -> int:
    return int(re.search(r"Chunk (\d+) begins", blocks(call.text, "excerpt")[0]).group(1))  # type: ignore[union-attr]


SMALL: dict[str, Any] = {"context_window": 2048, "chunk_size": 256, "max_summary_tokens": 300}


def run(graph_input: dict[str, Any], **context: Any) -> dict[str, Any]:
    return build_graph().invoke(graph_input, context=Context(**context))


def echo_edit(call: Call) -> str:
    return blocks(call.text, "summary")[0]


# ------------------------------------------------------------------------------------------------------------
# hierarchical merging


SERIAL = itertools.count(1)
"""Numbers the scripted summaries, so no two merge requests are equal (the call cache would answer a repeat)."""


def padded_reply(call: Call) -> str:
    if call.prompt == "remove_artifacts":
        return echo_edit(call)
    return padded(f"Summary {next(SERIAL)}", asked_words(call.text))


@pytest.mark.parametrize("chunks", [1, 2, 200])
def test_merging_terminates_and_never_overfills_the_window(
    fake: Callable[..., FakeModel], chunks: int
) -> None:
    model = fake(padded_reply)
    out = run({"document": document(chunks)}, strategy="hierarchical", **SMALL)
    assert set(out) == OUTPUT_KEYS
    counts = [len(level["summaries"]) for level in out["tree"]]
    assert counts[0] == chunks and counts[-1] == 1
    assert all(later < earlier for earlier, later in itertools.pairwise(counts))
    assert out["summary"] == out["tree"][-1]["summaries"][0]["text"]
    assert out["tree"][-1]["budget"] == SMALL["max_summary_tokens"]  # the final summary always gets G_n
    for call in model.calls:  # prompt + output within W, with the tokenizer margin
        assert count_tokens(call.text) + call.max_tokens <= SMALL["context_window"]
        assert prompt_cost(call.text) + call.max_tokens <= SMALL["context_window"]
    merges = model.named("merge") + model.named("merge_context")
    assert len(model.named("summarize_chunk")) == chunks
    assert len(merges) == sum(counts[1:])
    if chunks == 1:
        assert merges == [] and out["tree"][0]["budget"] == SMALL["max_summary_tokens"]
    if chunks == 2:
        assert len(blocks(merges[0].text, "summary")) == 2
    if chunks == 200:
        assert len(counts) >= 3  # several merge levels were needed
        budgets = [level["budget"] for level in out["tree"]]
        assert budgets == sorted(budgets) and budgets[0] < budgets[-1]
    usage = out["usage"][SUMMARIZER]
    assert usage["calls"] == len(model.calls)


def test_a_merge_group_takes_as_many_summaries_as_fit(fake: Callable[..., FakeModel]) -> None:
    model = fake(padded_reply)
    run({"document": document(60)}, strategy="hierarchical", **SMALL)
    window = SMALL["context_window"]
    merges = model.named("merge") + model.named("merge_context")
    by_level: dict[int, list[Call]] = {}
    for call in merges:
        by_level.setdefault(call.max_tokens, []).append(call)
    for calls in by_level.values():
        for call in calls[:-1]:  # all but a level's last group: one more summary would not have fit
            summaries = blocks(call.text, "summary")
            assert len(summaries) >= 2
            one_more = call.text.replace(
                "</summary>\n\nThe summary must",
                f"</summary>\n\n<summary>\n{summaries[-1]}\n</summary>\n\nThe summary must",
            )
            assert prompt_cost(one_more) + call.max_tokens > window


def test_prior_context_comes_only_from_the_same_level(fake: Callable[..., FakeModel]) -> None:
    counter = itertools.count()
    lock = threading.Lock()
    merges: list[tuple[str, list[str], str | None]] = []

    def reply(call: Call) -> str:
        if call.prompt == "summarize_chunk":
            return padded(f"Node L{chunk_number(call)}.", asked_words(call.text))
        if call.prompt == "remove_artifacts":
            return echo_edit(call)
        with lock:
            name = f"M{next(counter)}"
            inputs = [block.split(".")[0].split()[-1] for block in blocks(call.text, "summary")]
            context = blocks(call.text, "context")
            merges.append((name, inputs, context[0].split(".")[0].split()[-1] if context else None))
        return padded(f"Node {name}.", asked_words(call.text))

    fake(reply)
    out = run({"document": document(120)}, strategy="hierarchical", **SMALL)
    level: dict[str, int] = {f"L{i}": 0 for i in range(120)}
    last_at_level: dict[int, str] = {}
    for name, inputs, context in merges:
        input_levels = {level[i] for i in inputs}
        assert len(input_levels) == 1  # a merge reads summaries of one level only
        level[name] = input_levels.pop() + 1
        if level[name] in last_at_level:
            assert context == last_at_level[level[name]]  # the previous merge of the same level, nothing else
        else:
            assert context is None  # the first merge of a level has no prior context
        last_at_level[level[name]] = name
    assert max(level.values()) == len(out["tree"]) - 1 >= 2
    for entry in out["tree"][1:]:
        assert [s["prior"] for s in entry["summaries"]] == [None, *range(len(entry["summaries"]) - 1)]


def test_level_zero_summaries_run_concurrently_and_report_progress(fake: Callable[..., FakeModel]) -> None:
    model = fake(padded_reply, delay=0.05)
    events: list[dict[str, Any]] = []
    for mode, chunk in build_graph().stream(
        {"document": document(8)}, context=Context(concurrency=4, **SMALL), stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            events.append(chunk["progress"])
    assert model.max_in_flight > 1
    assert all(e["stage"] == "summarize" for e in events)
    assert "total" in events[0]
    assert sum(e["advance"] for e in events) == len(model.calls)  # one advance per summary and the edit


def test_a_merge_is_sent_while_later_chunks_are_still_being_summarized(
    fake: Callable[..., FakeModel],
) -> None:
    merge_asked = threading.Event()
    seen: dict[str, bool] = {}
    last = 39

    def reply(call: Call) -> str:
        if call.prompt in ("merge", "merge_context"):
            merge_asked.set()
        elif call.prompt == "summarize_chunk" and chunk_number(call) == last:
            seen["merge_before_last_chunk"] = merge_asked.wait(
                timeout=10
            )  # the old barrier: 10 s, then False
        return padded_reply(call)

    model = fake(reply)
    out = run({"document": document(last + 1)}, strategy="hierarchical", concurrency=8, **SMALL)
    assert seen == {"merge_before_last_chunk": True}  # the tree did not wait for its slowest chunk
    assert len(out["tree"]) >= 3 and len(model.named("summarize_chunk")) == last + 1


def test_the_dataflow_makes_the_level_by_level_merges_whatever_order_answers_come_in(
    fake: Callable[..., FakeModel],
) -> None:
    rng = random.Random(7)
    lock = threading.Lock()

    def reply(call: Call) -> str:
        with lock:
            pause = rng.random() * 0.02
        time.sleep(pause)  # answers arrive in an order the tree does not choose
        if call.prompt == "summarize_chunk":
            return padded(
                f"Chunk {chunk_number(call)} summary.", asked_words(call.text) - rng.randrange(0, 9)
            )
        if call.prompt == "remove_artifacts":
            return echo_edit(call)
        sources = " ".join(block.split(" summary.")[0] for block in blocks(call.text, "summary"))
        return padded(f"Merged {len(sources)} summary.", asked_words(call.text) - rng.randrange(0, 9))

    fake(reply)
    out = run({"document": document(90)}, strategy="hierarchical", concurrency=16, **SMALL)
    tree = out["tree"]
    assert len(tree) >= 3
    window = SMALL["context_window"]
    for below, level in itertools.pairwise(tree):  # each level's groups are those of the sequential method
        texts = [item["text"] for item in below["summaries"]]
        start, prior = 0, ""
        for merged in level["summaries"]:
            end, _, _, _ = take_group(
                texts, start, prior, level["budget"], window, level["word_limit"], {"level": 0, "index": 0}
            )
            assert merged["sources"] == [item["index"] for item in below["summaries"][start:end]]
            start, prior = end, merged["text"]
        assert start == len(texts)
    assert out["summary"] == tree[-1]["summaries"][0]["text"]


def test_level_budgets_shrink_below_the_top() -> None:
    overhead = merge_overhead()
    assert level_budgets(1, 900, 8192, overhead) == [900]
    budgets = level_budgets(51, 900, 8192, overhead)
    top = len(budgets) - 1
    assert top >= 1
    assert budgets == [max(64, round(900 * LEVEL_RATIO ** (top - level))) for level in range(top + 1)]
    assert len(level_budgets(5000, 900, 8192, overhead)) > len(budgets)


# ------------------------------------------------------------------------------------------------------------
# regeneration


def test_over_length_and_cut_off_summaries_are_regenerated(fake: Callable[..., FakeModel]) -> None:
    answers = iter(
        [
            with_tokens(150),  # over the 100-token budget
            "A sentence that stops in the middle of",  # no final punctuation
            ("A complete sentence the server cut off.", "length"),  # finish reason "length"
            "Victor builds the creature and flees.",
        ]
    )
    model = fake(lambda call: next(answers))
    out = run({"document": "Victor builds a creature. " * 20}, max_summary_tokens=100, artifact_removal=False)
    assert out["summary"] == "Victor builds the creature and flees."
    regenerations = [e for e in out["events"] if e["kind"] == "regenerate"]
    assert [e["reason"] for e in regenerations] == ["over_length", "cut_off", "cut_off"]
    assert [c.sample for c in model.calls] == [0, 1, 2, 3]
    assert [c.temperature for c in model.calls] == [0.0, 1.0, 1.0, 1.0]
    words = [asked_words(c.text) for c in model.calls]
    assert words == sorted(words, reverse=True) and words[0] > words[-1]
    leaf = out["tree"][0]["summaries"][0]
    assert leaf["attempts"] == 4 and leaf["calls"] == 4 and leaf["valid"] is True


def test_a_summary_answered_from_the_cache_records_its_attempts_but_no_call(
    fake: Callable[..., FakeModel],
) -> None:
    answers = iter([with_tokens(150), "Victor builds the creature and flees."])
    model = fake(lambda call: next(answers))
    graph_input = {"document": "Victor builds a creature. " * 20}
    first = run(graph_input, max_summary_tokens=100, artifact_removal=False)["tree"][0]["summaries"][0]
    again = run(graph_input, max_summary_tokens=100, artifact_removal=False)["tree"][0]["summaries"][0]
    assert (first["attempts"], first["calls"]) == (2, 2)
    assert (again["attempts"], again["calls"]) == (2, 0) and len(model.calls) == 2


def test_the_best_attempt_is_kept_when_every_attempt_fails(fake: Callable[..., FakeModel]) -> None:
    sizes = iter([300, 130, 250, 400])
    model = fake(lambda call: with_tokens(next(sizes)))
    out = run({"document": "Victor builds a creature. " * 20}, max_summary_tokens=100, artifact_removal=False)
    assert len(model.calls) == MAX_REGENERATIONS + 1
    assert count_tokens(out["summary"]) == 130
    kept = [e for e in out["events"] if e["kind"] == "kept_best"]
    assert len(kept) == 1 and kept[0]["reasons"] == ["over_length"] * 4
    assert out["tree"][0]["summaries"][0]["valid"] is False


def test_a_cut_off_best_attempt_loses_its_dangling_sentence(fake: Callable[..., FakeModel]) -> None:
    fake(lambda call: ("Victor flees. Elizabeth waits at home. The creature", "length"))
    out = run({"document": "Victor builds a creature. " * 20}, max_summary_tokens=100, artifact_removal=False)
    assert out["summary"] == "Victor flees. Elizabeth waits at home."
    assert [e for e in out["events"] if e["kind"] == "kept_best"][0]["trimmed"] is True


def test_output_checks() -> None:
    assert ends_sentence('He said "no."') and ends_sentence("Done!") and not ends_sentence("and then")
    assert clean_output("Here is the summary of the excerpt:\nVictor flees.") == "Victor flees."
    assert clean_output("Victor flees: fast.") == "Victor flees: fast."
    assert trim_to_last_sentence("One. Two. Thr") == "One. Two."
    assert trim_to_last_sentence("No end at all") == "No end at all"


# ------------------------------------------------------------------------------------------------------------
# incremental updating


def test_compression_happens_exactly_when_over_the_budget(fake: Callable[..., FakeModel]) -> None:
    sizes = iter([60, 150, 100, 101, 40])  # step 0 .. 4; G_n = 100

    def reply(call: Call) -> str:
        if call.prompt == "compress":
            return "The story so far, condensed."
        return with_tokens(next(sizes))

    model = fake(reply)
    doc = "".join(
        f"Chunk {i} begins and " + "snow falls on the ice, " * 12 + "and stops.\n\n" for i in range(5)
    )
    out = run(
        {"document": doc, "strategy": "incremental", "chunk_size": 80, "max_summary_tokens": 100},
        artifact_removal=False,
    )
    assert len(out["tree"]) == 5
    assert [step["compressed"] for step in out["tree"]] == [False, True, False, True, False]
    assert [e["step"] for e in out["events"] if e["kind"] == "compress"] == [1, 3]
    assert len(model.named("compress")) == 2
    updates = model.named("incremental_update")
    assert (
        blocks(updates[1].text, "summary")[0] == "The story so far, condensed."
    )  # step 2 reads the compressed one
    assert blocks(updates[0].text, "summary")[0] == out["tree"][0]["summary"]["text"]
    assert len(model.named("incremental_init")) == 1
    words = [step["word_limit"] for step in out["tree"]]
    assert words == sorted(words)  # the summary may grow as more of the story is read
    assert out["tree"][-1]["word_limit"] == round(100 * 0.65)
    assert tree_outline(out["tree"], out["events"])["compressions"] == 2


def test_compression_retries_are_bounded_and_the_result_fits(fake: Callable[..., FakeModel]) -> None:
    def reply(call: Call) -> str:
        return with_tokens(180, "Compressed" if call.prompt == "compress" else "Update")

    model = fake(reply)
    out = run(
        {"document": "Snow falls. " * 40, "strategy": "incremental"},
        max_summary_tokens=100,
        artifact_removal=False,
    )
    assert len(model.named("compress")) == MAX_REGENERATIONS + 1
    kinds = [e["kind"] for e in out["events"]]
    assert "kept_best" in kinds and "clipped_for_budget" in kinds
    assert count_tokens(out["summary"]) <= 100


def test_a_clip_after_failed_compression_keeps_the_newest_text(fake: Callable[..., FakeModel]) -> None:
    # every update and every compression is ~300 tokens: the oldest sentences must go, never the newest
    story = " ".join(f"In year {n} the valley floods again and the village moves uphill." for n in range(20))

    def reply(call: Call) -> str:
        return story + " Finally Mara reaches the lighthouse."

    fake(reply)
    out = run(
        {"document": "Snow falls. " * 40, "strategy": "incremental"},
        max_summary_tokens=100,
        artifact_removal=False,
    )
    clips = [e for e in out["events"] if e["kind"] == "clipped_for_budget"]
    assert clips and all(e["kept"] == "newest" and e["tokens_dropped"] > 0 for e in clips)
    assert out["summary"].endswith("Finally Mara reaches the lighthouse.")
    assert "year 0 " not in out["summary"]
    assert out["summary"].startswith("In year")  # cut at a sentence start
    assert count_tokens(out["summary"]) <= 100


def test_keep_newest_cuts_at_sentences_and_within_the_limit() -> None:
    text = "First old sentence here. Second sentence follows. The newest sentence ends it."
    assert keep_newest(text, 100) == text
    assert keep_newest(text, count_tokens("The newest sentence ends it.")) == "The newest sentence ends it."
    one_long = "word " * 50 + "end."
    tail = keep_newest(one_long, 10)
    assert tail.endswith("end.") and count_tokens(tail) <= 10


# ------------------------------------------------------------------------------------------------------------
# artifact removal


DRAFT = (
    "In this segment, Victor Frankenstein builds a creature in his Ingolstadt laboratory. "
    "Horrified by its appearance, he abandons it and falls ill. "
    "The creature later murders William, and the servant Justine is hanged for the crime."
)
LONG_DRAFT = DRAFT + (
    " Victor wanders the Alps, where the creature tells its story of exile among the De Lacey family."
    " It demands a companion, and Victor starts building one in the Orkney Islands before destroying it."
    " In revenge the creature strangles Henry Clerval on the Irish shore."
    " Victor marries Elizabeth, who is killed on their wedding night at Evian."
    " Alphonse Frankenstein dies of grief soon afterwards."
    " Victor pursues the creature across the frozen north until Robert Walton rescues him."
)


def test_artifact_removal_keeps_a_clean_edit(fake: Callable[..., FakeModel]) -> None:
    edited = DRAFT.replace("In this segment, Victor", "Victor")
    fake(lambda call: edited if call.prompt == "remove_artifacts" else DRAFT)
    out = run({"document": "Victor builds a creature. " * 20})
    assert out["summary"] == edited
    assert [e["kind"] for e in out["events"]] == ["artifact_removal"]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (LONG_DRAFT.split(". ")[0] + ".", "lost"),  # most sentences gone
        (
            LONG_DRAFT.replace(" Alphonse Frankenstein dies of grief soon afterwards.", ""),
            "dropped sentence 8",
        ),
        ((LONG_DRAFT, "length"), "cut off"),
        ("", "empty"),
        (LONG_DRAFT + " A dragon guards the golden castle of the northern kingdom forever after.", "added"),
    ],
)
def test_artifact_removal_falls_back_to_the_original(
    fake: Callable[..., FakeModel], edit: Any, reason: str
) -> None:
    fake(lambda call: edit if call.prompt == "remove_artifacts" else LONG_DRAFT)
    out = run({"document": "Victor builds a creature. " * 20})
    assert out["summary"] == LONG_DRAFT
    fallbacks = [e for e in out["events"] if e["kind"] == "artifact_removal_fallback"]
    assert len(fallbacks) == 1 and reason in fallbacks[0]["reason"]


def test_artifact_removal_can_be_switched_off(fake: Callable[..., FakeModel]) -> None:
    model = fake(lambda call: DRAFT)
    out = run({"document": "Victor builds a creature. " * 20}, artifact_removal=False)
    assert out["summary"] == DRAFT and model.named("remove_artifacts") == []


def test_edit_damage_measures_content_words() -> None:
    assert edit_damage(DRAFT, DRAFT.replace("In this segment, ", "")) is None
    assert edit_damage("Victor runs home.", "victor RUNS home!") is None


# ------------------------------------------------------------------------------------------------------------
# inputs and interface


def test_module_graph_runs_without_a_context(fake: Callable[..., FakeModel]) -> None:
    from graphs.summarize import graph

    fake(padded_reply)
    out = graph.invoke({"document": document(3)})
    assert set(out) == OUTPUT_KEYS and out["summary"]
    assert {"summarize", "summarize.chunk", "summarize.level0", "summarize.artifacts"} <= set(out["timings"])


def test_scenes_are_summarized_whole(fake: Callable[..., FakeModel]) -> None:
    model = fake(padded_reply)
    texts = [f"Scene {i}. " + "The witches meet on the heath. " * 30 for i in range(6)]
    scenes, offset = [], 0
    for i, text in enumerate(texts):
        scenes.append(
            Scene(id=f"S{i + 1:03d}", index=i, title="", text=text, start=offset, end=offset + len(text))
        )
        offset += len(text)
    out = run({"scenes": scenes, "document": "ignored when scenes are given"}, **SMALL)
    chunks = out["tree"][0]["chunks"]
    assert [c["scene_ids"] for c in chunks] == [["S001"], ["S002"], ["S003"], ["S004"], ["S005"], ["S006"]]
    excerpts = [blocks(c.text, "excerpt")[0] for c in model.named("summarize_chunk")]
    assert sorted(excerpts) == sorted(texts)


@pytest.mark.parametrize(
    ("graph_input", "context", "error", "message"),
    [
        ({"document": "   "}, {}, ValueError, "Nothing to summarize"),
        ({"scenes": []}, {}, ValueError, "Nothing to summarize"),
        ({"document": "x", "strategy": "bogus"}, {}, ConfigError, "strategy"),
        ({"document": "x", "chunk_size": 10}, {}, ConfigError, "chunk_size"),
        (
            {"document": "Snow. " * 3000},
            {"context_window": 1024, "chunk_size": 2048},
            ConfigError,
            "context window",
        ),
        (
            {"document": "Snow falls. " * 400, "chunk_size": 256},
            {"context_window": 1024, "max_summary_tokens": 400},
            ConfigError,
            "merging two 400-token summaries",
        ),
        (
            {"document": "Snow. " * 30, "strategy": "incremental"},
            {"context_window": 1024, "max_summary_tokens": 900},
            ConfigError,
            "context window",
        ),
    ],
)
def test_bad_inputs_fail_with_a_message(
    fake: Callable[..., FakeModel],
    graph_input: dict[str, Any],
    context: dict[str, Any],
    error: type,
    message: str,
) -> None:
    model = fake(padded_reply)
    with pytest.raises(error, match=message):
        run(graph_input, **context)
    assert model.calls == []


def test_scripted_server_finish_reason_length_triggers_regeneration(
    scripted_server: Any, ctx_for: Any
) -> None:
    replies = iter([{"content": "Victor flees.", "finish_reason": "length"}, "Victor flees into the night."])
    server = scripted_server(lambda body: next(replies))
    out = build_graph().invoke(
        {"document": "Victor builds a creature. " * 20},
        context=ctx_for(server, max_summary_tokens=100, artifact_removal=False),
    )
    assert out["summary"] == "Victor flees into the night."
    assert [e["reason"] for e in out["events"] if e["kind"] == "regenerate"] == ["cut_off"]
    assert len(server.completions) == 2


def test_a_second_run_on_the_same_thread_starts_clean(fake: Callable[..., FakeModel]) -> None:
    fake(padded_reply)
    graph = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    first = graph.invoke({"document": document(5)}, config=config, context=Context(**SMALL))
    second = graph.invoke({"document": document(3)}, config=config, context=Context(**SMALL))
    assert len(first["tree"][0]["summaries"]) == 5
    assert len(second["tree"][0]["summaries"]) == 3
    assert [s["index"] for s in second["tree"][0]["summaries"]] == [0, 1, 2]


def test_as_a_subgraph_only_the_output_keys_reach_the_parent(fake: Callable[..., FakeModel]) -> None:
    fake(padded_reply)
    builder = StateGraph(Parent, context_schema=Context)
    builder.add_node("summarize", build_graph())
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", END)
    parent: Parent = {"document": document(4), "events": [{"stage": "earlier"}]}
    out = builder.compile().invoke(parent, context=Context(**SMALL))
    assert out["summary"] and out["tree"]
    assert out["events"][0] == {"stage": "earlier"}
    assert "summary_plan" not in out and "chunks" not in out
    assert out["usage"][SUMMARIZER]["calls"] == 4 + 1 + 1  # leaves, one merge, the edit
