"""The self-contained run report: ``report.html`` in every run directory, readable offline in any browser.

Everything a reader needs to trust (or doubt) a score is on one page: the character knowledge graph drawn
as an interactive SVG, each iteration's summary with the sentences that carry unsupported facts highlighted
(feedback on hover), the per-fact table with the judge's rationale and the evidence it saw, the score curve
across iterations, and usage and cost. The page loads nothing: styles and scripts ship in
``storyjudge/apps/assets`` and are inlined, the graph's layout is computed here (networkx, seeded, so a report is
reproducible), and a Content-Security-Policy forbids every network fetch. All narrative text goes through
Jinja's autoescaping, so a story containing ``<script>`` stays text.

The web UI renders its graph and iteration panels with the same functions (:func:`ckg_html`,
:func:`iteration_html`), so the two never drift apart.
"""

from __future__ import annotations

import json
import math
import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import networkx as nx
from markupsafe import Markup

from storyjudge.core.coverage import card_reliable, judge_failure, reliability_text
from storyjudge.core.keptruns import RUNS_FOLDER
from storyjudge.core.passages import span_text
from storyjudge.core.rundir import RunDir
from storyjudge.core.runrecord import load_run
from storyjudge.core.summary_stats import words
from storyjudge.core.usage import cost_text, price_known

ASSET_PACKAGE = "storyjudge.apps"
ASSET_DIR = "assets"
GRAPH_SEED = 7
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
LABEL_PREDICATES = 2  # predicates written on an edge; the rest are in its tooltip and the character's panel
OPEN_WORDS = 600
"""Words of summaries a page shows open, in all; the other rounds' summaries start folded (a click opens them)."""
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


# ============================================================================================================
# assets and templates
# ============================================================================================================


def asset_text(name: str) -> str:
    """A file shipped in ``storyjudge/apps/assets`` (works from a wheel as well as from a checkout)."""
    return resources.files(ASSET_PACKAGE).joinpath(ASSET_DIR, name).read_text(encoding="utf-8")


def inline_asset(name: str) -> Markup:
    """An asset (our own CSS or JS) to paste into a ``<style>``/``<script>`` element unescaped."""
    text = asset_text(name)
    lowered = text.lower()
    if "</script" in lowered or "</style" in lowered:
        raise ValueError(f"asset {name} contains a closing tag that would end its inline element early")
    return Markup(text)


@cache
def environment() -> jinja2.Environment:
    """Jinja environment over the shipped templates; autoescape on for every template."""
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(asset_text),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["score"] = format_score
    env.filters["delta"] = format_delta
    env.filters["thousands"] = lambda n: f"{int(n or 0):,}"
    env.filters["usd"] = lambda x: f"${float(x or 0):.4f}"
    env.filters["cost_of"] = lambda u, spec: format_usd(u.get("cost_usd"), price_known(spec))
    env.filters["cost"] = lambda usage: cost_text(usage)
    return env


def format_usd(value: float | None, known: bool = True) -> str:
    """``$0.0123``, or ``price unknown`` for a model without a list price."""
    return f"${float(value or 0):.4f}" if known else "price unknown"


def _macro(name: str) -> Any:
    return getattr(environment().get_template("parts.html.j2").module, name)


def format_score(value: float | None) -> str:
    """A score as 0.625, or n/a when nothing could be judged."""
    return "n/a" if value is None else f"{value:.3f}"


def format_delta(value: float | None) -> str:
    """A score change with its sign (+0.125), or an empty string when there is none to compare."""
    return "" if value is None else f"{value:+.3f}"


# ============================================================================================================
# the character knowledge graph
# ============================================================================================================


@dataclass
class Relation:
    """One predicate between two characters (or a state, when ``other`` is empty)."""

    predicate: str
    other: str
    count: int
    scenes: list[str]


@dataclass
class NodeView:
    """A character as drawn: position, size, colour, and what its detail panel lists."""

    key: str
    name: str
    aliases: list[str]
    x: float
    y: float
    r: float
    degree: int
    color: str
    scenes: list[str] = field(default_factory=list)
    states: list[Relation] = field(default_factory=list)
    outgoing: list[Relation] = field(default_factory=list)
    incoming: list[Relation] = field(default_factory=list)


