"""Run configuration shared by every graph: the LangGraph ``context_schema``.

One dataclass holds every knob so that the CLI, ``STORYJUDGE_<FIELD>`` environment variables, LangGraph Studio's
form and ``graph.invoke(..., context=...)`` all set the same thing. Fields left at their default fall back to the
environment, so a shell-wide ``STORYJUDGE_JUDGE_MODEL`` applies to runs started from Python too. A ``preset``
(``storyjudge/core/presets.py``) then fills a paper's values into the fields that neither the caller nor the
environment set.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin, get_type_hints

if TYPE_CHECKING:  # langgraph takes seconds to import; a CLI that only reads settings need not wait
    from langgraph.runtime import Runtime

from storyjudge.core import presets

ENV_PREFIX = "STORYJUDGE_"
ROLES = ("extractor", "summarizer", "decomposer", "judge", "refiner", "coherence")


class ConfigError(ValueError):
    """A configuration value is invalid; the message says which field and what is allowed."""


def _describe(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class Context:
    """Settings of one storyjudge run. Every field has a default; empty model specs resolve at call time."""

    # --- models -------------------------------------------------------------------------------------------
    model: str = field(
        default="",
        metadata=_describe(
            "Model spec for every role that has none of its own: 'openai:<name>' (any OpenAI-compatible server "
            "with base_url) or 'local:smollm2' (embedded, offline, demo grade). Empty: openai:gpt-4o-mini when "
            "OPENAI_API_KEY is set, else local:smollm2."
        ),
    )
    extractor_model: str = field(
        default="",
        metadata=_describe(
            "Model that extracts who does what to whom in each scene. Empty: the model setting."
        ),
    )
    summarizer_model: str = field(
        default="", metadata=_describe("Model that writes the book summary. Empty: the model setting.")
    )
    decomposer_model: str = field(
        default="",
        metadata=_describe("Model that splits a summary into atomic facts. Empty: the model setting."),
    )
    judge_model: str = field(
        default="",
        metadata=_describe("Model that judges each fact against the narrative. Empty: the model setting."),
    )
    refiner_model: str = field(
        default="", metadata=_describe("Model that revises the summary. Empty: the model setting.")
    )
    coherence_model: str = field(
        default="",
        metadata=_describe(
            "Model that marks confusing summary sentences (BooookScore). Empty: the model setting."
        ),
    )
    base_url: str = field(
        default="",
        metadata=_describe(
            "Base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama, LM Studio). "
            "Empty: OPENAI_BASE_URL when set, else OpenAI's own API."
        ),
    )
    temperature: float = field(
        default=0.0, metadata=_describe("Sampling temperature of every role but extraction.")
    )
    max_output_tokens: int = field(default=1024, metadata=_describe("Cap on tokens generated per LLM call."))
    context_window: int = field(
        default=8192,
        metadata=_describe(
            "The model's context window in tokens; hierarchical merging fits each of its prompts into it."
        ),
    )
    request_timeout: float = field(
        default=120.0,
        metadata=_describe(
            "Seconds one attempt of an LLM request may take in all before it is abandoned and retried."
        ),
    )
    retry_budget_s: float = field(
        default=300.0,
        metadata=_describe(
            "Seconds one LLM call may spend retrying transient failures (429, 5xx, timeouts, cut-off replies), "
            "honouring Retry-After; then that unit counts as failed (0: no retries)."
        ),
    )
    parse_retries: int = field(
        default=2, metadata=_describe("Extra attempts when a structured answer cannot be parsed.")
    )
    seed: int = field(
        default=0,
        metadata=_describe(
            "Sampling seed; the extraction samples of a scene use this seed, the next one and so on."
        ),
    )
    # --- embeddings and storage ----------------------------------------------------------------------------
    embedder: str = field(
        default="minilm",
        metadata=_describe(
            "Embedder: 'minilm' (all-MiniLM-L6-v2 shipped in a PyPI wheel, 256-token window) or "
            "'bge-m3:<local path or model name you have>' through FlagEmbedding."
        ),
    )
    chroma_url: str = field(
        default="",
        metadata=_describe("URL of a Chroma server. Empty: an embedded store in the run directory."),
    )
    scene_store: str = field(
        default="chroma",
        metadata=_describe(
            "Where scene indexes are kept: 'chroma' (see chroma_url) or 'memory' (in this process only: "
            "nothing written, the index built again by every run, and a resume cannot reuse it)."
        ),
    )
    run_dir: str = field(
        default="",
        metadata=_describe("Folder for everything a run writes. Empty: runs/<document name>-<hash>."),
    )
    cache_dir: str = field(
        default="",
        metadata=_describe("Folder of the LLM call cache. Empty: the run directory's cache folder."),
    )
    concurrency: int = field(
        default=4,
        metadata=_describe(
            "Maximum LLM calls in flight at once (for an experiment on a Dask cluster: in total, across it)."
        ),
    )
    # --- segmentation, CKG, retrieval ----------------------------------------------------------------------
    chunk_size: int = field(
        default=2048,
        metadata=_describe("Largest chunk or scene, in tokens (as OpenAI's cl100k_base counts them)."),
    )
    chunker: str = field(
        default="sentences",
        metadata=_describe(
            "How the book summarizer cuts a plain document into chunks: 'sentences' (paragraphs, each chunk "
            "filled up with sentences, never more chunks than the official BooookScore chunker) or 'official' "
            "(exactly where the official BooookScore chunker cuts: packed lines, often mid-sentence)."
        ),
    )
    ckg_samples: int = field(
        default=3,
        metadata=_describe(
            "How many times each scene's relations are extracted for the character knowledge graph."
        ),
    )
    extraction_temperature: float = field(
        default=0.7,
        metadata=_describe(
            "Temperature of the extraction samples (must be above 0 with more than one sample)."
        ),
    )
    predicate_threshold: float = field(
        default=0.5,
        metadata=_describe(
            "Keep a relation when the extractions that state it, over all samples and scenes, number at least "
            "this share of the samples per scene (0..1; higher = more consistent, lower = more diverse)."
        ),
    )
    retrieval_k: int = field(default=3, metadata=_describe("Scenes retrieved as evidence per atomic fact."))
    nfs_unjudged: str = field(
        default="exclude",
        metadata=_describe(
            "A fact whose verdict could not be read: 'exclude' it from NarrativeFactScore's denominator and "
            "report it in the coverage (ours), or count it as 'unsupported' with every fact in the denominator "
            "(the paper's indicator)."
        ),
    )
    evidence_tokens: int = field(
        default=4000,
        metadata=_describe(
            "Tokens of scene text per judge prompt: retrieved scenes are shown whole while they fit, then only "
            "their best passages (recorded in the evidence). Lower it for slow local models."
        ),
    )
    # --- summarization -------------------------------------------------------------------------------------
    strategy: str = field(
        default="hierarchical",
        metadata=_describe("Summarizer: 'hierarchical' merging or 'incremental' updating."),
    )
    max_summary_tokens: int = field(
        default=900,
        metadata=_describe(
            "Length budget of the summary in tokens (incremental updating also compresses to it)."
        ),
    )
    artifact_removal: bool = field(
        default=True,
        metadata=_describe(
            "Clean phrases such as 'in this segment' out of the final summary (BooookScore's artifact removal)."
        ),
    )
    # --- refinement loop -----------------------------------------------------------------------------------
    target_score: float = field(
        default=1.0, metadata=_describe("Stop refining when NarrativeFactScore reaches this (0..1).")
    )
    min_delta: float = field(
        default=0.01, metadata=_describe("Smallest gain over the best score that counts.")
    )
    patience: int = field(
        default=1, metadata=_describe("Refinement rounds without such a gain before stopping.")
    )
    max_iterations: int = field(default=3, metadata=_describe("Refinement rounds at most."))
    coverage_floor: float = field(
        default=0.9,
        metadata=_describe(
            "Least share of a score's units (facts for NarrativeFactScore, sentences for BooookScore) that must "
            "have been judged for the score to count: below it the score is shown as not reliable, the loop "
            "never picks that round as best, and evaluations leave it out of agreement figures (0..1)."
        ),
    )
    planted_facts: int = field(
        default=24,
        metadata=_describe(
            "Most planted false control facts judged in each scored round (with half as many true ones), built "
            "from the story without a model: a relation given to an invented name, or moved to a character who "
            "never meets its partner; true ones are sentences of the story. They are judged in batches of 8 "
            "and planting stops once the judge check decides; 24 (the most used) gives its stated error rates "
            "(a judge accepting 10% of false facts flagged in under 5% of runs, one accepting 40% passed in "
            "under 5%); fewer may leave the check undecided. Never counted in the score. 0 plants none."
        ),
    )
    planted_sentences: int = field(
        default=3,
        metadata=_describe(
            "Confusing control sentences (about a character the summary never introduced) planted in each "
            "summary BooookScore scores, each asked about like the summary's own sentences, never counted in "
            "the score; they measure the annotator. 0 plants none."
        ),
    )
    max_false_acceptance: float = field(
        default=0.34,
        metadata=_describe(
            "Largest share of planted confusing sentences the annotator may pass as clear for a summary's "
            "BooookScore to count (0..1; 0.34 allows 1 of 3): above it the score is not reliable, as with too "
            "low a coverage. The judge check of planted facts decides by its own rule, with stated error rates."
        ),
    )
    coherence_guard: bool = field(
        default=False,
        metadata=_describe("Score BooookScore each round; reject refinements that lose coherence."),
    )
    coherence_margin: float = field(
        default=0.05, metadata=_describe("Largest BooookScore drop a refinement may cause under the guard.")
    )
    refine_guard: bool = field(
        default=True,
        metadata=_describe(
            "Accept a refined summary only if it keeps the supported facts of the summary it revises, stays "
            "within its length budget and does not copy the narrative; a rejected one can never be the best, "
            "and the next round revises the best summary again."
        ),
    )
    max_supported_loss: float = field(
        default=0.1,
        metadata=_describe(
            "Share of the revised summary's supported facts that a refinement may lose (0..1, rounded down: "
            "0.1 allows 1 of 10 or 6 of 60, none of 9). Rewording changes how a summary splits into facts; "
            "this absorbs that, not a deletion."
        ),
    )
    min_length_ratio: float = field(
        default=0.8,
        metadata=_describe(
            "Shortest a refinement may be, as a share of the words of the summary it revises (0..1)."
        ),
    )
    max_length_ratio: float = field(
        default=1.1,
        metadata=_describe(
            "Longest a refinement may be: this many times the revised summary's words, plus 10 words. The "
            "refiner is asked for at most that many words."
        ),
    )
    max_copy_increase: float = field(
        default=0.2,
        metadata=_describe(
            "Largest rise a refinement may cause in the share of the summary's three-word sequences that "
            "appear word for word in the narrative (0..1; 0.2 = 20 percentage points)."
        ),
    )
    batched_coherence: bool = field(
        default=False,
        metadata=_describe("Annotate several sentences per call (cheaper; not the paper's setting)."),
    )
    repeated_sentences: str = field(
        default="each",
        metadata=_describe(
            "A sentence a summary states more than once: BooookScore asks about and counts 'each' occurrence "
            "(ours), or asks 'once' and counts it once, as the official code keys its annotations by sentence."
        ),
    )
    sentence_splitter: str = field(
        default="punkt",
        metadata=_describe(
            "How BooookScore splits a summary into the sentences it asks about: 'punkt' (NLTK's Punkt English "
            "model, as the official BooookScore code does; line breaks are spaces, so a heading without a full "
            "stop joins the next sentence) or 'pysbd' (rule-based; also ends a sentence at a blank line, a "
            "heading or a list item). Summaries given with their own sentences are not split."
        ),
    )
    # --- papers' settings, prompt overrides ----------------------------------------------------------------
    preset: str = field(
        default="",
        metadata=_describe(
            "Use a paper's own settings: 'booookscore-paper' or 'nfs-paper' (the values and their sources are "
            "in storyjudge/core/presets.py). Only settings you did not give yourself are changed. Empty: "
            "storyjudge's defaults."
        ),
    )
    summary_temperature: float = field(
        default=-1.0,
        metadata=_describe(
            "Sampling temperature of the book summarizer only; -1 uses the temperature setting."
        ),
    )
    predicate_min_count: int = field(
        default=0,
        metadata=_describe(
            "Keep a relation only when at least this many extractions state it, counting every sample of "
            "every scene (works with one sample too); 0 uses the predicate threshold instead."
        ),
    )
    bge_m3_path: str = field(
        default="",
        metadata=_describe(
            "Local folder with BGE-M3 weights; the nfs-paper preset retrieves with BGE-M3 from it (never "
            "downloaded). Empty: none; the preset then stops unless you choose the embedder yourself."
        ),
    )
    prompt_dir: str = field(
        default="",
        metadata=_describe(
            "Folder of prompt files that replace the bundled ones by name (coherence.txt, judge.txt, ...); "
            "the official BooookScore scoring prompt file is accepted as it is. Empty: bundled prompts."
        ),
    )

    def __new__(cls, *args: Any, **values: Any) -> Context:
        """Remember the fields the caller passed: they win over the environment, even when equal to defaults."""
        self = super().__new__(cls)
        object.__setattr__(self, "_explicit", frozenset(values))
        return self

    def __post_init__(self) -> None:
        hints = get_type_hints(type(self))
        explicit: frozenset[str] = getattr(self, "_explicit", frozenset())
        from_env: set[str] = set()
        for f in fields(self):
            value = getattr(self, f.name)
            env_value = os.environ.get(ENV_PREFIX + f.name.upper())
            if env_value is not None and f.name not in explicit:
                source = f"{ENV_PREFIX}{f.name.upper()}"
                setattr(self, f.name, _coerce(f.name, env_value, hints[f.name], source))
                from_env.add(f.name)
            elif isinstance(value, str) and hints[f.name] is not str:  # forms and JSON payloads send strings
                setattr(self, f.name, _coerce(f.name, value, hints[f.name], "value"))
            elif isinstance(value, os.PathLike) and hints[f.name] is str:  # run_dir=Path(...) is fine
                setattr(self, f.name, os.fspath(value))
            elif not _has_type(value, hints[f.name]):
                expected = _type_name(hints[f.name])
                given = type(value).__name__
                raise ConfigError(f"Invalid setting: {f.name} must be a {expected}, not {given}.")
        if not self.base_url and "base_url" not in explicit and os.environ.get("OPENAI_BASE_URL"):
            # where the OpenAI SDK would send the requests: named in the Models table, given its own key rules
            self.base_url = os.environ["OPENAI_BASE_URL"]
        self._apply_preset(explicit | from_env)
        self.validate()

    def _apply_preset(self, given: set[str] | frozenset[str]) -> None:
        """Fill the preset's values into the fields the user did not set (given values always win)."""
        applied: dict[str, Any] = {}
        if self.preset:
            if self.preset not in presets.names():
                known = ", ".join(repr(name) for name in presets.names())
                raise ConfigError(
                    f"Invalid setting: preset must be empty or one of {known}, not {self.preset!r}."
                )
            settable = {f.name for f in fields(self)} - set(given)
            if "temperature" in given:  # a temperature the user chose covers the summarizer too
                settable.discard("summary_temperature")
            try:
                applied = presets.resolve(self.preset, settable, self.bge_m3_path)
            except ValueError as exc:
                raise ConfigError(f"Invalid setting: {exc}") from None
            for name, value in applied.items():
                setattr(self, name, value)
        object.__setattr__(self, "_preset_applied", applied)

    @property
    def preset_applied(self) -> dict[str, Any]:
        """The settings the preset filled in (field -> value); empty without a preset."""
        return dict(getattr(self, "_preset_applied", {}))

    @property
    def summarizer_temperature(self) -> float:
        """The book summarizer's temperature: summary_temperature when set, else temperature."""
        return self.temperature if self.summary_temperature < 0 else self.summary_temperature

    def validate(self) -> None:
        """Reject values that would make a run meaningless, naming the field and the allowed range."""
        checks: list[tuple[bool, str]] = [
            (self.concurrency >= 1, "concurrency must be >= 1"),
            (self.chunk_size >= 64, "chunk_size must be >= 64 tokens"),
            (self.chunker in ("sentences", "official"), "chunker must be 'sentences' or 'official'"),
            (self.ckg_samples >= 1, "ckg_samples must be >= 1"),
            (0.0 <= self.predicate_threshold <= 1.0, "predicate_threshold must be between 0 and 1"),
            (self.retrieval_k >= 1, "retrieval_k must be >= 1"),
            (
                self.nfs_unjudged in ("exclude", "unsupported"),
                "nfs_unjudged must be 'exclude' or 'unsupported'",
            ),
            (self.evidence_tokens >= 64, "evidence_tokens must be >= 64"),
            (
                self.strategy in ("hierarchical", "incremental"),
                "strategy must be 'hierarchical' or 'incremental'",
            ),
            (self.max_summary_tokens >= 16, "max_summary_tokens must be >= 16"),
            (0.0 <= self.target_score <= 1.0, "target_score must be between 0 and 1"),
            (self.min_delta >= 0.0, "min_delta must be >= 0"),
            (self.patience >= 1, "patience must be >= 1"),
            (self.max_iterations >= 0, "max_iterations must be >= 0"),
            (self.temperature >= 0.0, "temperature must be >= 0"),
            (self.extraction_temperature >= 0.0, "extraction_temperature must be >= 0"),
            (self.max_output_tokens >= 1, "max_output_tokens must be >= 1"),
            (self.context_window >= 512, "context_window must be >= 512"),
            (self.request_timeout > 0, "request_timeout must be > 0"),
            (self.retry_budget_s >= 0, "retry_budget_s must be >= 0"),
            (self.parse_retries >= 0, "parse_retries must be >= 0"),
            (0.0 <= self.coherence_margin <= 1.0, "coherence_margin must be between 0 and 1"),
            (0.0 <= self.coverage_floor <= 1.0, "coverage_floor must be between 0 and 1"),
            (self.repeated_sentences in ("each", "once"), "repeated_sentences must be 'each' or 'once'"),
            (self.scene_store in ("chroma", "memory"), "scene_store must be 'chroma' or 'memory'"),
            (self.planted_facts >= 0, "planted_facts must be >= 0 (0 plants none)"),
            (self.planted_sentences >= 0, "planted_sentences must be >= 0 (0 plants none)"),
            (0.0 <= self.max_false_acceptance <= 1.0, "max_false_acceptance must be between 0 and 1"),
            (
                self.sentence_splitter in ("punkt", "pysbd"),
                "sentence_splitter must be 'punkt' or 'pysbd'",
            ),
            (
                self.summary_temperature >= 0.0 or self.summary_temperature == -1.0,
                "summary_temperature must be >= 0, or -1 for the temperature setting",
            ),
            (self.predicate_min_count >= 0, "predicate_min_count must be >= 0 (0: use predicate_threshold)"),
            (
                not self.prompt_dir or Path(self.prompt_dir).is_dir(),
                f"prompt_dir {self.prompt_dir!r} is not a folder; give a folder of prompt files or leave it empty",
            ),
            (0.0 <= self.max_supported_loss <= 1.0, "max_supported_loss must be between 0 and 1"),
            (0.0 <= self.min_length_ratio <= 1.0, "min_length_ratio must be between 0 and 1"),
            (self.max_length_ratio >= 1.0, "max_length_ratio must be >= 1"),
            (0.0 <= self.max_copy_increase <= 1.0, "max_copy_increase must be between 0 and 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"Invalid setting: {message}.")
        for name in ("base_url",):
            problem = url_problem(getattr(self, name))
            if problem:
                raise ConfigError(
                    f"Invalid setting: {name} {getattr(self, name)!r} is not a valid URL ({problem}); "
                    "give e.g. http://localhost:8000/v1."
                )

    def replace(self, **changes: Any) -> Context:
        """A copy with some fields changed (validated again); the preset's record keeps the values it still holds."""
        copy = dataclasses.replace(self, **changes)
        kept = {k: v for k, v in self.preset_applied.items() if k not in changes and getattr(copy, k) == v}
        object.__setattr__(copy, "_preset_applied", {**kept, **copy.preset_applied})
        return copy

    def public_dict(self) -> dict[str, Any]:
        """Every field, for run records. Holds no secrets: keys are read from the environment, never stored."""
        return dataclasses.asdict(self)


def url_problem(url: str) -> str:
    """Why ``url`` is not a usable http(s) URL ('' when it is, or when it is empty: not set)."""
    import ipaddress
    from urllib.parse import urlsplit

    if not url:
        return ""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a port out of range
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "the scheme must be http or https"
    host = parts.hostname or ""
    if not host:
        return "no host"
    if port == 0:
        return "port 0"
    if re.fullmatch(r"[\d.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return f"{host} is not an IPv4 address"
    elif not re.fullmatch(r"[A-Za-z0-9._:%-]+", host):
        return f"{host!r} is not a host name"
    return ""


def _target_type(hint: Any) -> Any:
    if get_origin(hint) in (Union, types.UnionType):
        return next(a for a in get_args(hint) if a is not type(None))
    return hint


def _type_name(hint: Any) -> str:
    return str(getattr(_target_type(hint), "__name__", hint))


def _has_type(value: Any, hint: Any) -> bool:
    """Whether a value fits its field (ints are fine where floats are expected; None where optional)."""
    target = _target_type(hint)
    if value is None:
        return target is not hint
    if target is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if target is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, target) if isinstance(target, type) else True


def _coerce(name: str, raw: str, hint: Any, source: str) -> Any:
    """Parse a string setting (environment variable or form value) into the field's type."""
    target = _target_type(hint)
    try:
        if target is bool:
            lowered = raw.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(raw)
        if target is int:
            return int(raw)
        if target is float:
            return float(raw)
    except ValueError:
        expected = getattr(target, "__name__", target)
        raise ConfigError(f"Invalid setting: {name} ({source} {raw!r}) is not a valid {expected}.") from None
    return raw


def as_context(value: Context | dict[str, Any] | None) -> Context:
    """Normalise whatever a caller passed as ``context=`` (nothing, a dict or a Context) into a Context."""
    if value is None:
        return Context()
    if isinstance(value, Context):
        return value
    if isinstance(value, dict):
        known = {f.name for f in fields(Context)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(
                f"Unknown setting(s) {unknown}; known settings are the fields of storyjudge Context."
            )
        return Context(**value)
    raise ConfigError(f"context must be a dict or storyjudge Context, not {type(value).__name__}.")


def context_of(runtime: Runtime[Context] | None) -> Context:
    """The run's Context from a node's runtime, with defaults when the graph was invoked without one."""
    return as_context(getattr(runtime, "context", None) if runtime is not None else None)
