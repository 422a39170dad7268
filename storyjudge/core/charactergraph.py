"""The Character Knowledge Graph (NarrativeFactScore stage 1): alias merging, edge selection, lookup.

1. Name graph: name variants joined by the extractor's aliases and a given name that prefixes exactly one fuller
   name; titles never stripped ("Lady Macbeth" is not "Macbeth"). A component joining two names that one triple
   uses as distinct subject and object is cut (minimum weighted cut): one bad alias cannot fuse two people.
2. Edges: a predicate is kept when enough (scene, sample) extractions state it (``min_count``). The name graph
   never depends on the threshold, so a higher threshold always gives a subgraph of a lower one's.

Names count only where the scene text contains them (whole word, any case): no invented names, no pronouns.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from storyjudge.core.records import CKGStats

if TYPE_CHECKING:
    import networkx as nx


PRONOUNS = frozenset(
    "i me my mine myself you your yours yourself he him his himself she her hers herself it its itself we us "
    "our ours ourselves they them their theirs themselves thou thee thy thine ye who whom someone somebody "
    "everyone everybody nobody none null unknown all both each other others man woman men women "
    "people".split()
)
SCHEMA_WORDS = frozenset(  # echoed as names by weak models
    "name names character characters scene triple triples subject object predicate".split()
)
TITLES = frozenset(
    "lady lord sir dame king queen prince princess duke duchess earl count countess baron mr mrs ms miss "
    "master mistress dr doctor captain general colonel major sergeant father mother brother sister uncle "
    "aunt saint st madame monsieur young old first second third fourth".split()
)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_EDGE_PUNCT = "\"'`*_.,;:!?()[]{}<>\u2018\u2019\u201c\u201d"
_STATE_PREFIX = re.compile(r"^\s*(?:state|status)\s*[:=-]\s*", re.IGNORECASE)
_IDENTITY = re.compile(
    r"^(?:is|is also|(?:is )?(?:also )?(?:called|named|known as)|alias(?: of)?"
    r"|(?:is )?(?:the )?same (?:person )?as)$"
)
_MAX_NAME_WORDS = 6
_EPSILON = 1e-9


def clean_name(raw: object) -> str:
    """A name as written, without Markdown, quotes, a possessive or surrounding punctuation."""
    if not isinstance(raw, str):
        return ""
    text = " ".join(raw.replace("\u2019", "'").split()).strip(_EDGE_PUNCT + " ")
    text = re.sub(r"'s$", "", text).strip(_EDGE_PUNCT + " ")
    return _ARTICLE.sub("", text)


def name_key(name: str) -> str:
    """The identity of a name variant: case, spacing, articles and possessives ignored."""
    return clean_name(name).casefold()


def is_name(name: str) -> bool:
    """Whether a cleaned string can be a character's name (a capitalised proper noun, not a pronoun)."""
    if len(name.split()) > _MAX_NAME_WORDS or name.casefold() in PRONOUNS | SCHEMA_WORDS:
        return False
    letters = [ch for ch in name if ch.isalpha()]
    return 2 <= len(name) <= 60 and bool(letters) and letters[0].isupper()  # its first letter a capital


def _name_pattern(name: str) -> str:
    return r"(?<!\w)" + r"\s+".join(re.escape(word) for word in name.split()) + r"(?!\w)"


@lru_cache(maxsize=65536)
def _compiled(name: str) -> re.Pattern[str]:
    return re.compile(_name_pattern(name), re.IGNORECASE)


def occurs_in(name: str, text: str) -> bool:
    """Whether ``name`` occurs in ``text`` as whole words, any case, any spacing."""
    return bool(name) and _compiled(name).search(text) is not None


@dataclass
class NameGraph:
    """Name variants, the edges that say two variants are one character, and the resulting characters."""

    graph: nx.Graph
    character_of: dict[str, str] = field(default_factory=dict)  # variant key -> canonical name
    members: dict[str, list[str]] = field(default_factory=dict)  # canonical name -> variant keys
    guard_cuts: int = 0  # edges removed by the over-merge guard

    def resolve(self, raw: object) -> str | None:
        """The canonical character a written name refers to, or None when it is not a known character."""
        return self.character_of.get(name_key(clean_name(raw))) if isinstance(raw, str) else None


