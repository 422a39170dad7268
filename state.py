"""Graph states, Send payloads and the pydantic schemas of every LLM answer.

States are TypedDicts; channels that many branches write use ``operator.add`` (or ``merge_usage``) reducers, and
items that accumulate across refinement rounds carry their iteration so one round never leaks into another.
LLM answer schemas put the rationale before the verdict, so a model reasons before it commits, and require the
fields that carry an answer's content: an object without them (a wrong key, a fragment) is no answer, never one
filled in with defaults.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, Field

from storyjudge.usage import Usage, merge_usage


def add_timings(left: dict[str, float] | None, right: dict[str, float] | None) -> dict[str, float]:
    """Reducer: seconds per stage, summed (a stage that runs every iteration accumulates)."""
    merged = dict(left or {})
    for stage, seconds in (right or {}).items():
        merged[stage] = round(merged.get(stage, 0.0) + seconds, 4)
    return merged


# =============================================================================================================
# Narrative data
# =============================================================================================================


class Scene(TypedDict):
    """One scene (or chapter, or chunk) of a narrative with its place in the source."""

    id: str  # stable: "S001", "S002", ... in document order; split parts get "S003.2"
    index: int
    title: str  # heading ("ACT I, SCENE II. A camp near Forres") or "" for plain chunks
    text: str
    start: int  # character offsets into the source document, [start, end)
    end: int


class IndexRef(TypedDict):
    """Where a document's index lives, so later graphs can query it without re-embedding."""

    store_dir: str  # embedded Chroma directory ("" when chroma_url is used)
    chroma_url: str
    embedder: str
    scenes_collection: str
    ckg_collection: str
    passages: int


class CKGStats(TypedDict):
    """Size of a character knowledge graph."""

    scenes: int
    characters: int
    edges: int
    self_loops: int


# =============================================================================================================
# LLM answer schemas
# =============================================================================================================


class CharacterMention(BaseModel):
    """A character as a scene names it."""

    name: str = Field(description="The character's fullest name used in the scene.")
    aliases: list[str] = Field(
        default_factory=list,
        description="Other names, titles or nicknames the scene uses for this character.",
    )


class Triple(BaseModel):
    """A relation or state: subject -[predicate]-> object, or a state when object is null."""

    subject: str = Field(description="Character name.")
    predicate: str = Field(description="Short verb phrase, e.g. 'murders', 'is married to', 'state: dead'.")
    object: str | None = Field(
        default=None, description="Character name, or null for a state of the subject."
    )


class SceneTriples(BaseModel):
    """Extractor answer for one scene (both lists required: an answer without them was not given)."""

    characters: list[CharacterMention]
    triples: list[Triple]


class AtomicFacts(BaseModel):
    """Decomposer answer for one summary sentence (``facts`` required; an empty list is an answer)."""

    facts: list[str] = Field(
        description="Self-contained atomic claims; names instead of pronouns; one claim each.",
    )


class Verdict(BaseModel):
    """Judge answer for one atomic fact; the rationale comes first."""

    rationale: str = Field(description="Reasoning over the evidence, written before deciding.")
    supported: bool = Field(description="True only if the evidence supports the fact.")
    feedback: str = Field(default="", description="If unsupported: what is wrong and how to correct it.")
    evidence: list[str] = Field(default_factory=list, description="Ids of the scenes or CKG lines used.")


class SentenceConfusion(BaseModel):
    """Batched coherence answer for one sentence (not the paper's setting); ``index`` is required."""

    index: int
    questions: list[str] = Field(default_factory=list)
    types: list[str] = Field(default_factory=list)


class BatchedConfusions(BaseModel):
    """Batched coherence answer: confusions for the sentences that have any (``sentences`` required)."""

    sentences: list[SentenceConfusion]


# =============================================================================================================
# Fact scoring records
# =============================================================================================================


class Fact(TypedDict):
    """An atomic fact with its provenance."""

    id: str  # "i<iteration>-s<sentence>-f<n>"
    iteration: int
    sentence_index: int
    text: str


