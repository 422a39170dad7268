"""Experiment configuration: the grid of settings, its validation, and the Context of each cell.

A config (YAML or JSON) names datasets, a task (``refine``: summarize, refine and score every round;
``score``: judge the summaries STORYSUMM gives) and the grid's axes: models x strategies x chunk sizes x loop
settings (``score`` ignores strategy and loop). Every setting is checked at load, not after an hour of runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from eval.datasets import Dataset, load, resolve, split_name
from storyjudge.core.context import ConfigError, Context, describe_errors
from storyjudge.core.metrics import check_spec
from storyjudge.core.rundir import slug

Task = Literal["refine", "score"]
Metric = Literal["factscore", "coherence", "rouge", "bertscore", "stats"]


def _metric_name(value: str) -> str:
    """A built-in metric's name, or an added metric's spec that loads (PATH.py:ClassName, an installed name)."""
    if value in get_args(Metric) or ".py:" in value:
        return value if value in get_args(Metric) else check_spec(value)
    try:
        return check_spec(value)  # an installed metric's name
    except ValueError:
        names = ", ".join(repr(m) for m in get_args(Metric))
        raise ValueError(
            f"must be {names}, PATH.py:ClassName or an installed metric's name, not {value!r}"
        ) from None


MetricName = Annotated[str, AfterValidator(_metric_name)]
DEFAULT_METRICS: dict[str, list[Metric]] = {
    "refine": ["factscore", "coherence", "rouge", "stats"],
    "score": ["factscore", "stats"],
}
LoopKey = Literal[
    "max_iterations", "target_score", "min_delta", "patience", "coherence_guard", "coherence_margin"
]
NOT_APPLICABLE = "-"


class DatasetSpec(BaseModel):
    """Which file to load and how much of it (a bare name, ``- storysumm``, is its kind)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["storysumm", "squality", "documents"] = Field(
        description="the dataset's format: storysumm, squality or documents"
    )
    path: str = ""  # a file's absolute path, or a dataset name (eval.datasets.resolve)
    paths: tuple[str, ...] = ()
    limit: int | None = Field(default=None, ge=0)
    name: str = ""

    @model_validator(mode="before")
    @classmethod
    def _kind_alone(cls, raw: Any) -> Any:
        return {"kind": raw} if isinstance(raw, str) else raw

    @property
    def label(self) -> str:
        """Name used in cell ids and tables."""
        return self.name or self.kind

    def load(self) -> Dataset:
        """The dataset's items (limited)."""
        return load(self.kind, self.path or None, paths=list(self.paths) or None).limited(self.limit)

    def located(self, base: Path | None) -> DatasetSpec:
        """The spec with each file's absolute path (``base``: the config's folder); a dataset name stays a name."""

        def locate(p: str) -> str:
            found = resolve(p, self.kind, base)  # a ValueError: the config's error
            is_file = ((base or Path()) / Path(p).expanduser()).is_file()
            return p if split_name(p) and not is_file else str(found.resolve())

        paths = tuple(locate(p) for p in self.paths)
        return self.model_copy(update={"path": locate(self.path) if self.path else "", "paths": paths})


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


