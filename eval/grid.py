"""Experiment configuration: the grid of settings, its validation, and the Context of each cell.

A config (YAML or JSON) names datasets and the axes of a grid -- model specs x summarization strategies x
chunk sizes x loop settings -- and a task:

- ``refine``: summarize each narrative and refine it (the ``refine`` graph), then score every iteration
  (NarrativeFactScore comes with the graph; BooookScore, ROUGE against references, BERTScore and summary
  statistics as the config's ``metrics`` ask);
- ``score``: judge the summaries a dataset gives (STORYSUMM) with the ``factscore`` and/or ``coherence``
  graphs. Strategy and loop settings do not affect this task, so those axes collapse to one value.

Every setting is checked when the config is loaded, so a typo fails in a second, not after an hour of runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from eval.datasets import Dataset, load, resolve, split_name
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.rundir import slug

TASKS = ("refine", "score")
METRICS = ("factscore", "coherence", "rouge", "bertscore", "stats")
DEFAULT_METRICS = {"refine": ["factscore", "coherence", "rouge", "stats"], "score": ["factscore", "stats"]}
LOOP_KEYS = ("max_iterations", "target_score", "min_delta", "patience", "coherence_guard", "coherence_margin")
CONFIG_KEYS = {
    "name", "out_dir", "cache_dir", "task", "metrics", "datasets", "models", "strategies", "chunk_sizes",
    "loops", "context", "base_url", "concurrency", "llm_concurrency", "budget", "seed", "bertscore_model",
}  # fmt: skip
NOT_APPLICABLE = "-"
DATASET_KINDS = ("storysumm", "squality", "documents")


@dataclass(frozen=True)
class DatasetSpec:
    """Which file to load and how much of it."""

    kind: str  # storysumm | squality | documents
    path: str = ""  # a file's absolute path, or a dataset name (eval.datasets.resolve)
    paths: tuple[str, ...] = ()
    limit: int | None = None
    name: str = ""

    @property
    def label(self) -> str:
        """Name used in cell ids and tables."""
        return self.name or self.kind

    def load(self) -> Dataset:
        """The dataset's items (limited)."""
        data = load(self.kind, self.path or None, paths=list(self.paths) or None)
        return data.limited(self.limit)


