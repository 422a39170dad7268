"""Records every layer reads (scenes, facts, verdicts, score cards, rounds) and the state reducers.

The graph states (``state.py``) are built from them; the apps read them without importing the method.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

NodeLinkGraph = dict[str, Any]
"""A character knowledge graph as networkx node-link JSON (``directed``, ``graph``, ``nodes``, ``edges``)."""

Event = dict[str, Any]
"""A regeneration, compression or fallback on the record: ``stage``, ``kind`` (or ``event``), then details."""

Passage = dict[str, Any]
"""A piece of a scene in an index: ``{"id", "text", "metadata": {"scene_id", "scene_index", "title", ...}}``."""


class CharacterRecord(TypedDict):
    """A character as one extraction named it (``prompts.schemas.CharacterMention``, dumped)."""

    name: str
    aliases: list[str]


class TripleRecord(TypedDict):
    """A relation or state as one extraction gave it (``prompts.schemas.Triple``, dumped)."""

    subject: str
    predicate: str
    object: str | None


class SummaryItem(TypedDict):
    """One summary for the coherence graph: its id, its text, and optionally its sentences already split."""

    id: str
    summary: str
    sentences: NotRequired[list[str]]


class SentenceScore(TypedDict):
    """NarrativeFactScore of one summary sentence."""

    index: int
    sentence: str
    facts: int
    supported: int
    judged: int
    decomposed: bool  # False: its decomposition failed, so its facts were never judged
    score: float | None


class TreeLevel(TypedDict, total=False):
    """Hierarchical merging: one level of summaries (level 0 summarizes chunks)."""

    level: int
    budget: int
    word_limit: int
    chunks: list[dict[str, Any]]  # level 0: the chunks read, without their text
    summaries: list[TreeSummary]


class TreeStep(TypedDict, total=False):
    """Incremental updating: the running summary after one chunk."""

    step: int
    chunk: dict[str, Any]  # the chunk read, without its text
    budget: int
    word_limit: int
    draft_tokens: int
    compressed: bool
    summary: str


class AnnotatorCheck(TypedDict):
    """The coherence annotator's record on the confusing sentences planted in one summary."""

    planted: int
    judged: int  # readable annotations
    flagged: int  # marked as confusing, as they must be
    missed_share: float | None  # (judged - flagged) / judged; None when none was readable
    max_false_acceptance: float
    passed: bool
    note: str  # "the annotator flagged 0 of 3 planted confusing sentences"
    sentences: list[dict[str, Any]]  # each planted sentence: text, position, how it was built, the answer


class SummaryCoherence(TypedDict, total=False):
    """BooookScore of one summary (``storyjudge.core.booookscore.summary_score``)."""

    id: str
    score: float | None
    coverage: float
    reliable: bool
    sentences: int
    scored: int
    clean: int
    confused: int
    unparsed: int
    missing: int
    per_type: dict[str, int]
    per_type_rates: dict[str, float | None]
    split: str
    annotator_check: AnnotatorCheck  # absent when nothing was planted (planted_sentences 0)


class CoherenceReport(TypedDict, total=False):
    """Everything BooookScore reports for a set of summaries (``storyjudge.core.booookscore.coherence_report``)."""

    mode: str
    score: float | None
    coverage: float
    reliable: bool
    coverage_floor: float
    system_score: float | None
    excluded_summaries: int
    summaries: list[SummaryCoherence]
    bootstrap: dict[str, Any]
    per_type_rates: dict[str, float | None]
    sentences: int
    scored: int
    unparsed: int
    prompt: dict[str, str]
    prompt_version: str
    model: str
    note: str
    sentence_splitter: str
    sentences_given: int


def add_timings(left: dict[str, float] | None, right: dict[str, float] | None) -> dict[str, float]:
    """Reducer: seconds per stage, summed (a stage that runs every iteration accumulates)."""
    merged = dict(left or {})
    for stage, seconds in (right or {}).items():
        merged[stage] = round(merged.get(stage, 0.0) + seconds, 4)
    return merged


def merge_rounds(left: list[Iteration] | None, right: list[Iteration] | None) -> list[Iteration]:
    """Reducer: rounds added in order; a round written again (a person's correction) replaces its record."""
    by_number = {record["iteration"]: record for record in [*(left or []), *(right or [])]}
    return list(by_number.values())  # a replaced round keeps its place


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

    store: str  # which store keeps it (``scenestore.STORES``)
    location: str  # where in that store: Chroma's store directory or server URL; "" for the memory store
    embedder: str
    scenes_collection: str  # the index's name in its store
    passages: int
    # older references carry ``store_dir`` and ``chroma_url`` instead (``scenestore.where`` reads both)


class StoryRef(TypedDict):
    """Where a run keeps its scenes and CKG once (``core.storyref``): what a Send payload carries instead of them."""

    folder: str  # a run directory's ``story/`` folder; "" keeps them in this process only
    scenes: str  # content hashes, which name the kept files
    ckg: str


class CKGStats(TypedDict):
    """Size of a character knowledge graph."""

    scenes: int
    characters: int
    edges: int
    self_loops: int


