"""The searchable index of a document: its scenes as embedder-sized passages, in a store (``scenestore``).

Scenes rank by their best passage, dense similarity and BM25 averaged (BM25 catches names a small embedder
misses). Collections are named by a hash of their inputs and marked complete after the last batch.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from functools import cache, lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from storyjudge.core.embeddings import get_embedder
from storyjudge.core.records import IndexRef, Passage, Scene
from storyjudge.core.scenestore import SceneIndex, scene_index, where
from storyjudge.core.textsplit import split_by_tokens

PASSAGE_SCHEME = "v2"  # changes whenever the way scenes become passages changes
BATCH = 64  # passages embedded and written per call of the store
DENSE_WEIGHT = 0.5  # weight of the scaled dense similarity; BM25 has the rest
CANDIDATES = 50  # passages each ranking contributes at least

Progress = Callable[[int], None]


def passages_of(
    scenes: Sequence[Scene],
    window_tokens: int,
    count: Callable[[str], int],
    go_on: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Passages of every scene that fit ``window_tokens``; ``go_on`` is asked before each scene and may raise."""
    passages: list[dict[str, Any]] = []
    for scene in scenes:
        if go_on:
            go_on()
        offset = int(scene["start"])
        pieces = split_by_tokens(scene["text"], window_tokens, count)
        of_scene = {"scene_id": scene["id"], "scene_index": int(scene["index"]), "title": scene["title"]}
        for number, piece in enumerate(pieces, start=1):
            if piece.strip():
                metadata = {**of_scene, "start": offset, "end": offset + len(piece)}
                passages.append({"id": f"{scene['id']}#p{number}", "text": piece, "metadata": metadata})
            offset += len(piece)
    return passages


@cache
def _tokenizers_version() -> str:
    try:
        return metadata.version("tokenizers")
    except metadata.PackageNotFoundError:
        return ""


def collection_name(scenes: Sequence[Scene], embedder: str) -> str:
    """The collection's name: a hash of what its passages are made from, known before any split or load."""
    scene_fields = [(s["id"], s["index"], s["title"], s["start"], s["text"]) for s in scenes]
    payload = json.dumps([PASSAGE_SCHEME, _tokenizers_version(), embedder, scene_fields], ensure_ascii=False)
    key = hashlib.sha256(payload.encode()).hexdigest()
    return f"sj-scenes-{key[:32]}"