@dataclass(frozen=True)
class Cell:
    """One point of the grid: a dataset under one combination of settings."""

    dataset: DatasetSpec
    model: str
    strategy: str
    chunk_size: int
    loop: tuple[tuple[str, Any], ...]
    task: str

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter that defines the cell (what rows and tables carry)."""
        return {
            "task": self.task,
            "dataset": self.dataset.label,
            "dataset_path": self.dataset.path or list(self.dataset.paths),
            "model": self.model,
            "strategy": self.strategy,
            "chunk_size": self.chunk_size,
            "loop": dict(self.loop),
        }

    @property
    def id(self) -> str:
        """Readable and unique: a slug of the settings plus a hash of all of them."""
        digest = hashlib.sha256(json.dumps(self.params, sort_keys=True).encode()).hexdigest()[:6]
        loop = "-".join(f"{k[:4]}{v}" for k, v in self.loop) or "noloop"
        parts = [self.dataset.label, self.model, self.strategy, str(self.chunk_size), loop, digest]
        return slug("-".join(parts).replace(":", "-"))[:34].rstrip("-") + "-" + digest


@dataclass
class ExperimentConfig:
    """A validated experiment configuration."""

    name: str
    out_dir: Path
    task: str = "refine"
    metrics: list[str] = field(default_factory=list)
    datasets: list[DatasetSpec] = field(default_factory=list)
    models: list[str] = field(default_factory=lambda: [""])
    strategies: list[str] = field(default_factory=lambda: ["hierarchical"])
    chunk_sizes: list[int] = field(default_factory=lambda: [2048])
    loops: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    context: dict[str, Any] = field(default_factory=dict)
    base_url: str = ""
    cache_dir: Path | None = None
    concurrency: int = 1
    llm_concurrency: int = 4
    budget: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    bertscore_model: str = ""

    @property
    def cache_path(self) -> Path:
        """The one LLM cache of the whole experiment."""
        return self.cache_dir or self.out_dir / "cache"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base: Path | None = None) -> ExperimentConfig:
        """Validate a parsed config; relative dataset paths resolve against ``base`` (the config's folder)."""
        if not isinstance(data, Mapping):
            raise ConfigError("the experiment config must be a mapping of settings")
        unknown = sorted(set(data) - CONFIG_KEYS)
        if unknown:
            raise ConfigError(f"unknown config key(s) {unknown}; known: {sorted(CONFIG_KEYS)}")
        task = str(data.get("task", "refine"))
        if task not in TASKS:
            raise ConfigError(f"task must be one of {TASKS}, not {task!r}")
        metrics = list(data.get("metrics") or DEFAULT_METRICS[task])
        bad = sorted(set(metrics) - set(METRICS))
        if bad:
            raise ConfigError(f"unknown metric(s) {bad}; known: {METRICS}")
        if not data.get("datasets"):
            raise ConfigError(
                "the config names no datasets; add e.g. datasets: [{kind: storysumm, limit: 3}]"
            )
        datasets = [_dataset_spec(d, base) for d in data["datasets"]]
        if task == "score" and any(d.kind != "storysumm" for d in datasets):
            raise ConfigError("task 'score' needs datasets that give summaries (kind: storysumm)")
        loops = [_mapping(loop or {}, "each of loops") for loop in _list(data, "loops", [{}])]
        for loop in loops:
            extra = sorted(set(loop) - set(LOOP_KEYS))
            if extra:
                raise ConfigError(f"unknown loop setting(s) {extra}; known: {LOOP_KEYS}")
        config = cls(
            name=str(data.get("name") or "experiment"),
            out_dir=Path(
                str(data.get("out_dir") or Path("runs") / f"eval-{slug(str(data.get('name') or 'x'))}")
            ),
            task=task,
            metrics=metrics,
            datasets=datasets,
            models=[str(m) for m in _list(data, "models", [""])],
            strategies=[str(s) for s in _list(data, "strategies", ["hierarchical"])],
            chunk_sizes=[_number(c, "each of chunk_sizes", int) for c in _list(data, "chunk_sizes", [2048])],
            loops=loops,
            context=_mapping(data.get("context") or {}, "context"),
            base_url=str(data.get("base_url") or ""),
            cache_dir=Path(str(data["cache_dir"])) if data.get("cache_dir") else None,
            concurrency=_number(data.get("concurrency") or 1, "concurrency", int),
            llm_concurrency=_number(data.get("llm_concurrency") or 4, "llm_concurrency", int),
            budget={
                k: _number(v, f"budget {k}", float)
                for k, v in _mapping(data.get("budget") or {}, "budget").items()
            },
            seed=_number(data.get("seed") or 0, "seed", int),
            bertscore_model=str(data.get("bertscore_model") or ""),
        )
        bad_budget = sorted(set(config.budget) - {"max_calls", "max_usd"})
        if bad_budget:
            raise ConfigError(f"unknown budget key(s) {bad_budget}; use max_calls and/or max_usd")
        if config.concurrency < 1:
            raise ConfigError("concurrency must be >= 1")
        for cell in cells(config):  # fail now, not after an hour, on a bad setting
            cell_context(config, cell, config.out_dir)
        return config


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} must be a mapping of settings (name: value), not {value!r}")
    return dict(value)


def _list(data: Mapping[str, Any], key: str, default: list[Any]) -> list[Any]:
    value = data.get(key) or default
    if not isinstance(value, list):
        raise ConfigError(f"{key} must be a list (e.g. {key}: [{value!r}]), not {value!r}")
    return value


N = TypeVar("N", int, float)


def _number(value: Any, what: str, kind: type[N]) -> N:
    """A number of a config, from a number or its text; anything else (a list, a mapping) is one clear error."""
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError
        number = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{what} must be a{'n integer' if kind is int else ' number'}, not {value!r}"
        ) from None
    return number