def _add_variant(graph: nx.Graph, name: str, scene_id: str, *, as_name: bool) -> str:
    key = name_key(name)
    if key not in graph:
        graph.add_node(key, forms=Counter(), mentions=0, alias_mentions=0, scenes=set())
    data = graph.nodes[key]
    data["forms"][name] += 1
    data["mentions" if as_name else "alias_mentions"] += 1
    data["scenes"].add(scene_id)
    return key


def _link(graph: nx.Graph, a: str, b: str, reason: str) -> None:
    if a != b:
        data = graph.get_edge_data(a, b, {})
        graph.add_edge(a, b, weight=data.get("weight", 0) + 1, reasons={*data.get("reasons", ()), reason})


def build_name_graph(extractions: Iterable[Mapping[str, Any]], scene_texts: Mapping[str, str]) -> NameGraph:
    """Merge name variants into characters (the name graph of the module docstring)."""
    import networkx as nx

    graph = nx.Graph()
    conflicts: set[tuple[str, str]] = set()

    def grounded(raw: object, scene_id: str) -> str:
        name = clean_name(raw)
        text = scene_texts.get(scene_id)
        return name if is_name(name) and (text is None or occurs_in(name, text)) else ""

    for extraction in (e for e in extractions if e.get("ok")):
        scene_id = str(extraction.get("scene_id", ""))
        for mention in (m for m in extraction.get("characters") or [] if isinstance(m, Mapping)):
            name = grounded(mention.get("name"), scene_id)
            keys = [_add_variant(graph, name, scene_id, as_name=True)] if name else []
            for alias in mention.get("aliases") or []:
                alias_name = grounded(alias, scene_id)
                if alias_name:
                    keys.append(_add_variant(graph, alias_name, scene_id, as_name=not keys))
            for other in keys[1:]:
                _link(graph, keys[0], other, "alias")
        for triple in (t for t in extraction.get("triples") or [] if isinstance(t, Mapping)):
            ends = [grounded(triple.get("subject"), scene_id), grounded(triple.get("object"), scene_id)]
            keys = [_add_variant(graph, end, scene_id, as_name=True) for end in ends if end]
            if len(keys) == 2 and keys[0] != keys[1]:
                if is_identity(triple.get("predicate")):
                    _link(graph, keys[0], keys[1], "identity")
                else:
                    conflicts.add((min(keys), max(keys)))
    _link_given_names(graph)
    names = NameGraph(graph, guard_cuts=_guard(graph, conflicts))
    _assign_characters(names, "\n".join(scene_texts.values()))
    return names


def _link_given_names(graph: nx.Graph) -> None:
    """Join a given name to the one fuller name it starts ("Frodo" -> "Frodo Baggins"); titles never count."""
    by_first: dict[str, list[str]] = defaultdict(list)
    for key in graph.nodes:
        by_first[key.split()[0]].append(key)
    for short in list(graph.nodes):
        first = short.split()[0]
        longer = [key for key in by_first[first] if key.startswith(short + " ")]  # keys are single-spaced
        if first not in TITLES and len(longer) == 1:
            _link(graph, short, longer[0], "given-name")


def _guard(graph: nx.Graph, conflicts: set[tuple[str, str]]) -> int:
    """Cut the lightest set of variant edges between two names that a triple shows to be different people."""
    import networkx as nx

    cuts = 0
    for a, b in sorted(conflicts):
        if not nx.has_path(graph, a, b):
            continue
        component = graph.subgraph(nx.node_connected_component(graph, a))
        _, (side_a, side_b) = nx.minimum_cut(component, a, b, capacity="weight")
        crossing = [(u, v) for u, v in component.edges if (u in side_a) != (v in side_a)]
        graph.remove_edges_from(crossing)
        cuts += len(crossing)
    return cuts


