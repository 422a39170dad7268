"""Run configuration shared by every graph: the LangGraph ``context_schema``.

The CLI, ``STORYJUDGE_<FIELD>`` variables, Studio's form and ``graph.invoke(..., context=...)`` all set this one
model; a bad value is one ``ConfigError`` line. Each field's docstring is its help text. A ``preset`` fills a
paper's values into the fields neither the caller nor the environment set.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, PrivateAttr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

if TYPE_CHECKING:  # langgraph takes seconds to import; a CLI that only reads settings need not wait
    from langgraph.runtime import Runtime

from storyjudge.core import presets

ENV_PREFIX = "STORYJUDGE_"
ROLES = ("extractor", "summarizer", "decomposer", "judge", "refiner", "coherence")


class ConfigError(ValueError):
    """A configuration value is invalid; the message says which field and what is allowed."""


def _url(value: str) -> str:
    problem = url_problem(value)
    if problem:
        raise ValueError(f"{value!r} is not a valid URL ({problem}); give e.g. http://localhost:8000/v1")
    return value


def _folder(value: str) -> str:
    if value and not Path(value).is_dir():
        raise ValueError(f"{value!r} is not a folder; give a folder of prompt files or leave it empty")
    return value


def _temperature_or_unset(value: float) -> float:
    if value < 0 and value != -1:
        raise ValueError(f"must be >= 0, or -1 for the temperature setting, not {value!r}")
    return value


def _metric(spec: str) -> str:
    from storyjudge.core.metrics import check_spec  # imports the user's file: only when a metric is named

    return check_spec(spec)


def _specs(value: Any) -> Any:
    return [part for part in value.split(",") if part.strip()] if isinstance(value, str) else value


Share = Annotated[float, Field(ge=0, le=1)]
MetricSpecs = Annotated[list[Annotated[str, AfterValidator(_metric)]], BeforeValidator(_specs)]


class Context(BaseModel, frozen=True, extra="forbid", use_attribute_docstrings=True):
    """Settings of one storyjudge run. Every field has a default; empty model specs resolve at call time."""

    # --- models -------------------------------------------------------------------------------------------
    model: str = ""
    """Model spec for every role that has none of its own: 'openai:<name>' (any OpenAI-compatible server with
    base_url) or 'local:smollm2' (embedded, offline, demo grade). Empty: openai:gpt-4o-mini when
    OPENAI_API_KEY is set, else local:smollm2."""
    extractor_model: str = ""
    """Model that extracts who does what to whom in each scene. Empty: the model setting."""
    summarizer_model: str = ""
    """Model that writes the book summary. Empty: the model setting."""
    decomposer_model: str = ""
    """Model that splits a summary into atomic facts. Empty: the model setting."""
    judge_model: str = ""
    """Model that judges each fact against the narrative. Empty: the model setting."""
    refiner_model: str = ""
    """Model that revises the summary. Empty: the model setting."""
    coherence_model: str = ""
    """Model that marks confusing summary sentences (BooookScore). Empty: the model setting."""
    base_url: Annotated[str, AfterValidator(_url)] = ""
    """Base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama, LM Studio). Empty: OPENAI_BASE_URL
    when set, else OpenAI's own API."""
    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature of every role but extraction."""
    max_output_tokens: int = Field(default=1024, ge=1)
    """Cap on tokens generated per LLM call."""
    context_window: int = Field(default=8192, ge=512)
    """The model's context window in tokens; hierarchical merging fits each of its prompts into it."""
    request_timeout: float = Field(default=120.0, gt=0)
    """Seconds one attempt of an LLM request may take in all before it is abandoned and retried."""
    retry_budget_s: float = Field(default=300.0, ge=0)
    """Seconds one LLM call may spend retrying transient failures (429, 5xx, timeouts, cut-off replies),
    honouring Retry-After; then that unit counts as failed (0: no retries)."""
    parse_retries: int = Field(default=2, ge=0)
    """Extra attempts when a structured answer cannot be parsed."""
    seed: int = 0
    """Sampling seed; the extraction samples of a scene use this seed, the next one and so on."""
    # --- embeddings and storage ----------------------------------------------------------------------------
    embedder: str = "minilm"
    """Embedder: 'minilm' (all-MiniLM-L6-v2 shipped in a PyPI wheel, 256-token window) or 'bge-m3:<local path
    or model name you have>' through FlagEmbedding."""
    chroma_url: str = ""
    """URL of a Chroma server. Empty: an embedded store in the run directory."""
    scene_store: Literal["chroma", "memory"] = "chroma"
    """Where scene indexes are kept: 'chroma' (see chroma_url) or 'memory' (in this process only: nothing
    written, the index built again by every run, and a resume cannot reuse it)."""
    run_dir: str = ""
    """Folder for everything a run writes. Empty: runs/<document name>-<hash>."""
    cache_dir: str = ""
    """Folder of the LLM call cache. Empty: the run directory's cache folder."""
    concurrency: int = Field(default=4, ge=1)
    """Maximum LLM calls in flight at once (for an experiment on a Dask cluster: in total, across it)."""
    # --- segmentation, CKG, retrieval ----------------------------------------------------------------------
    chunk_size: int = Field(default=2048, ge=64)
    """Largest chunk or scene, in tokens (as OpenAI's cl100k_base counts them)."""
    chunker: Literal["sentences", "official"] = "sentences"
    """How the book summarizer cuts a plain document into chunks: 'sentences' (paragraphs, each chunk filled
    up with sentences, never more chunks than the official BooookScore chunker) or 'official' (exactly where
    the official BooookScore chunker cuts: packed lines, often mid-sentence)."""
    ckg_samples: int = Field(default=3, ge=1)
    """How many times each scene's relations are extracted for the character knowledge graph."""
    extraction_temperature: float = Field(default=0.7, ge=0)
    """Temperature of the extraction samples (must be above 0 with more than one sample)."""
    predicate_threshold: Share = 0.5
    """Keep a relation when the extractions that state it, over all samples and scenes, number at least this
    share of the samples per scene (0..1; higher = more consistent, lower = more diverse)."""
    retrieval_k: int = Field(default=3, ge=1)
    """Scenes retrieved as evidence per atomic fact."""
    nfs_unjudged: Literal["exclude", "unsupported"] = "exclude"
    """A fact whose verdict could not be read: 'exclude' it from NarrativeFactScore's denominator and report
    it in the coverage (ours), or count it as 'unsupported' with every fact in the denominator (the paper's
    indicator)."""
    evidence_tokens: int = Field(default=4000, ge=64)
    """Tokens of scene text per judge prompt: retrieved scenes are shown whole while they fit, then only their
    best passages (recorded in the evidence). Lower it for slow local models."""
    # --- summarization -------------------------------------------------------------------------------------
    strategy: Literal["hierarchical", "incremental"] = "hierarchical"
    """Summarizer: 'hierarchical' merging or 'incremental' updating."""
    max_summary_tokens: int = Field(default=900, ge=16)
    """Length budget of the summary in tokens (incremental updating also compresses to it)."""
    artifact_removal: bool = True
    """Clean phrases such as 'in this segment' out of the final summary (BooookScore's artifact removal)."""
    # --- refinement loop -----------------------------------------------------------------------------------
    target_score: Share = 1.0
    """Stop refining when NarrativeFactScore reaches this (0..1)."""
    min_delta: float = Field(default=0.01, ge=0)
    """Smallest gain over the best score that counts."""
    patience: int = Field(default=1, ge=1)
    """Refinement rounds without such a gain before stopping."""
    max_iterations: int = Field(default=3, ge=0)
    """Refinement rounds at most."""
    coverage_floor: Share = 0.9
    """Least share of a score's units (facts for NarrativeFactScore, sentences for BooookScore) that must have
    been judged for the score to count: below it the score is shown as unreliable, the loop never picks that
    round as best, and evaluations leave it out of agreement figures (0..1)."""
    metrics: MetricSpecs = []
    """Metrics scored on every round besides NarrativeFactScore and BooookScore: PATH.py:ClassName (a file
    with a metric class) or the name of one installed under the entry-point group storyjudge.metrics
    (repeatable; comma-separated in STORYJUDGE_METRICS). See the README's 'Add a metric'."""
    planted_facts: int = Field(default=24, ge=0)
    """Most planted false control facts judged in each scored round (with half as many true ones), built from
    the story without a model: a relation given to an invented name, or moved to a character who never meets
    its partner; true ones are sentences of the story. They are judged in batches of 8 and planting stops once
    the judge check decides; 24 (the most used) gives its stated error rates (a judge accepting 10% of false
    facts flagged in under 5% of runs, one accepting 40% passed in under 5%); fewer may leave the check
    undecided. Never counted in the score. 0 plants none."""
    planted_sentences: int = Field(default=3, ge=0)
    """Confusing control sentences (about a character the summary never introduced) planted in each summary
    BooookScore scores, each asked about like the summary's own sentences, never counted in the score; they
    measure the annotator. 0 plants none."""
    max_false_acceptance: Share = 0.34
    """Largest share of planted confusing sentences the annotator may pass as clear for a summary's
    BooookScore to count (0..1; 0.34 allows 1 of 3): above it the score does not count, as with too low a
    coverage. The judge check of planted facts decides by its own rule, with stated error rates."""
    coherence_guard: bool = False
    """Score BooookScore each round; reject refinements that lose coherence."""
    coherence_margin: Share = 0.05
    """Largest BooookScore drop a refinement may cause under the guard."""
    refine_guard: bool = True
    """Accept a refined summary only if it keeps the supported facts of the summary it revises, stays within
    its length budget and does not copy the narrative; a rejected one can never be the best, and the next
    round revises the best summary again."""
    max_supported_loss: Share = 0.1
    """Share of the revised summary's supported facts that a refinement may lose (0..1, rounded down: 0.1
    allows 1 of 10 or 6 of 60, none of 9). Rewording changes how a summary splits into facts; this absorbs
    that, not a deletion."""
    min_length_ratio: Share = 0.8
    """Shortest a refinement may be, as a share of the words of the summary it revises (0..1)."""
    max_length_ratio: float = Field(default=1.1, ge=1)
    """Longest a refinement may be: this many times the revised summary's words, plus 10 words. The refiner is
    asked for at most that many words."""
    max_copy_increase: Share = 0.2
    """Largest rise a refinement may cause in the share of the summary's three-word sequences that appear word
    for word in the narrative (0..1; 0.2 = 20 percentage points)."""
    batched_coherence: bool = False
    """Annotate several sentences per call (cheaper; not the paper's setting)."""
    repeated_sentences: Literal["each", "once"] = "each"
    """A sentence a summary states more than once: BooookScore asks about and counts 'each' occurrence (ours),
    or asks 'once' and counts it once, as the official code keys its annotations by sentence."""
    sentence_splitter: Literal["punkt", "pysbd"] = "punkt"
    """How BooookScore splits a summary into the sentences it asks about: 'punkt' (NLTK's Punkt English model,
    as the official BooookScore code does; line breaks are spaces, so a heading without a full stop joins the
    next sentence) or 'pysbd' (rule-based; also ends a sentence at a blank line, a heading or a list item).
    Summaries given with their own sentences are not split."""
    # --- papers' settings, prompt overrides ----------------------------------------------------------------
    preset: Literal["", "booookscore-paper", "nfs-paper"] = ""
    """Use a paper's own settings: 'booookscore-paper' or 'nfs-paper' (the values and their sources are in
    storyjudge/core/presets.py). Only settings you did not give yourself are changed. Empty: storyjudge's
    defaults."""
    summary_temperature: Annotated[float, AfterValidator(_temperature_or_unset)] = -1.0
    """Sampling temperature of the book summarizer only; -1 uses the temperature setting."""
    predicate_min_count: int = Field(default=0, ge=0)
    """Keep a relation only when at least this many extractions state it, counting every sample of every scene
    (works with one sample too); 0 uses the predicate threshold instead."""
    bge_m3_path: str = ""
    """Local folder with BGE-M3 weights; the nfs-paper preset retrieves with BGE-M3 from it (never
    downloaded). Empty: none; the preset then stops unless you choose the embedder yourself."""
    prompt_dir: Annotated[str, AfterValidator(_folder)] = ""
    """Folder of prompt files that replace the bundled ones by name (coherence.txt, judge.txt, ...); the
    official BooookScore scoring prompt file is accepted as it is. Empty: bundled prompts."""

    _preset_applied: dict[str, Any] = PrivateAttr(default_factory=dict)

    if not TYPE_CHECKING:  # type checkers keep the typed keyword arguments pydantic declares

        def __init__(self, **values: Any) -> None:
            """Given values win over ``STORYJUDGE_<FIELD>`` variables; the preset fills what is left."""
            values = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in values.items()}
            env = {name: ENV_PREFIX + name.upper() for name in type(self).model_fields if name not in values}
            sources = {name: variable for name, variable in env.items() if variable in os.environ}
            if "base_url" not in values and "base_url" not in sources and os.environ.get("OPENAI_BASE_URL"):
                sources["base_url"] = "OPENAI_BASE_URL"  # where the OpenAI SDK would send the requests
            given = {**values, **{name: os.environ[variable] for name, variable in sources.items()}}
            applied = _preset_values(given, sources)
            try:
                super().__init__(**{**applied, **given})
            except ValidationError as exc:
                raise ConfigError(describe_errors(exc, Context, sources, "Invalid setting: ")) from None
            self._preset_applied = applied

    @property
    def preset_applied(self) -> dict[str, Any]:
        """The settings the preset filled in (field -> value); empty without a preset."""
        return dict(self._preset_applied)

    @property
    def summarizer_temperature(self) -> float:
        """The book summarizer's temperature: summary_temperature when set, else temperature."""
        return self.temperature if self.summary_temperature < 0 else self.summary_temperature

    def replace(self, **changes: Any) -> Context:
        """A copy with some fields changed (validated again); the preset's record keeps the values it still holds."""
        copy = type(self)(**{**self.model_dump(), **changes})
        kept = {k: v for k, v in self._preset_applied.items() if k not in changes and getattr(copy, k) == v}
        copy._preset_applied.update(kept)  # every field was given: the preset filled none of the copy's
        return copy

    def public_dict(self) -> dict[str, Any]:
        """Every field, for run records. Holds no secrets: keys are read from the environment, never stored."""
        return self.model_dump()


