"""The character knowledge graph: an SVG laid out here (networkx, seeded) with its character panels."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

GRAPH_SEED = 7
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
LABEL_PREDICATES = 2  # predicates written on an edge; the rest are in its tooltip and the character's panel


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
    """A node-link CKG (``edges`` or ``links``) as a MultiDiGraph: one parallel edge per listed predicate."""
    graph = nx.MultiDiGraph()
    if not data:
        return graph
    for node in data.get("nodes") or []:
        graph.add_node(str(node["id"]), **{k: v for k, v in node.items() if k != "id"})
    for edge in data.get("edges") or data.get("links") or []:
        source, target = str(edge["source"]), str(edge["target"])
        base = {k: v for k, v in edge.items() if k not in ("source", "target", "key", "predicates")}
        for item in edge.get("predicates") or [{}]:  # none listed: the edge as it is
            extra = item if isinstance(item, dict) else {"predicate": str(item)}
            graph.add_edge(source, target, **{**base, **extra})
    return graph


def _relation(attrs: dict[str, Any], other: str) -> Relation:
    scenes = attrs.get("scenes") or []
    return Relation(
        predicate=str(attrs.get("predicate") or attrs.get("relation") or "related to"),
        other=other,
        count=int(attrs.get("count") or attrs.get("weight") or 1),
        scenes=[str(s) for s in (scenes if isinstance(scenes, list) else [scenes])],
    )


def _layout(simple: nx.Graph, width: float, height: float, margin: float) -> dict[str, tuple[float, float]]:
    """Seeded spring layout of the characters, scaled into the drawing area."""
    count = simple.number_of_nodes()
    if count == 0:
        return {}
    if count == 1:
        return {next(iter(simple.nodes)): (width / 2, height / 2)}
    raw = nx.spring_layout(simple, seed=GRAPH_SEED, k=1.8 / math.sqrt(count), iterations=200)
    xs, ys = [float(p[0]) for p in raw.values()], [float(p[1]) for p in raw.values()]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    return {
        node: (
            margin + (float(p[0]) - min(xs)) / span_x * (width - 2 * margin),
            margin + (float(p[1]) - min(ys)) / span_y * (height - 2 * margin),
        )
        for node, p in raw.items()
    }


def _colors(simple: nx.Graph) -> dict[str, str]:
    """One colour per community of characters, so factions read at a glance."""
    if simple.number_of_edges() == 0:
        return {node: PALETTE[0] for node in simple.nodes}
    communities = nx.community.greedy_modularity_communities(simple)
    ordered = sorted(communities, key=lambda c: (-len(c), sorted(c)))
    return {node: PALETTE[n % len(PALETTE)] for n, members in enumerate(ordered) for node in members}


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
    simple = nx.Graph()  # who is related to whom, once per pair, without self-loops (a state is no relation)
    simple.add_nodes_from(graph.nodes)
    simple.add_edges_from((u, v) for u, v in graph.edges() if u != v)
    positions = _layout(simple, width, height, margin=70)
    colors = _colors(simple)
    names = {
        node: str(attrs.get("name") or attrs.get("label") or node) for node, attrs in graph.nodes(data=True)
    }
    pairs: dict[tuple[str, str], list[Relation]] = defaultdict(list)
    views: dict[str, NodeView] = {}
    for n, (node, attrs) in enumerate(graph.nodes(data=True)):
        degree = sum(1 for u, v in (*graph.in_edges(node), *graph.out_edges(node)) if u != v)
        scenes = attrs.get("scenes") or []
        views[node] = NodeView(
            key=f"n{n}",
            name=names[node],
            aliases=[str(a) for a in attrs.get("aliases") or [] if str(a) != names[node]],
            x=round(positions[node][0], 1),
            y=round(positions[node][1], 1),
            r=round(min(30.0, 7.0 + 3.2 * math.sqrt(degree)), 1),
            degree=degree,
            color=colors.get(node, PALETTE[0]),
            scenes=[str(s) for s in scenes] if isinstance(scenes, list) else [],
        )
    states: list[tuple[str, Relation]] = []
    for source, target, attrs in graph.edges(data=True):
        if source == target:
            state = _relation(attrs, "")
            state.predicate = re.sub(r"(?i)^state:", "", state.predicate.strip()).strip()
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
        edges.append(
            EdgeView(
                source=views[source].key,
                target=views[target].key,
                path=path,
                label_x=round(mid_x, 1),
                label_y=round(mid_y, 1),
                label=shown + (f" +{more}" if more > 0 else ""),
                title="\n".join(
                    f"{names[source]} -[{r.predicate}]-> {names[target]} (x{r.count})" for r in relations
                ),
                width=round(1.0 + math.log1p(sum(r.count for r in relations)) * 0.8, 2),
            )
        )
    states.sort(key=lambda item: (item[0], -item[1].count))
    stats = {
        "characters": count,
        "relations": sum(len(r) for r in pairs.values()),
        "pairs": len(pairs),
        "states": len(states),
    }
    return GraphView(
        width=width,
        height=height,
        nodes=sorted(views.values(), key=lambda v: v.degree),  # hubs drawn last, on top
        edges=edges,
        states=states,
        stats=stats,
        extraction=extraction_note((data or {}).get("graph") or {}),
    )


def extraction_note(meta: dict[str, Any]) -> str:
    """One line on how the CKG was extracted, from the graph attributes the index stores."""
    threshold = meta.get("threshold") is not None and meta.get("min_count") is not None
    parts = {
        "by {model}": meta.get("model"),
        "{samples} extraction sample(s) per scene": meta.get("samples"),
        "predicate threshold {threshold} (kept at {min_count}+ occurrences)": threshold,
        "{failed_extractions} extraction(s) could not be parsed": meta.get("failed_extractions"),
        "{guard_cuts} name merge(s) cut by the over-merge guard": meta.get("guard_cuts"),
    }
    return "; ".join(text.format_map(meta) for text, shown in parts.items() if shown)