class EvidenceScene(TypedDict):
    """A retrieved scene as the judge saw it: whole, or only its best passage when the budget was short."""

    id: str
    title: str
    text: str
    score: float
    excerpt: bool  # True: only the best-matching passage was shown (the scene did not fit the budget)


class Evidence(TypedDict):
    """What the judge saw for a fact."""

    query: str
    scenes: list[EvidenceScene]
    ckg_lines: list[str]


class FactVerdict(TypedDict):
    """A judged (or unjudged) fact."""

    fact: Fact
    status: Literal["supported", "unsupported", "unjudged"]
    rationale: str
    feedback: str
    evidence: Evidence
    raw: str
    error: NotRequired[str]


class ScoreCard(TypedDict):
    """NarrativeFactScore of one summary, with how much of it was judged."""

    iteration: int
    score: float | None  # supported / judged; None when nothing could be judged
    supported: int
    unsupported: int
    unjudged: int
    facts: int
    judged: int  # supported + unsupported
    sentences: int
    decompose_failures: int  # sentences whose facts nobody saw
    coverage: float  # judged / facts the summary is estimated to hold (storyjudge.coverage.nfs_coverage)
    coverage_floor: float
    reliable: bool  # a score exists and coverage >= coverage_floor
    per_sentence: list[dict[str, Any]]  # {index, sentence, score, supported, judged, decomposed}
    verdicts: list[FactVerdict]


# =============================================================================================================
# Graph states
# =============================================================================================================


class IndexInput(TypedDict, total=False):
    """Input of the index graph: a document (or pre-split scenes) and an optional title."""

    document: str
    scenes: list[Scene]
    title: str


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
    characters: list[dict[str, Any]]
    triples: list[dict[str, Any]]
    error: NotRequired[str]
    part: NotRequired[int]


class IndexState(TypedDict, total=False):
    """State of the index graph."""

    document: str
    title: str
    doc_hash: str
    run_dir: str
    scenes: list[Scene]
    segmentation: str  # which rule produced the scenes
    extractions: Annotated[list[SceneExtraction], operator.add]
    ckg: dict[str, Any]  # node-link JSON
    ckg_stats: CKGStats
    index: IndexRef
    usage: Annotated[Usage, merge_usage]
    timings: Annotated[dict[str, float], add_timings]


class IndexOutput(TypedDict, total=False):
    """What the index graph returns (and hands back to the graphs that compose it)."""

    doc_hash: str
    title: str
    run_dir: str
    scenes: list[Scene]
    segmentation: str
    ckg: dict[str, Any]
    ckg_stats: CKGStats
    index: IndexRef
    usage: Annotated[Usage, merge_usage]
    timings: Annotated[dict[str, float], add_timings]


class SummaryChunk(TypedDict):
    """A piece of the narrative the book summarizer reads at once (at most ``chunk_size`` tokens)."""

    index: int
    text: str
    tokens: int  # cl100k_base
    start: int  # character offsets into the document (or the scenes' offsets), [start, end)
    end: int
    scene_ids: list[str]  # scenes packed into this chunk ([] for a plain document)


class SummaryPlan(TypedDict):
    """Settings of one summarize run, fixed once the narrative is chunked."""

    strategy: Literal["hierarchical", "incremental"]
    chunk_size: int  # C
    max_summary_tokens: int  # G_n
    context_window: int  # W
    budgets: list[int]  # hierarchical: G_0 .. G_L per level, estimated from the chunk count; [G_n] otherwise
    chunks: int
    run: str  # tags this run's level-0 results, so a rerun on the same thread never mixes in older ones


class TreeSummary(TypedDict):
    """One intermediate summary: a level-0 chunk summary, a merge, or an incremental step."""

    level: int  # hierarchical level (0 = chunk summaries); the step number for incremental updating
    index: int  # position within its level
    sources: list[int]  # indices of what it summarizes: chunks (level 0, steps) or summaries one level down
    prior: int | None  # index of the same-level summary given as prior context, if any
    text: str
    tokens: int
    budget: int  # token budget G_l (incremental: G_n)
    word_limit: int  # words asked for in the prompt of the kept attempt
    attempts: int
    valid: bool  # False when every attempt was over budget or cut off and the best one was kept