for _field in Context.model_fields.values():  # docstrings wrap: one line each in --help and Studio's form
    _field.description = " ".join(str(_field.description).split())
Context.model_rebuild(force=True)


def _preset_values(given: dict[str, Any], sources: dict[str, str]) -> dict[str, Any]:
    """The preset's values for the fields not given (a temperature given covers the summarizer's too)."""
    name = given.get("preset", "")
    if name not in presets.PRESETS:
        return {}  # none, or not a preset: the field's type says which are
    covered = {"summary_temperature"} if "temperature" in given else set()
    settable = set(Context.model_fields) - set(given) - covered
    bge_m3_path = given.get("bge_m3_path", "")
    try:
        return presets.resolve(name, settable, bge_m3_path if isinstance(bge_m3_path, str) else "")
    except ValueError as exc:
        where = [
            f"{sources[field]}={given[field]!r}" for field in ("preset", "bge_m3_path") if field in sources
        ]
        also = f" ({' and '.join(where)} come from the environment)" if where else ""
        raise ConfigError(f"Invalid setting: {exc}{also}") from None


_KINDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "on or off (true/false, yes/no, 1/0)",
    "string": "text",
    "list": "a list",
    "dict": "a mapping (name: value)",
    "model": "a mapping (name: value)",
}
_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def describe_errors(
    exc: ValidationError, model: type[BaseModel], sources: dict[str, str] | None = None, prefix: str = ""
) -> str:
    """One line for pydantic's errors: each field, what it takes and what it got (and its ``sources`` variable)."""
    parts = [
        _describe(error, model, (sources or {}).get(str(error["loc"][0]) if error["loc"] else ""))
        for error in exc.errors()
    ]
    line = prefix + "; ".join(parts)
    return line if line.endswith((".", "?")) else line + "."