def _assign_characters(names: NameGraph, narrative: str) -> None:
    """Name each component after the variant the extractor used most, then the one the narrative uses most."""
    import networkx as nx

    graph = names.graph
    for key in graph.nodes:  # the most used form not all capitals (plays shout speakers' names)
        forms = graph.nodes[key]["forms"]
        best = min(forms.items(), key=lambda item: (item[0].isupper(), -item[1], item[0]))[0]
        graph.nodes[key]["display"] = string.capwords(best) if best.isupper() else best
    for component in nx.connected_components(graph):
        in_text = {
            k: len(_compiled(graph.nodes[k]["display"]).findall(narrative)) if len(component) > 1 else 0
            for k in component
        }
        ranked = sorted(
            component,
            key=lambda k: (
                -graph.nodes[k]["mentions"],
                -in_text[k],
                -graph.nodes[k]["alias_mentions"],
                -len(k.split()),
                graph.nodes[k]["display"].casefold(),
            ),
        )
        canonical = graph.nodes[ranked[0]]["display"]
        names.members[canonical] = sorted(component)
        for key in component:
            names.character_of[key] = canonical


def normalize_predicate(raw: object) -> str:
    """A predicate in one canonical spelling: lower case, single spaces, no ``state:`` prefix."""
    if not isinstance(raw, str):
        return ""
    return _STATE_PREFIX.sub("", " ".join(raw.split())).strip(_EDGE_PUNCT + " ").lower()


def is_identity(predicate: object) -> bool:
    """Whether a predicate says subject and object are one person ("is also called"): an alias, no edge."""
    return bool(_IDENTITY.match(normalize_predicate(predicate)))


def min_count(samples: int, threshold: float, min_support: int = 0) -> int:
    """Smallest (scene, sample) support a predicate needs: ``min_support``, else ``ceil(threshold x samples)``."""
    return min_support if min_support > 0 else max(1, math.ceil(threshold * samples - _EPSILON))


def build_ckg(
    extractions: Sequence[Mapping[str, Any]],
    scenes: Sequence[Mapping[str, Any]],
    *,
    samples: int,
    threshold: float,
    min_support: int = 0,
) -> nx.MultiDiGraph:
    """The CKG: characters as nodes (with aliases), selected predicates as keyed directed edges."""
    import networkx as nx

    scene_texts = {str(scene["id"]): str(scene["text"]) for scene in scenes}
    # one extraction per (scene, part, sample): a repeated run of the same sample replaces, never adds
    keyed = {
        (str(e.get("scene_id", "")), int(e.get("part", 0)), int(e.get("sample", 0))): e for e in extractions
    }
    latest = list(keyed.values())
    names = build_name_graph(latest, scene_texts)
    # (subject, object, predicate) between characters -> the (scene, sample) pairs that state it
    support: dict[tuple[str, str, str], set[tuple[str, int]]] = defaultdict(set)
    for extraction in (e for e in latest if e.get("ok")):
        stated_at = (str(extraction.get("scene_id", "")), int(extraction.get("sample", 0)))
        for triple in (t for t in extraction.get("triples") or [] if isinstance(t, Mapping)):
            predicate = normalize_predicate(triple.get("predicate"))
            subject = names.resolve(triple.get("subject"))
            if not predicate or subject is None or is_identity(predicate):
                continue
            raw = triple.get("object")
            null = str(raw).strip().casefold() in ("", "null", "none", "n/a")  # None too
            obj = subject if null else names.resolve(raw)
            if obj is None:
                continue  # the object is a thing or an unnamed person: not a character edge
            support[(subject, obj, predicate)].add(stated_at)
    needed = min_count(samples, threshold, min_support)
    ckg = nx.MultiDiGraph(
        samples=samples,
        threshold=threshold,
        min_count=needed,
        threshold_rule="count over samples and scenes" if min_support > 0 else "threshold x samples",
        scenes=len(scene_texts),
        extractions=len(latest),
        failed_extractions=sum(1 for e in latest if not e.get("ok")),
        candidate_edges=len(support),
        guard_cuts=names.guard_cuts,
    )
    for canonical, keys in sorted(names.members.items()):
        nodes = [names.graph.nodes[key] for key in keys]
        ckg.add_node(
            canonical,
            aliases=sorted({n["display"] for n in nodes} - {canonical}, key=str.casefold),
            mentions=sum(n["mentions"] + n["alias_mentions"] for n in nodes),
            scenes=sorted(set().union(*(n["scenes"] for n in nodes))),
        )
    for (subject, obj, predicate), where in sorted(support.items()):
        if len(where) >= needed:
            ckg.add_edge(
                subject, obj, key=predicate, predicate=predicate, count=len(where),
                scenes=sorted({scene_id for scene_id, _ in where}),
            )  # fmt: skip
    return ckg