class Fact(TypedDict):
    """An atomic fact with its provenance."""

    id: str  # "i<iteration>-s<sentence>-f<n>"
    iteration: int
    sentence_index: int
    text: str


class EvidenceScene(TypedDict):
    """A retrieved scene as the judge saw it: ``[start, end)`` of its text (kept once per run, ``core.passages``)."""

    id: str
    title: str
    start: int  # character offsets into the scene's text, [start, end): the whole scene, or its best passage
    end: int
    score: float
    excerpt: bool  # True: only the best-matching passage was shown (the scene did not fit the budget)
    text: NotRequired[str]  # records written before evidence was referenced hold the text itself


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
    correction: NotRequired[dict[str, str]]  # a person's: who, when, old, new, reason (core/corrections.py)


class PlantedFact(TypedDict):
    """A control fact planted among a round's facts, built from the story without a model (``core.planted``)."""

    id: str  # "i<iteration>-p<n>": never a summary fact's id
    text: str
    kind: Literal["invented", "swapped", "verbatim"]  # easy false, hard false, true
    expected: Literal["supported", "unsupported"]
    built: str  # how it was made, in words: what it was made from and why it is (un)supported by construction


class PlantedVerdict(FactVerdict):
    """The judge's verdict on a planted fact; it never enters NarrativeFactScore."""

    planted: PlantedFact


class PlantedTally(TypedDict):
    """Planted items of one kind: how many were planted, judged (a readable verdict) and accepted."""

    planted: int
    judged: int
    accepted: int  # false facts: judged supported; confusing sentences: marked "no confusion"


class JudgeCheck(TypedDict):
    """The judge's record on the facts planted in one round (``storyjudge.core.planted.judge_check``)."""

    planted: int
    easy: PlantedTally  # false by construction: a relation given to a name that occurs nowhere in the story
    hard: PlantedTally  # false by construction: a relation moved to a character who never meets its partner
    true: PlantedTally  # sentences of the story, verbatim
    false_acceptance: float | None  # accepted / judged over easy and hard; None when none was judged
    true_acceptance: float | None
    false_acceptance_ci95: NotRequired[list[float] | None]  # Clopper-Pearson; absent in records before it
    true_acceptance_ci95: NotRequired[list[float] | None]
    decision: NotRequired[Literal["passed", "failed", "undecided"]]  # older records: read ``passed``
    rule: NotRequired[dict[str, Any]]  # the decision rule and its exact error rates (``planted.rule_record``)
    max_false_acceptance: NotRequired[float]  # older records' threshold, before the rule
    passed: bool  # decision == "passed": only then may the score count
    note: str  # "the judge accepted 3 of 3 planted false facts (...)"
    calls: int  # what planting cost this round: model calls, then those the LLM cache answered
    cache_hits: int
    input_tokens: int
    output_tokens: int
    verdicts: list[PlantedVerdict]


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
    coverage: float  # judged / facts the summary is estimated to hold (storyjudge.core.narrativefactscore.nfs_coverage)
    coverage_floor: float
    reliable: bool  # a score exists, coverage >= coverage_floor and the judge passed its planted facts
    per_sentence: list[SentenceScore]
    verdicts: list[FactVerdict]
    unjudged_rule: NotRequired[str]  # Context.nfs_unjudged: "exclude" (from the denominator) or "unsupported"
    corrections: NotRequired[int]  # verdicts a person corrected; the score counts them
    judge_check: NotRequired[JudgeCheck]  # absent when nothing was planted (planted_facts 0)
    score_ci95: NotRequired[list[float] | None]  # resampling sentences (their facts together)
    score_ci95_over: NotRequired[str]  # "12 sentences"
    score_corrected: NotRequired[float | None]  # judge-corrected (Rogan-Gladen); None: see the note
    score_corrected_ci95: NotRequired[list[float] | None]  # resampling sentences and planted items together
    score_corrected_ci95_over: NotRequired[str]
    score_corrected_note: NotRequired[str]  # what the estimate assumes, or why there is none


class SummaryChunk(TypedDict):
    """A piece of the narrative the book summarizer reads at once (at most ``chunk_size`` tokens)."""

    index: int
    text: str
    tokens: int  # cl100k_base
    start: int  # character offsets into the document (or the scenes' offsets), [start, end)
    end: int
    scene_ids: list[str]  # scenes packed into this chunk ([] for a plain document)


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
    calls: int  # model calls it took (compression included); attempts answered from the LLM cache cost none
    valid: bool  # False when every attempt was over budget or cut off and the best one was kept


class FailedSentence(TypedDict):
    """A summary sentence whose decomposition failed: its facts were never judged (it lowers coverage)."""

    iteration: int
    sentence_index: int
    error: str


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


class GuardRecord(TypedDict):
    """What the refinement guard measured for one round (``nodes/guards.py``); comparisons are None in round 0."""

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
    coherence: NotRequired[CoherenceReport]
    guard: NotRequired[GuardRecord]
    metrics: NotRequired[dict[str, dict[str, Any]]]  # added metrics' cards by name (``core.metrics``)
    accepted: bool  # False when a guard (refinement or coherence) rejected it as a new best
    note: str