def _describe(error: ErrorDetails, model: type[BaseModel], variable: str | None) -> str:
    loc = error["loc"]
    key = f" key {loc[-2]!r}" if loc and loc[-1] == "[key]" else ""  # a mapping's key is what is wrong
    loc = loc[:-2] if key else loc
    name = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".") + key
    given, kind, field = error["input"], error["type"], _field_at(model, loc)
    if kind == "extra_forbidden":
        siblings = list(getattr(_model_at(model, loc[:-1]), "model_fields", {}))
        close = difflib.get_close_matches(str(loc[-1]), siblings, n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(siblings)}."
        return f"there is no setting {name!r}; {hint}"
    if kind == "literal_error":
        listed = re.sub(r"(^|, | or )''(?=, | or |$)", r"\1empty", str(error.get("ctx", {}).get("expected")))
        expected = f"must be {listed}, not {given!r}"
    elif kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        metadata = field.metadata if field is not None else [error.get("ctx", {})]
        expected = f"must be {expected_range(metadata)}, not {given!r}"
    elif kind == "list_type":
        expected = f"must be a list (e.g. {loc[-1]}: [{given!r}]), not {given!r}"
    elif kind.split("_")[0] in _KINDS and kind.endswith(("_parsing", "_type", "_from_float")):
        wanted = _KINDS[kind.split("_")[0]]
        expected = f"must be {wanted}, not {given!r}"
    elif kind == "missing":
        expected = f"is missing ({field.description})" if field and field.description else "is missing"
    elif kind == "value_error":
        expected = str(error.get("ctx", {}).get("error", error["msg"]))
    else:
        expected = f"is wrong: {error['msg'][0].lower()}{error['msg'][1:]}, not {given!r}"
    where = f" (from {variable}={given!r}: fix or unset it)" if variable else ""
    return f"{name} {expected}{where}".strip()


