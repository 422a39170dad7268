"""The score curve across rounds, drawn as SVG."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from storyjudge.core.coverage import card_reliable, reliability_text


@dataclass
class Series:
    """One line of the score chart."""

    name: str
    css: str
    points: list[tuple[float, float, int, float]]  # x, y, iteration, value

    @property
    def polyline(self) -> str:
        """SVG ``points`` attribute."""
        return " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in self.points)


@dataclass
class Mark:
    """A round drawn apart on the chart: rejected by a guard, or its score does not count; never the best."""

    x: float
    y: float
    iteration: int
    why: str


@dataclass
class CurveView:
    """The NFS (and BooookScore) chart across iterations."""

    width: int
    height: int
    left: int
    top: int
    plot_w: int
    plot_h: int
    series: list[Series]
    x_ticks: list[tuple[float, int]]
    y_ticks: list[tuple[float, str]]
    best_x: float | None
    rejected: list[Mark] = field(default_factory=list)
    unreliable: list[Mark] = field(default_factory=list)  # accepted, but its score does not count


def curve_view(iterations: list[dict[str, Any]], best_iteration: int | None) -> CurveView:
    """Scale the scores of the rounds (scored, in order) into a small line chart (scores live in [0, 1])."""
    width, height, left, top, right, bottom = 560, 240, 48, 16, 16, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    numbers = [int(it.get("iteration", 0)) for it in iterations]
    low, high = min(numbers), max(numbers)
    span = (high - low) or 1

    def x_of(number: int) -> float:
        return left + (plot_w / 2 if high == low else (number - low) / span * plot_w)

    def y_of(value: float) -> float:
        return top + (1.0 - max(0.0, min(1.0, value))) * plot_h

    nfs, coherence = Series("NarrativeFactScore", "nfs", []), Series("BooookScore", "coh", [])
    rejected: list[Mark] = []
    unreliable: list[Mark] = []
    for it, number in zip(iterations, numbers, strict=True):
        card = it.get("factscore") or {}
        for line, value in ((nfs, card.get("score")), (coherence, (it.get("coherence") or {}).get("score"))):
            if value is not None:
                line.points.append((x_of(number), y_of(float(value)), number, float(value)))
        if card.get("score") is None:
            continue
        at = (x_of(number), y_of(float(card["score"])), number)
        if not it.get("accepted", True):
            rejected.append(Mark(*at, str(it.get("note") or "not accepted")))
        elif not card_reliable(card):
            unreliable.append(Mark(*at, reliability_text(card)))
    series = [nfs, coherence] if coherence.points else [nfs]
    return CurveView(
        rejected=rejected,
        unreliable=unreliable,
        width=width,
        height=height,
        left=left,
        top=top,
        plot_w=plot_w,
        plot_h=plot_h,
        series=series,
        x_ticks=[(x_of(n), n) for n in numbers],
        y_ticks=[(y_of(v), f"{v:.2f}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)],
        best_x=x_of(best_iteration) if best_iteration is not None and best_iteration in numbers else None,
    )
