"""Metrics a round is scored by: NarrativeFactScore, BooookScore, and any a researcher adds in one file.

A metric has a ``name``, the ``needs`` it reads (``RoundView`` fields) and ``card(view)`` returning at least
``score``. A user's metric is ``PATH.py:ClassName`` or an entry point of ``storyjudge.metrics``; a failing one
gets a card with ``score`` None and the ``error``, and the run goes on.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from storyjudge.core.coverage import describe_card

GROUP = "storyjudge.metrics"
SPEC_FORM = "write PATH.py:ClassName (a file and a metric class in it) or an installed metric's name"


class RoundView(BaseModel):
    """What a metric may read from a round: its summary, the story's scenes and CKG, the cards scored on it."""

    model_config = ConfigDict(frozen=True)

    iteration: int = 0
    summary: str = ""
    scenes: list[dict[str, Any]] = []
    ckg: dict[str, Any] = {}  # node-link JSON: characters are nodes (``id``, ``aliases``)
    factscore: dict[str, Any] | None = None
    coherence: dict[str, Any] | None = None

    @property
    def story(self) -> str:
        """The narrative's text, its scenes joined."""
        return "\n\n".join(str(scene.get("text", "")) for scene in self.scenes)

    @property
    def characters(self) -> dict[str, list[str]]:
        """The CKG's characters: canonical name -> the other names the story uses for them."""
        return {str(n["id"]): list(n.get("aliases") or []) for n in self.ckg.get("nodes") or []}


class Metric(Protocol):
    """A metric: its name, what of a round it reads, and its card of a round (``headline(card)`` optional)."""

    name: str
    needs: tuple[str, ...]

    def card(self, view: RoundView) -> Mapping[str, Any]:
        """The round's score card: ``score`` (None: none), and ``coverage``/``reliable`` where they apply."""
        ...


class NarrativeFactScore:
    """The paper's factuality score: the card the factscore graph made for the round."""

    name: str = "factscore"
    needs: tuple[str, ...] = ("factscore",)

    def card(self, view: RoundView) -> Mapping[str, Any]:
        """The round's NarrativeFactScore card."""
        return view.factscore or {"score": None}


class BooookScore:
    """Coherence: the card the coherence graph made for the round (when it scored one)."""

    name: str = "coherence"
    needs: tuple[str, ...] = ("coherence",)

    def card(self, view: RoundView) -> Mapping[str, Any]:
        """The round's BooookScore card."""
        return view.coherence or {"score": None}


BUILT_IN: dict[str, Metric] = {m.name: m for m in (NarrativeFactScore(), BooookScore())}
"""The cards every round has, from their own graphs: loadable by name like any metric, never added twice."""


class MetricSpecError(ValueError):
    """A metric that cannot be loaded; one line naming the spec and what to write."""


def headline(card: Mapping[str, Any]) -> str:
    """A card in words, the one wording every surface shows: the score (or why it does not count), coverage."""
    if card.get("error"):
        return f"failed: {card['error']}"
    return describe_card(card)


def load_metric(spec: str) -> Metric:
    """The metric a spec names: a built-in's name, ``PATH.py:ClassName`` or an installed entry point's name."""
    spec = spec.strip()
    if spec in BUILT_IN:
        return BUILT_IN[spec]
    file, sep, cls = spec.rpartition(":")
    if sep and file.endswith(".py"):
        path = Path(file).expanduser().resolve()
        return _from_file(spec, str(path), cls, path.stat().st_mtime if path.is_file() else 0.0)
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    if spec not in found:
        installed = f" (installed: {', '.join(sorted(found))})" if found else ""
        raise MetricSpecError(
            f"metric {spec!r} is neither a file's class nor an installed metric{installed}; {SPEC_FORM}."
        )
    return _instance(spec, found[spec].load(), found[spec].name)


@lru_cache(maxsize=32)
def _from_file(spec: str, path: str, cls: str, mtime: float) -> Metric:
    """The metric class ``cls`` of the file at ``path``, instantiated (loaded again when the file changes)."""
    if not Path(path).is_file():
        raise MetricSpecError(f"metric {spec!r}: no file {path}; {SPEC_FORM}.")
    name = "storyjudge_metric_" + hashlib.sha256(f"{path}{mtime}".encode()).hexdigest()[:12]
    loader = importlib.util.spec_from_file_location(name, path)
    if loader is None or loader.loader is None:
        raise MetricSpecError(f"metric {spec!r}: {path} is not a Python file; {SPEC_FORM}.")
    module = importlib.util.module_from_spec(loader)
    try:
        loader.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file: say what broke, in one line
        raise MetricSpecError(
            f"metric {spec!r}: {path} does not load ({type(exc).__name__}: {exc})."
        ) from None
    if not hasattr(module, cls):
        raise MetricSpecError(f"metric {spec!r}: {path} has no class {cls!r}; {SPEC_FORM}.")
    return _instance(spec, getattr(module, cls), None)


def _instance(spec: str, target: Any, name: str | None) -> Metric:
    """A metric object from a class (made with no arguments) or an object; its name the entry point's if any."""
    try:
        metric = target() if isinstance(target, type) else target
    except Exception as exc:  # noqa: BLE001
        raise MetricSpecError(
            f"metric {spec!r}: {target!r}() failed ({type(exc).__name__}: {exc})."
        ) from None
    if not callable(getattr(metric, "card", None)):
        raise MetricSpecError(
            f"metric {spec!r} is not a metric: give its class a name and a card(view) method that returns "
            "{'score': ...} (see examples/metrics/entity_coverage.py)."
        )
    if name or not isinstance(getattr(metric, "name", None), str):
        metric.name = name or type(metric).__name__
    return metric


def round_cards(specs: Sequence[str], view: RoundView) -> dict[str, dict[str, Any]]:
    """Each extra metric's card of a round, by name, with its ``headline``; a failing metric's card says why."""
    cards: dict[str, dict[str, Any]] = {}
    for spec in specs:
        name = spec
        try:
            metric = load_metric(spec)
            name = metric.name
            card = dict(metric.card(view))
            score = card.get("score")
            if score is not None and not (isinstance(score, (int, float)) and math.isfinite(score)):
                raise ValueError(f"its score must be a number or None, not {score!r}")
            card["score"] = None if score is None else float(score)
            worded = getattr(metric, "headline", None)
            card["headline"] = str(worded(card)) if callable(worded) else headline(card)
            cards[name] = card
        except Exception as exc:  # noqa: BLE001 - a user's metric must never end the run: its card says why
            failed = {"score": None, "error": f"{type(exc).__name__}: {exc}"}
            cards[name] = {**failed, "headline": headline(failed)}
    return cards


def check_spec(spec: str) -> str:
    """A spec that loads, with a file's path made absolute (for Context validation); MetricSpecError otherwise."""
    if spec.strip() in BUILT_IN:
        raise MetricSpecError(
            f"metric {spec!r} is built in and scored on every round; name only added metrics."
        )
    load_metric(spec)
    file, sep, cls = spec.strip().rpartition(":")
    return f"{Path(file).expanduser().resolve()}:{cls}" if sep and file.endswith(".py") else spec.strip()