class LeafTask(TypedDict):
    """Send payload: one chunk to summarize at level 0."""

    chunk: SummaryChunk
    plan: SummaryPlan


class LeafResult(TypedDict):
    """A level-0 summary with the run it belongs to."""

    run: str
    summary: TreeSummary


class SummarizeInput(TypedDict, total=False):
    """Input of the summarize graph (strategy and sizes fall back to the context)."""

    document: str
    scenes: list[Scene]
    strategy: Literal["hierarchical", "incremental"]
    chunk_size: int
    max_summary_tokens: int


class SummarizeState(TypedDict, total=False):
    """State of the summarize graph."""

    document: str
    scenes: list[Scene]
    strategy: Literal["hierarchical", "incremental"]
    chunk_size: int
    max_summary_tokens: int
    chunks: list[SummaryChunk]
    tree: list[dict[str, Any]]  # per level (hierarchical) or per step (incremental) intermediate summaries
    events: Annotated[list[dict[str, Any]], operator.add]  # regenerations, compressions, fallbacks
    draft: str
    summary: str
    usage: Annotated[Usage, merge_usage]
    timings: Annotated[dict[str, float], add_timings]


class SummarizeWork(SummarizeState, total=False):
    """Private channels of the summarize graph (never returned to a parent graph)."""

    summary_plan: SummaryPlan
    summary_leaves: Annotated[list[LeafResult], operator.add]  # level-0 summaries from the Send branches
    summary_level: list[TreeSummary]  # the level being merged
    summary_step: int  # incremental: chunks read so far
    summary_marks: Annotated[dict[str, float], operator.or_]  # wall-clock marks for the timings


class SummarizeOutput(TypedDict, total=False):
    """What the summarize graph returns (and hands back to the refine graph)."""

    summary: str
    tree: list[dict[str, Any]]
    events: list[dict[str, Any]]
    usage: Usage
    timings: dict[str, float]


class FactScoreInput(TypedDict, total=False):
    """Input of the factscore graph: a summary and its narrative (or an existing index)."""

    summary: str
    document: str
    title: str
    scenes: list[Scene]
    ckg: dict[str, Any]
    index: IndexRef
    iteration: int


class DecomposeTask(TypedDict):
    """Send payload: one summary sentence to split into atomic facts."""

    summary: str
    sentence: str
    sentence_index: int
    iteration: int


class FailedSentence(TypedDict):
    """A summary sentence whose decomposition failed: its facts were never judged (it lowers coverage)."""

    iteration: int
    sentence_index: int
    error: str


class JudgeTask(TypedDict):
    """Send payload: one fact and the evidence retrieved for it."""

    fact: Fact
    evidence: Evidence


class FactScoreState(IndexState, total=False):
    """State of the factscore graph (extends the index state it may build first)."""

    summary: str
    iteration: int
    sentences: list[str]
    raw_facts: Annotated[list[Fact], operator.add]
    decompose_failures: Annotated[int, operator.add]  # every round's, summed; scores count failed_sentences
    failed_sentences: Annotated[list[FailedSentence], operator.add]
    facts: list[Fact]
    evidence: dict[str, Evidence]  # fact id -> evidence
    verdicts: Annotated[list[FactVerdict], operator.add]
    factscore: ScoreCard


class FactScoreOutput(TypedDict, total=False):
    """What the factscore graph returns (and hands back to the refine graph)."""

    factscore: ScoreCard
    doc_hash: str
    title: str
    run_dir: str
    scenes: list[Scene]
    segmentation: str
    ckg: dict[str, Any]
    ckg_stats: CKGStats
    index: IndexRef
    usage: Usage
    timings: dict[str, float]


class CoherenceInput(TypedDict, total=False):
    """Input of the coherence graph: one summary, or many with ids."""

    summary: str
    summaries: list[dict[str, Any]]  # {"id", "summary"} and optionally "sentences": the summary already split