class ExperimentConfig(BaseModel):
    """A validated experiment configuration: its types are the checks, and a key left empty takes its default."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    name: str = "experiment"
    out_dir: Path = Path()  # empty: runs/eval-<name>
    task: Task = "refine"
    metrics: list[MetricName] = []  # empty: the task's DEFAULT_METRICS; added ones ride on factscore
    datasets: list[DatasetSpec] = Field(
        min_length=1, description="the datasets to run, e.g. datasets: [{kind: storysumm, limit: 3}]"
    )
    models: list[str] = [""]
    strategies: list[Literal["hierarchical", "incremental"]] = ["hierarchical"]
    chunk_sizes: list[int] = [2048]
    loops: list[dict[LoopKey, Any]] = [{}]
    context: dict[str, Any] = {}
    base_url: str = ""
    cache_dir: Path | None = None
    concurrency: int = Field(default=1, ge=1)
    llm_concurrency: int = Field(default=4, ge=1)
    budget: dict[Literal["max_calls", "max_usd"], float] = {}
    seed: int = 0
    bertscore_model: str = ""

    @model_validator(mode="before")
    @classmethod
    def _empty_is_default(cls, data: Any) -> Any:
        """``models:`` with nothing after it (None), an empty list or text: the key's default."""
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if v is not None and v != [] and v != ""}
        return data

    @model_validator(mode="after")
    def _defaults_and_task(self) -> ExperimentConfig:
        if self.out_dir == Path():
            self.out_dir = (
                Path("runs") / f"eval-{slug(self.name if 'name' in self.model_fields_set else 'x')}"
            )
        if not set(self.metrics) & set(get_args(Metric)):
            self.metrics = [*DEFAULT_METRICS[self.task], *self.metrics]
        if self.added_metrics and "factscore" not in self.metrics:
            raise ValueError(
                "added metrics are scored with factscore on each round: add factscore to metrics"
            )
        if self.task == "score" and any(d.kind != "storysumm" for d in self.datasets):
            raise ValueError("task 'score' needs datasets that give summaries (kind: storysumm)")
        return self

    @property
    def added_metrics(self) -> list[str]:
        """The metrics named by file or entry point (``core.metrics``): each cell's Context scores them."""
        return [m for m in self.metrics if m not in get_args(Metric)]

    @property
    def cache_path(self) -> Path:
        """The one LLM cache of the whole experiment."""
        return self.cache_dir or self.out_dir / "cache"

    @classmethod
    def from_dict(
        cls, data: Any, *, base: Path | None = None, source: str = "experiment config"
    ) -> ExperimentConfig:
        """Validate a parsed config and every cell's Context; paths resolve against ``base`` (the config's folder)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: must be a mapping of settings (name: value), not {data!r}")
        if base is not None and isinstance(data.get("metrics"), list):  # a metric's file: beside the config
            data = {**data, "metrics": [_beside(m, base) for m in data["metrics"]]}
        try:
            config = cls.model_validate(data)
            config.datasets = [spec.located(base) for spec in config.datasets]
            for cell in cells(config):
                cell_context(config, cell, config.out_dir)
        except ValidationError as exc:
            raise ConfigError(describe_errors(exc, cls, prefix=f"{source}: ")) from None
        except ValueError as exc:  # a dataset that cannot be found, a setting a Context refuses
            raise ConfigError(f"{source}: {str(exc)[:1].lower()}{str(exc)[1:]}") from None
        return config


def _beside(spec: Any, base: Path) -> Any:
    """A ``PATH.py:ClassName`` spec with a relative path made relative to the config's folder."""
    file, sep, name = str(spec).rpartition(":")
    if not (sep and file.endswith(".py")) or Path(file).is_absolute():
        return spec
    return f"{base / file}:{name}"


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
            f"{file} is not valid {'JSON' if file.suffix == '.json' else 'YAML'}: {' '.join(str(exc).split())}"
        ) from None
    return ExperimentConfig.from_dict(data or {}, base=file.resolve().parent, source=str(file))


def cells(config: ExperimentConfig) -> list[Cell]:
    """The grid, in a stable order; axes a task ignores collapse to one value."""
    strategies = config.strategies if config.task == "refine" else [NOT_APPLICABLE]
    loops = config.loops if config.task == "refine" else [{}]
    axes = itertools.product(config.datasets, config.models, strategies, config.chunk_sizes, loops)
    return [Cell(d, m, s, c, tuple(sorted(loop.items())), config.task) for d, m, s, c, loop in axes]


def cell_context(config: ExperimentConfig, cell: Cell, run_dir: Path) -> Context:
    """The Context of a cell's items: config-wide settings, the cell's own, then the experiment's paths."""
    strategy = "" if cell.strategy == NOT_APPLICABLE else cell.strategy
    given = {"model": cell.model, "base_url": config.base_url, "strategy": strategy}  # those set
    values: dict[str, Any] = {**config.context, **{key: value for key, value in given.items() if value}}
    values.update(
        dict(cell.loop), chunk_size=cell.chunk_size, cache_dir=str(config.cache_path), run_dir=str(run_dir)
    )
    values.setdefault("concurrency", config.llm_concurrency)
    if config.added_metrics:
        values["metrics"] = [*(values.get("metrics") or []), *config.added_metrics]
    return Context(**values)


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
    """The config of ``storyjudge eval storysumm|squality DATASET`` (score given summaries; refine stories).

    The output directory depends on the file's content and the model, not the limit, so a rerun resumes.
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