@dataclass
class EdgeView:
    """The relations from one character to another, drawn as one curved arrow with a label."""

    source: str
    target: str
    path: str
    label_x: float
    label_y: float
    label: str
    title: str
    width: float


@dataclass
class GraphView:
    """Everything the CKG template draws."""

    width: int
    height: int
    nodes: list[NodeView]
    edges: list[EdgeView]
    states: list[tuple[str, Relation]]
    stats: dict[str, int]
    extraction: str = ""  # how the graph was extracted (samples, threshold), when the file says


def ckg_graph(data: dict[str, Any] | None) -> nx.MultiDiGraph:
    """A node-link CKG as a MultiDiGraph, tolerant of both ``edges`` and ``links`` keys.

    An edge may carry one ``predicate`` or a list of ``predicates`` (strings or dicts with ``predicate``,
    ``count``, ``scenes``); each becomes one parallel edge, so the drawing does not depend on the stored form.
    """
    graph = nx.MultiDiGraph()
    if not data:
        return graph
    for node in data.get("nodes") or []:
        graph.add_node(str(node["id"]), **{k: v for k, v in node.items() if k != "id"})
    for edge in data.get("edges") or data.get("links") or []:
        source, target = str(edge["source"]), str(edge["target"])
        base = {k: v for k, v in edge.items() if k not in ("source", "target", "key", "predicates")}
        listed = edge.get("predicates")
        if not listed:
            graph.add_edge(source, target, **base)
            continue
        for item in listed:
            extra = item if isinstance(item, dict) else {"predicate": str(item)}
            graph.add_edge(source, target, **{**base, **extra})
    return graph


def _display_name(graph: nx.MultiDiGraph, node: str) -> str:
    attrs = graph.nodes[node]
    return str(attrs.get("name") or attrs.get("label") or node)


def _state_text(predicate: str) -> str:
    text = predicate.strip()
    return text[len("state:") :].strip() if text.lower().startswith("state:") else text


def _relation(attrs: dict[str, Any], other: str) -> Relation:
    scenes = attrs.get("scenes") or []
    return Relation(
        predicate=str(attrs.get("predicate") or attrs.get("relation") or "related to"),
        other=other,
        count=int(attrs.get("count") or attrs.get("weight") or 1),
        scenes=[str(s) for s in (scenes if isinstance(scenes, list) else [scenes])],
    )