def to_json(ckg: nx.MultiDiGraph) -> dict[str, Any]:
    """Node-link JSON (``edges`` key) for state, files and the report."""
    import networkx as nx

    return dict(nx.node_link_data(ckg, edges="edges"))


def edges(ckg: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A CKG's edges (``links`` in older node-link JSON)."""
    return list(ckg.get("edges", ckg.get("links", [])) or [])


def stats(ckg: Mapping[str, Any]) -> CKGStats:
    """Scenes, characters, edges and self-loops of a CKG."""
    found = edges(ckg)
    return CKGStats(
        scenes=int((ckg.get("graph") or {}).get("scenes", 0)),
        characters=len(ckg.get("nodes") or []),
        edges=len(found),
        self_loops=sum(1 for e in found if e.get("source") == e.get("target")),
    )


def edge_line(edge: Mapping[str, Any]) -> str:
    """``Macbeth -[murders]-> Duncan`` or, for a self-loop, ``Banquo -[state: dead]``."""
    predicate = edge.get("predicate") or edge.get("key") or ""
    if edge.get("source") == edge.get("target"):
        return f"{edge.get('source')} -[state: {predicate}]"
    return f"{edge.get('source')} -[{predicate}]-> {edge.get('target')}"


def aliases(ckg: Mapping[str, Any]) -> dict[str, list[str]]:
    """Canonical character name -> the other names the narrative uses for it."""
    return {str(node["id"]): list(node.get("aliases") or []) for node in ckg.get("nodes") or []}


def characters_in(ckg: Mapping[str, Any], text: str) -> list[str]:
    """Characters a text mentions by any name, in order; longer names win ("Lady Macbeth" is not "Macbeth")."""
    names = tuple((canonical, tuple(others)) for canonical, others in aliases(ckg).items())
    lookup, pattern = _name_finder(names)
    if pattern is None:
        return []
    hits = (lookup.get(name_key(match.group(0))) for match in pattern.finditer(text))
    return [hit for hit in dict.fromkeys(hits) if hit]


@lru_cache(maxsize=64)
def _name_finder(
    names: tuple[tuple[str, tuple[str, ...]], ...],
) -> tuple[dict[str, str], re.Pattern[str] | None]:
    """(name key -> canonical name, one pattern for all names, longest first), built once per CKG."""
    lookup: dict[str, str] = {}
    for canonical, others in names:
        for name in (canonical, *others):
            key = name_key(name)
            if key:
                lookup.setdefault(key, canonical)
    if not lookup:
        return lookup, None
    ordered = sorted(lookup, key=lambda name: (-len(name), name))
    return lookup, re.compile("|".join(_name_pattern(name) for name in ordered), re.IGNORECASE)


def subgraph_lines(ckg: Mapping[str, Any], text: str, limit: int | None = None) -> list[str]:
    """Lines of the edges touching the characters a text mentions, most supported first."""
    mentioned = set(characters_in(ckg, text))
    touching = [e for e in edges(ckg) if e.get("source") in mentioned or e.get("target") in mentioned]
    touching.sort(
        key=lambda e: (
            -int(e.get("count", 0)),
            -((e.get("source") in mentioned) + (e.get("target") in mentioned)),
            edge_line(e),
        )
    )
    lines = [edge_line(edge) for edge in touching]
    return lines if limit is None else lines[: max(0, limit)]
