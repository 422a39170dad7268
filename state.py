"""Graph states and Send payloads of the five graphs.

``typing_extensions``' TypedDict lets LangGraph Studio build JSON schemas on Python 3.11. Input schemas are
Studio's forms: fields a person fills carry a description; fields only a program or parent graph sets are
``SkipJsonSchema``.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, NotRequired, Required

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from storyjudge.core.records import (
    CharacterRecord,
    CKGStats,
    CoherenceReport,
    Event,
    Fact,
    FactVerdict,
    FailedSentence,
    IndexRef,
    Iteration,
    NodeLinkGraph,
    Scene,
    ScoreCard,
    SentenceAnnotation,
    StoryRef,
    SummaryChunk,
    SummaryItem,
    TreeLevel,
    TreeStep,
    TripleRecord,
    add_timings,
    merge_rounds,
)
from storyjudge.core.usage import Usage, merge_usage

Document = Annotated[
    str, Field(description="The narrative's text (plain text or Markdown). Give this or scenes.")
]
Scenes = Annotated[
    list[Scene],
    Field(description="The narrative already cut into scenes, each with its text; instead of document."),
]
Title = Annotated[str, Field(description="A name for the narrative, used in run directories and reports.")]


class IndexInput(TypedDict, total=False):
    """Input of the index graph: a document (or pre-split scenes) and an optional title."""

    document: Document
    scenes: Scenes
    title: Title


class ExtractTask(TypedDict):
    """Send payload: one extraction sample of one scene (or of one part of a long scene)."""

    scene: Scene
    sample: int
    part: NotRequired[int]  # 1-based part number when the scene was split to fit the extractor's window
    run_dir: NotRequired[str]  # where the LLM cache lives when the context names no directory


class SceneExtraction(TypedDict):
    """One sample's extraction for one scene (``ok`` False when the answer could not be parsed)."""

    scene_id: str
    sample: int
    ok: bool
    characters: list[CharacterRecord]
    triples: list[TripleRecord]
    error: NotRequired[str]
    part: NotRequired[int]


class IndexOutput(TypedDict, total=False):
    """What the index graph returns (and hands back to the graphs that compose it)."""

    doc_hash: str
    title: str
    run_dir: str
    scenes: list[Scene]
    segmentation: str  # which rule produced the scenes
    ckg: NodeLinkGraph
    ckg_stats: CKGStats
    index: IndexRef
    usage: Annotated[Usage, merge_usage]
    timings: Annotated[dict[str, float], add_timings]


class IndexState(IndexInput, IndexOutput, total=False):
    """State of the index graph: its input, its output and the extractions it merges."""

    extractions: Annotated[list[SceneExtraction], operator.add]


class SummaryPlan(TypedDict):
    """Settings of one summarize run, fixed once the narrative is chunked."""

    strategy: Literal["hierarchical", "incremental"]
    max_summary_tokens: int  # G_n
    context_window: int  # W
    budgets: list[int]  # hierarchical: G_0 .. G_L per level, estimated from the chunk count; [G_n] otherwise


class SummarizeInput(TypedDict, total=False):
    """Input of the summarize graph (strategy and sizes fall back to the context)."""

    document: Document
    scenes: Scenes
    strategy: Annotated[
        Literal["hierarchical", "incremental"],
        Field(description="Hierarchical merging or incremental updating. Empty: the strategy setting."),
    ]
    chunk_size: Annotated[
        int, Field(description="Largest chunk read at once, in tokens. Empty: the chunk_size setting.")
    ]
    max_summary_tokens: Annotated[
        int,
        Field(description="Length budget of the summary in tokens. Empty: the max_summary_tokens setting."),
    ]


class SummarizeOutput(TypedDict, total=False):
    """What the summarize graph returns (and hands back to the refine graph)."""

    summary: str
    tree: list[TreeLevel | TreeStep]  # per level (hierarchical) or per step (incremental)
    events: Annotated[list[Event], operator.add]  # regenerations, compressions, fallbacks
    usage: Annotated[Usage, merge_usage]
    timings: Annotated[dict[str, float], add_timings]


class SummarizeState(SummarizeInput, SummarizeOutput, total=False):
    """State of the summarize graph: its input, its output and its chunks and draft."""

    chunks: list[SummaryChunk]
    draft: str


class SummarizeWork(SummarizeState, total=False):
    """Private channels of the summarize graph (never returned to a parent graph)."""

    summary_plan: SummaryPlan
    summary_step: int  # incremental: chunks read so far
    summary_marks: Annotated[dict[str, float], operator.or_]  # wall-clock marks for the timings