def _layout(
    graph: nx.MultiDiGraph, width: float, height: float, margin: float
) -> dict[str, tuple[float, float]]:
    """Seeded spring layout of the characters (self-loops ignored), scaled into the drawing area."""
    simple = nx.Graph()
    simple.add_nodes_from(graph.nodes)
    simple.add_edges_from((u, v) for u, v in graph.edges() if u != v)
    count = simple.number_of_nodes()
    if count == 0:
        return {}
    if count == 1:
        return {next(iter(simple.nodes)): (width / 2, height / 2)}
    raw = nx.spring_layout(simple, seed=GRAPH_SEED, k=1.8 / math.sqrt(count), iterations=200)
    xs = [float(p[0]) for p in raw.values()]
    ys = [float(p[1]) for p in raw.values()]
    span_x = (max(xs) - min(xs)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0
    return {
        node: (
            margin + (float(p[0]) - min(xs)) / span_x * (width - 2 * margin),
            margin + (float(p[1]) - min(ys)) / span_y * (height - 2 * margin),
        )
        for node, p in raw.items()
    }


def _colors(graph: nx.MultiDiGraph) -> dict[str, str]:
    """One colour per community of characters, so factions read at a glance."""
    simple = nx.Graph()
    simple.add_nodes_from(graph.nodes)
    simple.add_edges_from((u, v) for u, v in graph.edges() if u != v)
    if simple.number_of_edges() == 0:
        return {node: PALETTE[0] for node in simple.nodes}
    communities = nx.community.greedy_modularity_communities(simple)
    colors: dict[str, str] = {}
    for n, members in enumerate(sorted(communities, key=lambda c: (-len(c), sorted(c)))):
        for node in members:
            colors[node] = PALETTE[n % len(PALETTE)]
    return colors


def _edge_geometry(
    start: tuple[float, float], end: tuple[float, float], r_start: float, r_end: float
) -> tuple[str, float, float]:
    """A gently curved path between two circles (reverse edges bend the other way) and its midpoint."""
    (x1, y1), (x2, y2) = start, end
    dx, dy = x2 - x1, y2 - y1
    dist = math.hypot(dx, dy) or 1.0
    nx_, ny_ = -dy / dist, dx / dist
    bend = min(60.0, 0.12 * dist)
    cx, cy = (x1 + x2) / 2 + nx_ * bend, (y1 + y2) / 2 + ny_ * bend

    def toward(px: float, py: float, qx: float, qy: float, by: float) -> tuple[float, float]:
        length = math.hypot(qx - px, qy - py) or 1.0
        return px + (qx - px) / length * by, py + (qy - py) / length * by

    sx, sy = toward(x1, y1, cx, cy, r_start)
    ex, ey = toward(x2, y2, cx, cy, r_end + 3)
    mid_x = 0.25 * sx + 0.5 * cx + 0.25 * ex
    mid_y = 0.25 * sy + 0.5 * cy + 0.25 * ey
    return f"M{sx:.1f},{sy:.1f} Q{cx:.1f},{cy:.1f} {ex:.1f},{ey:.1f}", mid_x, mid_y


def graph_view(data: dict[str, Any] | None) -> GraphView:
    """Lay out and describe a CKG for drawing: characters sized by degree, relations grouped per pair."""
    graph = ckg_graph(data)
    count = graph.number_of_nodes()
    width = int(max(640.0, min(960.0, 240 * math.sqrt(max(count, 1)))) * max(1.0, math.sqrt(count / 30)))
    height = int(width * 0.62)
    positions = _layout(graph, width, height, margin=70)
    colors = _colors(graph)
    keys = {node: f"n{i}" for i, node in enumerate(graph.nodes)}
    names = {node: _display_name(graph, node) for node in graph.nodes}

    pairs: dict[tuple[str, str], list[Relation]] = defaultdict(list)
    views: dict[str, NodeView] = {}
    for node in graph.nodes:
        attrs = graph.nodes[node]
        aliases = [str(a) for a in attrs.get("aliases") or [] if str(a) != names[node]]
        degree = sum(1 for u, v in graph.in_edges(node) if u != v) + sum(
            1 for u, v in graph.out_edges(node) if u != v
        )
        x, y = positions[node]
        scenes = attrs.get("scenes") or []
        views[node] = NodeView(
            key=keys[node],
            name=names[node],
            aliases=aliases,
            x=round(x, 1),
            y=round(y, 1),
            r=round(min(30.0, 7.0 + 3.2 * math.sqrt(degree)), 1),
            degree=degree,
            color=colors.get(node, PALETTE[0]),
            scenes=[str(s) for s in scenes] if isinstance(scenes, list) else [],
        )
    states: list[tuple[str, Relation]] = []
    for source, target, attrs in graph.edges(data=True):
        if source == target:
            state = _relation(attrs, "")
            state.predicate = _state_text(state.predicate)
            views[source].states.append(state)
            states.append((names[source], state))
            continue
        pairs[(source, target)].append(_relation(attrs, names[target]))
        views[source].outgoing.append(_relation(attrs, names[target]))
        views[target].incoming.append(_relation(attrs, names[source]))
    for view in views.values():
        for relations in (view.states, view.outgoing, view.incoming):
            relations.sort(key=lambda r: (-r.count, r.other, r.predicate))

    edges: list[EdgeView] = []
    for (source, target), relations in pairs.items():
        relations.sort(key=lambda r: (-r.count, r.predicate))
        path, mid_x, mid_y = _edge_geometry(
            positions[source], positions[target], views[source].r, views[target].r
        )
        shown = "; ".join(r.predicate for r in relations[:LABEL_PREDICATES])
        more = len(relations) - LABEL_PREDICATES
        label = shown + (f" +{more}" if more > 0 else "")
        title = "\n".join(
            f"{names[source]} -[{r.predicate}]-> {names[target]} (x{r.count})" for r in relations
        )
        total = sum(r.count for r in relations)
        edges.append(
            EdgeView(
                source=keys[source],
                target=keys[target],
                path=path,
                label_x=round(mid_x, 1),
                label_y=round(mid_y, 1),
                label=label,
                title=title,
                width=round(1.0 + math.log1p(total) * 0.8, 2),
            )
        )
    states.sort(key=lambda item: (item[0], -item[1].count))
    nodes = sorted(views.values(), key=lambda v: v.degree)  # hubs drawn last, on top
    stats = {
        "characters": count,
        "relations": sum(len(r) for r in pairs.values()),
        "pairs": len(pairs),
        "states": len(states),
    }
    return GraphView(
        width=width,
        height=height,
        nodes=nodes,
        edges=edges,
        states=states,
        stats=stats,
        extraction=extraction_note((data or {}).get("graph") or {}),
    )


def extraction_note(meta: dict[str, Any]) -> str:
    """One line on how the CKG was extracted, from the graph attributes the index stores."""
    parts = []
    if meta.get("model"):
        parts.append(f"by {meta['model']}")
    if meta.get("samples"):
        parts.append(f"{meta['samples']} extraction sample(s) per scene")
    if meta.get("threshold") is not None and meta.get("min_count") is not None:
        parts.append(f"predicate threshold {meta['threshold']} (kept at {meta['min_count']}+ occurrences)")
    if meta.get("failed_extractions"):
        parts.append(f"{meta['failed_extractions']} extraction(s) could not be parsed")
    if meta.get("guard_cuts"):
        parts.append(f"{meta['guard_cuts']} name merge(s) cut by the over-merge guard")
    return "; ".join(parts)


def ckg_html(data: dict[str, Any] | None) -> str:
    """The interactive CKG (SVG, character list and detail panels) as an HTML fragment."""
    return str(_macro("ckg_view")(graph_view(data)))


# ============================================================================================================
# iterations: highlighted summaries and per-fact tables
# ============================================================================================================


@dataclass
class SentenceView:
    """One summary sentence and the verdicts of the facts drawn from it."""

    index: int
    text: str
    status: str  # unsupported | unjudged | supported | nofacts
    verdicts: list[dict[str, Any]]


@dataclass
class Piece:
    """A run of summary text: a scored sentence, or the text between sentences."""

    text: str
    sentence: SentenceView | None = None


@dataclass
class EvidenceLink:
    """A fact row's pointer to one evidence passage."""

    anchor: str
    scene_id: str
    title: str
    score: float
    excerpt: bool


@dataclass
class FactRow:
    """One row of the per-fact table."""

    anchor: str
    fact_id: str
    sentence_index: int
    text: str
    status: str
    rationale: str
    feedback: str
    error: str
    query: str
    evidence: list[EvidenceLink]
    ckg_lines: list[str]
    correction: dict[str, str] | None = None  # a person's correction of the judge's verdict


@dataclass
class Passage:
    """An evidence text, shown once per iteration however many facts cite it."""

    anchor: str
    scene_id: str
    title: str
    text: str
    excerpt: bool


@dataclass
class IterationView:
    """Everything the iteration template draws."""

    iteration: int
    key: str
    score: float | None
    delta: float | None
    best: bool
    accepted: bool
    note: str
    coverage: float | None  # share of the summary's facts that were judged
    reliable: bool  # False: below the run's coverage floor, the number is not shown as a score
    coherence: float | None
    coherence_coverage: float | None
    coherence_reliable: bool
    counts: dict[str, int]
    pieces: list[Piece]
    facts: list[FactRow]
    passages: list[Passage]
    words: int  # of the summary
    open_summary: bool  # False: folded to one line, opened by a click
    corrections: int = 0  # verdicts a person corrected; the score counts them
    judge_check: dict[str, Any] | None = None  # the judge's record on the round's planted facts
    annotator_checks: list[dict[str, Any]] = field(default_factory=list)  # on planted confusing sentences
    unreliable_why: str = ""  # what makes the score not count, in words
    interval: str = ""  # "95% CI [0.200, 0.800] over 6 sentences"
    corrected: str = ""  # the judge-corrected estimate with its interval, or why there is none
    corrected_note: str = ""  # what the estimate assumes

    @property
    def flagged(self) -> int:
        """Summary sentences marked for an unsupported fact."""
        return sum(1 for p in self.pieces if p.sentence is not None and p.sentence.status == "unsupported")


def sentence_status(verdicts: list[dict[str, Any]]) -> str:
    """How a sentence is marked: any unsupported fact wins, then any unjudged one."""
    statuses = {v.get("status") for v in verdicts}
    if "unsupported" in statuses:
        return "unsupported"
    if "unjudged" in statuses:
        return "unjudged"
    return "supported" if verdicts else "nofacts"


def summary_pieces(summary: str, card: dict[str, Any] | None) -> list[Piece]:
    """The summary cut into its scored sentences, keeping the original text between them (paragraphs).

    Sentences are found in order in the summary; if one cannot be found (a splitter that normalised spaces),
    the sentences are shown joined by spaces instead, so no text is ever shown twice or lost.
    """
    per_sentence = (card or {}).get("per_sentence") or []
    if not per_sentence:
        return [Piece(summary)]
    by_sentence: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for verdict in (card or {}).get("verdicts") or []:
        by_sentence[int(verdict["fact"]["sentence_index"])].append(verdict)
    views = [
        SentenceView(
            index=int(entry["index"]),
            text=str(entry["sentence"]),
            status=sentence_status(by_sentence[int(entry["index"])]),
            verdicts=by_sentence[int(entry["index"])],
        )
        for entry in per_sentence
    ]
    pieces: list[Piece] = []
    cursor = 0
    for view in views:
        found = summary.find(view.text, cursor)
        if found < 0:
            joined: list[Piece] = []
            for n, other in enumerate(views):
                joined.extend([Piece(" ")] if n else [])
                joined.append(Piece(other.text, other))
            return joined
        if found > cursor:
            pieces.append(Piece(summary[cursor:found]))
        pieces.append(Piece(view.text, view))
        cursor = found + len(view.text)
    if cursor < len(summary):
        pieces.append(Piece(summary[cursor:]))
    return pieces


def _fact_rows(
    key: str, card: dict[str, Any], texts: Mapping[str, str]
) -> tuple[list[FactRow], list[Passage]]:
    passages: dict[tuple[str, str], Passage] = {}
    rows: list[FactRow] = []
    for n, verdict in enumerate(card.get("verdicts") or []):
        evidence = verdict.get("evidence") or {}
        links: list[EvidenceLink] = []
        for scene in evidence.get("scenes") or []:
            ident = (str(scene.get("id", "")), span_text(scene, texts))
            if ident not in passages:
                passages[ident] = Passage(
                    anchor=f"{key}-ev{len(passages)}",
                    scene_id=ident[0],
                    title=str(scene.get("title", "")),
                    text=ident[1],
                    excerpt=bool(scene.get("excerpt")),
                )
            links.append(
                EvidenceLink(
                    anchor=passages[ident].anchor,
                    scene_id=ident[0],
                    title=str(scene.get("title", "")),
                    score=float(scene.get("score") or 0.0),
                    excerpt=bool(scene.get("excerpt")),
                )
            )
        fact = verdict.get("fact") or {}
        rows.append(
            FactRow(
                anchor=f"{key}-f{n}",
                fact_id=str(fact.get("id", "")),
                sentence_index=int(fact.get("sentence_index", -1)),
                text=str(fact.get("text", "")),
                status=str(verdict.get("status", "unjudged")),
                rationale=str(verdict.get("rationale", "")),
                feedback=str(verdict.get("feedback", "")),
                error=str(verdict.get("error", "")),
                query=str(evidence.get("query", "")),
                evidence=links,
                ckg_lines=[str(line) for line in evidence.get("ckg_lines") or []],
                correction=verdict.get("correction"),
            )
        )
    return rows, list(passages.values())


def iteration_view(
    iteration: dict[str, Any],
    *,
    passages: Mapping[str, str] | None = None,
    previous_score: float | None = None,
    best: bool = False,
    open_summary: bool = True,
    prefix: str = "it",
) -> IterationView:
    """Describe one iteration (summary, highlights, facts) for drawing.

    ``passages``: the texts its evidence names (``result.json``'s ``passages``, or the run's scene texts).
    """
    card = iteration.get("factscore") or {}
    number = int(iteration.get("iteration", 0))
    key = f"{prefix}{number}"
    rows, shown = _fact_rows(key, card, passages or {})
    score = card.get("score")
    return IterationView(
        iteration=number,
        key=key,
        score=score,
        delta=(score - previous_score) if score is not None and previous_score is not None else None,
        best=best,
        accepted=bool(iteration.get("accepted", True)),
        note=str(iteration.get("note", "")),
        coverage=card.get("coverage"),
        reliable=card_reliable(card),
        coherence=(iteration.get("coherence") or {}).get("score"),
        coherence_coverage=(iteration.get("coherence") or {}).get("coverage"),
        coherence_reliable=bool((iteration.get("coherence") or {}).get("reliable", True)),
        counts={k: int(card.get(k) or 0) for k in ("facts", "supported", "unsupported", "unjudged")}
        | {"decompose_failures": int(card.get("decompose_failures") or 0)},
        pieces=summary_pieces(str(iteration.get("summary", "")), card),
        facts=rows,
        passages=shown,
        words=len(words(str(iteration.get("summary", "")))),
        open_summary=open_summary,
        corrections=int(card.get("corrections") or 0),
        judge_check=card.get("judge_check"),
        annotator_checks=[
            c["annotator_check"]
            for c in (iteration.get("coherence") or {}).get("summaries") or []
            if c.get("annotator_check")
        ],
        unreliable_why=judge_failure(card) or "too few facts were judged for this number to count",
        interval=_interval_text(card.get("score_ci95"), card.get("score_ci95_over")),
        corrected=(
            ""
            if "score_corrected_note" not in card
            else "judge-corrected: none"
            if card.get("score_corrected") is None
            else f"judge-corrected estimate {card['score_corrected']:.3f} "
            + _interval_text(card.get("score_corrected_ci95"), card.get("score_corrected_ci95_over"))
        ),
        corrected_note=str(card.get("score_corrected_note") or ""),
    )


def _interval_text(ci: Any, over: Any) -> str:
    """``95% CI [0.200, 0.800] over 6 sentences`` ("" without an interval)."""
    return f"95% CI [{ci[0]:.3f}, {ci[1]:.3f}] over {over}" if ci and over else ""


def open_rounds(iterations: list[dict[str, Any]], order: list[int]) -> set[int]:
    """The rounds whose summary starts open: taken in ``order`` while the words shown stay within ``OPEN_WORDS``.

    A page of short summaries shows them all; one long summary (thousands of words) starts folded, so the page
    stays a few screens long until a section is opened.
    """
    sizes = {int(it.get("iteration", 0)): len(words(str(it.get("summary", "")))) for it in iterations}
    shown: set[int] = set()
    total = 0
    for number in order:
        if number in sizes and total + sizes[number] <= OPEN_WORDS:
            shown.add(number)
            total += sizes[number]
    return shown


def iteration_html(
    iteration: dict[str, Any],
    *,
    passages: Mapping[str, str] | None = None,
    previous_score: float | None = None,
    best: bool = False,
    open_summary: bool = True,
    prefix: str = "it",
) -> str:
    """One iteration (highlighted summary and fact table) as an HTML fragment."""
    view = iteration_view(
        iteration,
        passages=passages,
        previous_score=previous_score,
        best=best,
        open_summary=open_summary,
        prefix=prefix,
    )
    return str(_macro("iteration_view")(view))


# ============================================================================================================
# score curve, usage, the whole page
# ============================================================================================================


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
    """A round drawn apart on the chart: rejected by a guard, or not reliable; never the best, whatever its score."""

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
    """Scale the scores of every iteration into a small line chart (scores live in [0, 1])."""
    width, height, left, top, right, bottom = 560, 240, 48, 16, 16, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    ordered = sorted(iterations, key=lambda it: int(it.get("iteration", 0)))
    numbers = [int(it.get("iteration", 0)) for it in ordered]
    low, high = (min(numbers), max(numbers)) if numbers else (0, 1)
    span = (high - low) or 1

    def x_of(number: int) -> float:
        return left + (plot_w / 2 if high == low else (number - low) / span * plot_w)

    def y_of(value: float) -> float:
        return top + (1.0 - max(0.0, min(1.0, value))) * plot_h

    nfs = [(it, (it.get("factscore") or {}).get("score")) for it in ordered]
    coherence = [(it, (it.get("coherence") or {}).get("score")) for it in ordered]
    series = [Series("NarrativeFactScore", "nfs", [])]
    if any(value is not None for _, value in coherence):
        series.append(Series("BooookScore", "coh", []))
    for line, values in zip(series, (nfs, coherence), strict=False):
        for it, value in values:
            if value is not None:
                number = int(it.get("iteration", 0))
                line.points.append((x_of(number), y_of(float(value)), number, float(value)))
    rejected = [
        Mark(x_of(number), y_of(float(value)), number, str(it.get("note") or "not accepted"))
        for it, value in nfs
        if value is not None and not it.get("accepted", True)
        for number in [int(it.get("iteration", 0))]
    ]
    unreliable = [
        Mark(x_of(number), y_of(float(value)), number, reliability_text(it.get("factscore") or {}))
        for it, value in nfs
        if value is not None and it.get("accepted", True) and not card_reliable(it.get("factscore") or {})
        for number in [int(it.get("iteration", 0))]
    ]
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


@dataclass
class Headline:
    """What a reader needs first, in words: the chosen round's score, its coverage, whether it counts, the stop."""

    iteration: int
    rounds: int
    score: str  # "0.889", or "not reliable" / "n/a": an unreliable score is never shown as a number
    coverage: str
    reliable: bool
    reliability: str  # "reliable", or "not reliable: <why>"
    stop: str
    chosen: str  # how the round was chosen


FALLBACK = "the first round: no round was reliable and accepted"


def headline(
    iterations: list[dict[str, Any]], best_iteration: int | None, stop_reason: str
) -> Headline | None:
    """The headline of a run: its best round (else its first, as the loop falls back) in plain words."""
    if not iterations:
        return None
    by_number = {int(it.get("iteration", 0)): it for it in iterations}
    chosen = by_number.get(best_iteration) if best_iteration is not None else None
    if chosen is None or not card_reliable(chosen.get("factscore") or {}) or not chosen.get("accepted", True):
        how = FALLBACK  # the loop's fallback
    else:
        how = "the only round" if len(iterations) == 1 else f"the best of {len(iterations)} rounds"
    it = chosen or by_number[min(by_number)]
    card = it.get("factscore") or {}
    reliable = card_reliable(card)
    score = card.get("score")
    coverage = card.get("coverage")
    return Headline(
        iteration=int(it.get("iteration", 0)),
        rounds=len(iterations),
        score=format_score(score) if reliable or score is None else "not reliable",
        coverage="coverage n/a" if coverage is None else f"coverage {float(coverage):.0%}",
        reliable=reliable,
        reliability=reliability_text(card),
        stop=stop_reason or ("not refined" if len(iterations) == 1 else "n/a"),
        chosen=how,
    )


def headline_html(
    iterations: list[dict[str, Any]], best_iteration: int | None, stop_reason: str, prefix: str = "it"
) -> str:
    """The headline as an HTML fragment ("" before anything was scored), linking to its round's panel."""
    view = headline(iterations, best_iteration, stop_reason)
    return "" if view is None else str(_macro("headline_view")(view, prefix))


def render_report(result: dict[str, Any], ckg: dict[str, Any] | None) -> str:
    """The whole report page for a run record and its CKG."""
    iterations = sorted(result.get("iterations") or [], key=lambda it: int(it.get("iteration", 0)))
    best = result.get("best_iteration")
    top = headline(iterations, best, str(result.get("stop_reason") or ""))
    counted = best if top is not None and top.chosen != FALLBACK else None  # the loop's fallback is no "best"
    views: list[IterationView] = []
    previous: float | None = None
    numbers = [int(it.get("iteration", 0)) for it in iterations]
    shown = open_rounds(iterations, sorted(numbers, key=lambda n: (n != best, n)))
    for iteration in iterations:
        view = iteration_view(
            iteration,
            passages=result.get("passages") or {},
            previous_score=previous,
            best=counted is not None and iteration.get("iteration") == counted,
            open_summary=int(iteration.get("iteration", 0)) in shown,
        )
        views.append(view)
        previous = view.score if view.score is not None else previous
    usage = result.get("usage") or {}
    context = result.get("context") or {}
    template = environment().get_template("report.html.j2")
    return template.render(
        csp=CSP,
        css=inline_asset("report.css"),
        js=inline_asset("report.js"),
        result=result,
        document=result.get("document") or {},
        context=context,
        models=sorted((context.get("resolved_models") or {}).items()),
        settings=[
            (name, context[name])
            for name in (
                "preset",
                "prompt_dir",
                "base_url",
                "ckg_samples",
                "predicate_threshold",
                "retrieval_k",
                "strategy",
                "chunk_size",
                "max_summary_tokens",
                "target_score",
                "min_delta",
                "patience",
                "max_iterations",
                "coherence_guard",
            )
            if name in context and context[name] not in ("", None)
        ],
        prompts=sorted((result.get("prompts") or {}).items()),
        ckg=graph_view(ckg) if ckg else None,
        ckg_stats=result.get("ckg_stats") or {},
        iterations=views,
        curve=curve_view(iterations, counted) if iterations else None,
        headline=top,
        by_model=sorted((usage.get("by_model") or {}).items()),
        total=usage.get("total") or {},
        timings=sorted((result.get("timings") or {}).items(), key=lambda kv: -float(kv[1] or 0)),
        events=result.get("initial_summary_events") or [],
    )


def story_ckg(run_dir: Path) -> Path:
    """The CKG of the story a kept run (``<story>/runs/<id>/``) belongs to (a missing path for another folder)."""
    story = RunDir(run_dir.parent.parent)
    return story.ckg if run_dir.parent.name == RUNS_FOLDER and story.meta.is_file() else RunDir(run_dir).ckg


def write_report(run_dir: str | Path, result: dict[str, Any] | None = None) -> Path:
    """Render ``report.html`` from a run directory's ``result.json`` and CKG; returns its path.

    ``result`` renders that record instead of ``result.json`` (the web UI's view of a run that is paused, and
    so has no ``result.json`` yet).

    Raises:
        FileNotFoundError: no ``result`` given and the directory has no ``result.json`` (nothing has been
            scored there yet).
    """
    rd = RunDir(Path(run_dir))
    if result is None:
        if not rd.result.is_file():
            raise FileNotFoundError(
                f"{rd.root} has no result.json; run 'storyjudge refine' or 'score' into it first."
            )
        result = load_run(rd.result).record()  # RunRecordError: one line naming the file and field
    ckg_file = rd.ckg if rd.ckg.is_file() else story_ckg(rd.root)
    ckg = json.loads(ckg_file.read_text(encoding="utf-8")) if ckg_file.is_file() else None
    html = render_report(result, ckg)
    tmp = rd.report.with_name(f".report.{uuid.uuid4().hex}.html.tmp")  # a file of its own per writer
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(rd.report)
    return rd.report