class CoherenceTask(TypedDict):
    """Send payload: one sentence (or batch of sentences) of one summary."""

    run: str  # the invocation that made it; annotations carry it so an earlier run on a thread never counts
    summary_id: str
    summary: str
    sentence_indices: list[int]  # 0-based positions in the summary
    targets: list[str]  # the sentences at those positions


class SentenceAnnotation(TypedDict):
    """BooookScore annotation of one sentence."""

    run: str
    summary_id: str
    index: int  # 0-based position in the summary
    sentence: str
    confused: bool | None  # None: the answer could not be parsed (counted, not scored as clean)
    types: list[str]  # among the eight of the taxonomy
    questions: list[str]
    raw: str
    other_types: NotRequired[list[str]]  # labels the model gave outside the taxonomy
    error: NotRequired[str]  # why confused is None
    attempts: NotRequired[int]


class CoherenceState(TypedDict, total=False):
    """State of the coherence graph."""

    summary: str | None  # input; the prepare node consumes it (sets None) so a thread can be reused
    summaries: list[dict[str, Any]] | None  # input, consumed likewise
    to_score: list[dict[str, str]]  # this invocation's summaries as {"id", "summary"}, in input order
    run: str
    mode: Literal["per-sentence", "batched"]
    started: float  # wall-clock start (time.time()) of this invocation
    sentences: dict[str, list[str]]  # summary id -> sentences
    split: dict[str, str]  # summary id -> the splitter that made its sentences, or "given" with the input
    annotations: Annotated[list[SentenceAnnotation], operator.add]
    coherence: dict[str, Any]  # per-summary scores, system score, bootstrap, per-type rates, mode
    usage: Annotated[Usage, merge_usage]
    timings: Annotated[dict[str, float], add_timings]


class CoherenceOutput(TypedDict, total=False):
    """What the coherence graph returns (and hands back to the refine graph's coherence guard)."""

    coherence: dict[str, Any]
    annotations: list[SentenceAnnotation]
    usage: Usage
    timings: dict[str, float]


class GuardRecord(TypedDict):
    """What the refinement guard measured for one round (``nodes/guards.py``); comparisons are None in round 0.

    Lengths are words of ``storyjudge.summary_stats``; copy rates are the share of the summary's trigrams found
    verbatim in the narrative.
    """

    words: int
    copy_rate: float | None
    revises: int | None  # the iteration whose summary this round revised
    supported_before: int | None
    supported_after: int | None
    supported_loss_allowed: int | None
    words_before: int | None
    length_ratio: float | None  # words / words_before
    min_words: int | None
    max_words: int | None  # what the refiner was asked for at most
    copy_rate_before: float | None
    copy_increase: float | None
    reasons: list[str]  # why it was rejected; [] when it passed (or the guard is off)


class Iteration(TypedDict):
    """One round of the refinement loop: the summary and everything its score rests on."""

    iteration: int
    summary: str
    factscore: ScoreCard
    coherence: NotRequired[dict[str, Any]]
    guard: NotRequired[GuardRecord]
    accepted: bool  # False when a guard (refinement or coherence) rejected it as a new best
    note: str


class RefineInput(TypedDict, total=False):
    """Input of the refine graph: a document (or scenes), optionally a title and a starting summary."""

    document: str
    scenes: list[Scene]
    title: str
    summary: str


class RefineState(FactScoreState, SummarizeState, total=False):
    """State of the refine graph (shares channels with the graphs it composes)."""

    iterations: Annotated[list[Iteration], operator.add]
    refined_from: int  # the iteration whose summary the latest refinement revised
    best_iteration: int
    stop_reason: str
    coherence: dict[str, Any]


class RefineOutput(TypedDict, total=False):
    """What a refine run returns."""

    title: str
    doc_hash: str
    run_dir: str
    summary: str  # the best summary
    best_iteration: int
    stop_reason: str
    iterations: list[Iteration]
    ckg_stats: CKGStats
    usage: Usage
    timings: dict[str, float]