def _model_at(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model that holds the field at ``loc`` (lists' indexes skipped)."""
    for part in loc:
        if isinstance(part, str):
            field = getattr(model, "model_fields", {}).get(part)
            model = _inner_model(field.annotation) if field is not None else None
    return model


def _field_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> FieldInfo | None:
    if not loc or not isinstance(loc[-1], str):
        return None
    return getattr(_model_at(model, loc[:-1]), "model_fields", {}).get(loc[-1])


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_inner_model, get_args(annotation)) if m is not None), None)


def expected_range(metadata: list[Any]) -> str:
    """A field's bounds in words: 'between 0 and 1', '>= 1', '> 0'."""
    bounds: dict[str, Any] = {}
    for item in metadata:
        for key in _BOUNDS:
            value = item.get(key) if isinstance(item, dict) else getattr(item, key, None)
            if value is not None:
                bounds[key] = value
    if "ge" in bounds and "le" in bounds:
        return f"between {bounds['ge']} and {bounds['le']}"
    return " and ".join(f"{_BOUNDS[key]} {value}" for key, value in bounds.items())


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


def as_context(value: Context | dict[str, Any] | None) -> Context:
    """Normalise whatever a caller passed as ``context=`` (nothing, a dict or a Context) into a Context."""
    if isinstance(value, Context):
        return value
    if value is None or isinstance(value, dict):
        return Context(**(value or {}))
    raise ConfigError(f"context must be a dict or storyjudge Context, not {type(value).__name__}.")


def context_of(runtime: Runtime[Context] | None) -> Context:
    """The run's Context from a node's runtime, with defaults when the graph was invoked without one."""
    return as_context(getattr(runtime, "context", None))