def _dataset_spec(raw: Any, base: Path | None) -> DatasetSpec:
    if isinstance(raw, str):
        raw = {"kind": raw}
    if not isinstance(raw, Mapping) or "kind" not in raw:
        raise ConfigError(f"each dataset needs a 'kind' (storysumm, squality, documents): got {raw!r}")
    if raw["kind"] not in DATASET_KINDS:
        raise ConfigError(f"unknown dataset kind {raw['kind']!r}; known: {DATASET_KINDS}")
    extra = sorted(set(raw) - {"kind", "path", "paths", "limit", "name"})
    if extra:
        raise ConfigError(f"unknown dataset setting(s) {extra}")

    def locate(p: str, kind: str | None) -> str:
        """A file's absolute path, or a dataset name as given (it names the same data wherever it is read)."""
        try:
            found = resolve(p, kind, base)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        given = Path(p).expanduser()
        is_file = (given if given.is_absolute() or base is None else base / given).is_file()
        return p if split_name(p) and not is_file else str(found.resolve())

    kind = str(raw["kind"])
    limit = raw.get("limit")
    return DatasetSpec(
        kind=kind,
        path=locate(str(raw["path"]), kind) if raw.get("path") else "",
        paths=tuple(locate(str(p), kind) for p in raw.get("paths") or ()),
        limit=int(limit) if limit is not None else None,
        name=str(raw.get("name") or ""),
    )


def load_config(path: str | Path) -> ExperimentConfig:
    """Read a YAML or JSON experiment config."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file {file} does not exist")
    text = file.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{file} is not valid {'JSON' if file.suffix == '.json' else 'YAML'}: {exc}"
        ) from None
    return ExperimentConfig.from_dict(data or {}, base=file.resolve().parent)


def cells(config: ExperimentConfig) -> list[Cell]:
    """The grid, in a stable order; axes a task ignores collapse to one value."""
    strategies = config.strategies if config.task == "refine" else [NOT_APPLICABLE]
    loops = config.loops if config.task == "refine" else [{}]
    grid = []
    for dataset in config.datasets:
        for model in config.models:
            for strategy in strategies:
                for chunk in config.chunk_sizes:
                    for loop in loops:
                        grid.append(
                            Cell(dataset, model, strategy, chunk, tuple(sorted(loop.items())), config.task)
                        )
    return grid


def cell_context(config: ExperimentConfig, cell: Cell, run_dir: Path) -> Context:
    """The Context of a cell's items: config-wide settings, the cell's own, then the experiment's paths."""
    values: dict[str, Any] = dict(config.context)
    if cell.model:
        values["model"] = cell.model
    if config.base_url:
        values["base_url"] = config.base_url
    if cell.strategy != NOT_APPLICABLE:
        values["strategy"] = cell.strategy
    values["chunk_size"] = cell.chunk_size
    values.update(dict(cell.loop))
    values["cache_dir"] = str(config.cache_path)
    values["run_dir"] = str(run_dir)
    values.setdefault("concurrency", config.llm_concurrency)
    try:
        return Context(**values)
    except TypeError as exc:
        raise ConfigError(f"bad context setting in the config: {exc}") from None


def shortcut_config(
    kind: str,
    file: str | Path,
    *,
    model: str = "",
    base_url: str = "",
    out_dir: str | Path | None = None,
    limit: int | None = None,
    concurrency: int = 1,
    metrics: Sequence[str] | None = None,
    context: Mapping[str, Any] | None = None,
) -> ExperimentConfig:
    """The config behind ``storyjudge eval storysumm DATASET`` and ``storyjudge eval squality DATASET``.

    STORYSUMM: score the given summaries (task ``score``). SQuALITY: summarize and refine each story (task
    ``refine``) and compare the summaries with the question-1 references. The default output directory depends
    on the file's content and the model (not the limit), so the same command resumes where it stopped and a
    later run without ``--limit`` reuses the items a limited run finished.
    """
    try:
        path = resolve(file, kind)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:8]
    task = "score" if kind == "storysumm" else "refine"
    settings = dict(context or {})
    strategy = settings.pop("strategy", None) or "hierarchical"  # grid axes, not plain context settings
    chunk_size = settings.pop("chunk_size", None) or 2048
    name = f"{kind}-{digest}-{slug(model or 'default')}"
    data: dict[str, Any] = {
        "name": name,
        "out_dir": str(out_dir or Path("runs") / f"eval-{name}"),
        "task": task,
        "metrics": list(metrics or (["factscore"] if task == "score" else ["factscore", "rouge", "stats"])),
        "datasets": [{"kind": kind, "path": str(path.resolve()), "limit": limit}],
        "models": [model],
        "strategies": [strategy],
        "chunk_sizes": [chunk_size],
        "base_url": base_url,
        "concurrency": concurrency,
        "context": settings,
    }
    return ExperimentConfig.from_dict(data)