class FactScoreInput(TypedDict, total=False):
    """Input of the factscore graph: a summary and its narrative (or an existing index)."""

    summary: Required[Annotated[str, Field(description="The summary whose facts are checked.")]]
    document: Document
    title: Title
    scenes: Scenes
    ckg: Annotated[
        NodeLinkGraph,
        Field(
            description="A character knowledge graph from the index graph; built from the narrative if absent."
        ),
    ]
    index: Annotated[
        IndexRef,
        Field(description="The scene index from the index graph; built from the narrative if absent."),
    ]
    iteration: SkipJsonSchema[int]  # set by the refine graph: the round whose facts these are
    run_dir: SkipJsonSchema[str]  # set by the refine graph: where the round keeps the scenes and CKG it reads
    # a refinement round's: the summary it refined (unchanged sentences go later)
    previous_summary: SkipJsonSchema[str]


class SentenceTask(TypedDict):
    """Send payload: one summary sentence to decompose, find evidence for and judge (scenes and CKG by reference)."""

    summary: str
    sentence: str
    sentence_index: int
    iteration: int
    story: StoryRef
    index: IndexRef | None
    new: bool  # the previous summary has no such sentence: its facts are new, their verdicts calls to make


class PlantTask(TypedDict):
    """Send payload: what a round's planted facts are built from and judged against (``nodes.plant``)."""

    iteration: int
    story: StoryRef
    index: IndexRef | None


class FactScoreOutput(IndexOutput, total=False):
    """What the factscore graph returns (and hands back to the refine graph): its index, and the score cards."""

    factscore: ScoreCard
    metrics: dict[str, dict[str, Any]]  # the added metrics' cards (``Context.metrics``), by name


class FactScoreState(IndexState, FactScoreOutput, total=False):
    """State of the factscore graph (extends the index state it may build first)."""

    summary: str
    iteration: int
    sentences: list[str]
    story: StoryRef  # where the round's branches read the scenes and the CKG (``core.storyref``)
    previous_summary: str  # a refinement round's: the summary refined (which of this one's sentences are new)
    raw_facts: Annotated[list[Fact], operator.add]
    failed_sentences: Annotated[list[FailedSentence], operator.add]
    verdicts: Annotated[list[FactVerdict], operator.add]
    # {iteration, check}: each round's JudgeCheck of the planted facts (never counted in the score)
    planted_checks: Annotated[list[dict[str, Any]], operator.add]


class CoherenceInput(TypedDict, total=False):
    """Input of the coherence graph: one summary, or many with ids."""

    summary: Annotated[str, Field(description="One summary to score. Give this or summaries.")]
    summaries: Annotated[
        list[SummaryItem],
        Field(description="Several summaries, each with an id (and optionally its sentences)."),
    ]


class CoherenceTask(TypedDict):
    """Send payload: one sentence (or batch of sentences) of one summary."""

    run: str  # the invocation that made it; annotations carry it so an earlier run on a thread never counts
    summary_id: str
    summary: str
    sentence_indices: list[int]  # 0-based positions in the summary
    targets: list[str]  # the sentences at those positions
    planted: NotRequired[bool]  # a planted confusing sentence, in a copy of the summary (never counted)


class CoherenceOutput(TypedDict, total=False):
    """What the coherence graph returns (and hands back to the refine graph's coherence guard)."""

    coherence: CoherenceReport
    annotations: Annotated[list[SentenceAnnotation], operator.add]
    usage: Annotated[Usage, merge_usage]
    timings: Annotated[dict[str, float], add_timings]


class CoherenceState(CoherenceOutput, total=False):
    """State of the coherence graph."""

    summary: str | None  # input; the split_summaries node consumes it (sets None) so a thread can be reused
    summaries: list[SummaryItem] | None  # input, consumed likewise
    to_score: list[SummaryItem]  # this invocation's summaries, in input order
    run: str
    mode: Literal["per-sentence", "batched"]
    started: float  # wall-clock start (time.time()) of this invocation
    sentences: dict[str, list[str]]  # summary id -> sentences
    split: dict[str, str]  # summary id -> the splitter that made its sentences, or "given" with the input
    planted: dict[str, list[dict[str, Any]]]  # summary id -> confusing sentences planted in it
    planted_annotations: Annotated[list[SentenceAnnotation], operator.add]  # theirs; never counted


class RefineInput(TypedDict, total=False):
    """Input of the refine graph: a document (or scenes), optionally a title and a starting summary."""

    document: Document
    scenes: Scenes
    title: Title
    summary: Annotated[str, Field(description="Start from this summary instead of writing one.")]
    # set by a caller program, not a person: when it started the run (time.time()); result.json's wall_seconds
    started_at: SkipJsonSchema[float]


class RefineOutput(TypedDict, total=False):
    """What a refine run returns."""

    title: str
    doc_hash: str
    run_dir: str
    summary: str  # the best summary
    best_iteration: int
    stop_reason: str
    iterations: Annotated[list[Iteration], merge_rounds]
    ckg_stats: CKGStats
    usage: Annotated[Usage, merge_usage]
    timings: Annotated[dict[str, float], add_timings]


class RefineState(RefineInput, FactScoreState, SummarizeState, RefineOutput, total=False):
    """State of the refine graph (shares channels with the graphs it composes)."""

    refined_from: int  # the iteration whose summary the latest refinement revised
    coherence: CoherenceReport