def build_index(
    scenes: Sequence[Scene],
    *,
    location: str | Path,
    store: str = "chroma",
    embedder: str = "minilm",
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
    go_on: Callable[[], None] | None = None,
) -> tuple[IndexRef, bool]:
    """Index scenes, reusing a complete index; returns the reference and whether it embedded anything."""
    name = collection_name(scenes, embedder)
    index = scene_index(store, str(location), name, embedder, create=True)
    passages = index.size()
    items: list[dict[str, Any]] | None = None
    if passages is None:  # else an unchanged document: neither split again nor the embedder loaded for it
        model = get_embedder(embedder)  # passages are cut with the embedder's own tokenizer
        # at least 128 tokens within the window, about 1/8 of a long one
        size = max(16, min(model.window_tokens - 2, max(128, model.window_tokens // 8)))
        items = passages_of(scenes, size, model.count_tokens, go_on)
        passages = len(items)
    if on_total:
        on_total(passages)
    built = False
    if items is not None:  # fill the index up with the passages it lacks, longest first (little padding)
        held = {passage["id"] for passage in index.get()}
        if held and progress:
            progress(sum(1 for item in items if item["id"] in held))
        missing = sorted(
            (i for i in items if i["id"] not in held), key=lambda i: len(i["text"]), reverse=True
        )
        for begin in range(0, len(missing), BATCH):
            batch = missing[begin : begin + BATCH]
            index.add(batch, len(items))
            if progress:
                progress(len(batch))
        if not missing:
            index.add([], len(items))  # all there: marked complete
        built = bool(missing)
    ref = IndexRef(
        store=store, location=str(location), embedder=embedder, scenes_collection=name, passages=passages
    )
    return ref, built


def search_scenes_many(index: IndexRef, queries: Sequence[str], k: int) -> list[list[dict[str, Any]]]:
    """For each query, the ``k`` best scenes by their best passage (``{id, title, passage, score}``): one search."""
    out: list[list[dict[str, Any]]] = [[] for _ in queries]
    asked = [i for i, query in enumerate(queries) if query.strip()]
    if k < 1 or not asked:
        return out
    kind, location = where(index)
    name = str(index["scenes_collection"])
    embedder = str(index.get("embedder", "minilm"))
    store = scene_index(kind, location, name, embedder)
    with _lexical_lock:
        lexical = _lexical(kind, location, name, embedder, bool(index.get("passages")))
    total = len(lexical.scene_of)  # the complete index's passages
    if total == 0:
        return out
    wanted = min(total, max(CANDIDATES, 10 * k))
    while asked:
        nearest = _query(store, [queries[i] for i in asked], wanted)
        wider = []
        for row, i in enumerate(asked):
            ranked = _ranked(lexical, queries[i], nearest[row], wanted, k)
            if len(ranked) >= k or wanted >= total:
                out[i] = ranked[:k]
            else:  # too few distinct scenes among the candidates: ask for more
                wider.append(i)
        asked, wanted = wider, min(total, wanted * 4)
    return out


def _ranked(
    lexical: LexicalIndex, query: str, nearest: Sequence[tuple[str, float]], wanted: int, k: int
) -> list[dict[str, Any]]:
    dense, words = _scaled(dict(nearest)), _scaled(lexical.top(query, wanted))
    fused = {
        key: DENSE_WEIGHT * dense.get(key, 0.0) + (1.0 - DENSE_WEIGHT) * words.get(key, 0.0)
        for key in dense.keys() | words.keys()
    }
    best: dict[str, tuple[float, str]] = {}
    for passage_id, score in fused.items():
        scene_id = lexical.scene_of[passage_id]
        if scene_id not in best or score > best[scene_id][0]:
            best[scene_id] = (score, passage_id)
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[0]))[:k]
    return [
        {
            "id": scene_id,
            "title": lexical.title_of[passage_id],
            "passage": lexical.text_of[passage_id],
            "score": round(score, 6),
        }
        for scene_id, (score, passage_id) in ranked
    ]


def _query(store: SceneIndex, queries: list[str], wanted: int) -> list[list[tuple[str, float]]]:
    """One dense search for all the queries (a seam the tests count calls at)."""
    return store.search(queries, wanted)


def _scaled(scores: Mapping[str, float]) -> dict[str, float]:
    low, high = min(scores.values(), default=0.0), max(scores.values(), default=0.0)
    return {key: (value - low) / (high - low) if high > low else 1.0 for key, value in scores.items()}


_TERM = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")


def terms(text: str) -> list[str]:
    """Lower-case word terms for lexical matching; apostrophes and hyphens stay inside ("o'er", "to-day")."""
    return _TERM.findall(text.casefold().replace("\u2019", "'"))


class LexicalIndex:
    """BM25 over an index's passages, built once per process from what the store keeps."""

    def __init__(self, stored: Sequence[Passage]) -> None:
        self.text_of = {p["id"]: p["text"] for p in stored}
        self.scene_of = {p["id"]: str(p["metadata"]["scene_id"]) for p in stored}
        self.title_of = {p["id"]: str(p["metadata"].get("title", "")) for p in stored}
        self.postings: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self.length: dict[str, int] = {}
        for pid, text in self.text_of.items():
            counts = Counter(terms(text))
            self.length[pid] = sum(counts.values())
            for term, tf in counts.items():
                self.postings[term].append((pid, tf))
        self.average = (sum(self.length.values()) / len(self.length)) if self.length else 1.0

    def top(self, query: str, n: int, k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
        """BM25 scores of the ``n`` best passages that share a term with the query."""
        scores: dict[str, float] = defaultdict(float)
        size = len(self.length)
        for term, repeats in Counter(terms(query)).items():
            postings = self.postings.get(term, [])  # none: no passage to score
            idf = math.log(1.0 + (size - len(postings) + 0.5) / (len(postings) + 0.5))
            for pid, tf in postings:
                norm = k1 * (1.0 - b + b * self.length[pid] / (self.average or 1.0))
                scores[pid] += repeats * idf * tf * (k1 + 1.0) / (tf + norm)
        return {pid: scores[pid] for pid in sorted(scores, key=lambda pid: (-scores[pid], pid))[:n]}


_lexical_lock = threading.Lock()  # one build of an index, not one per searching thread


@lru_cache(maxsize=16)  # complete indexes never change, so caching is safe
def _lexical(kind: str, location: str, name: str, embedder: str, expected: bool) -> LexicalIndex:
    stored = scene_index(kind, location, name, embedder).get()
    if expected and not stored:  # never an empty search in place of the evidence
        raise ValueError(
            f"The scene index {name} ({location or kind}) is gone from its store; index the document "
            "again (run without --resume, or `storyjudge index`)."
        )
    return LexicalIndex(stored)
