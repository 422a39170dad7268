"""The searchable index of a document: its scenes as embedder-sized passages, in Chroma.

A scene is never embedded as one truncated vector: it is cut (by ``textsplit``, with the embedder's own
tokenizer) into passages that fit the embedder's window, each pointing back to its scene, and a query ranks
scenes by their best passage. Collections are named by a hash of everything their passages are made from
(the scenes, the embedder, the way of cutting), and marked complete only after the last batch, so indexing
an unchanged document again costs nothing, not even the split, and a run that crashed halfway is filled up
rather than trusted. The CKG is not embedded: retrieval takes a fact's CKG lines from the graph by character
name (``nodes/retrieve.py``).

Passages are ranked by dense similarity and BM25 over the same passages, each scaled to [0, 1] over the
candidates and averaged. Measured on Macbeth with the default MiniLM embedder and 128-token passages (72
sampled lines, 6 paraphrased plot facts): dense alone put the right scene first for 30 lines and 4 facts,
BM25 alone for 71 lines and 2 facts, the average for 62 lines and all 6 facts. Verse and archaic spelling
defeat a small embedder; names and rare words are exactly what a lexical score catches.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from storyjudge.core import heap
from storyjudge.core.embeddings import get_embedder
from storyjudge.core.records import IndexRef, Scene
from storyjudge.core.textsplit import split_by_tokens

PASSAGE_SCHEME = "v2"
"""Changes whenever the way scenes become passages changes, so old collections are not reused by mistake."""

BATCH = 64
"""Passages embedded and written per Chroma call."""

DENSE_WEIGHT = 0.5
"""Weight of the scaled dense similarity in a passage's score; BM25 (scaled) has the rest."""

CANDIDATES = 50
"""Passages each ranking contributes at least (more when k is large)."""

Progress = Callable[[int], None]


def _client(store_dir: str, chroma_url: str) -> Any:
    with _clients_lock:
        key = (store_dir, chroma_url)
        if key not in _clients:
            with heap.loading():  # Chroma's imports and its store
                from storyjudge.core.vectorstore import chroma_client

                _clients[key] = chroma_client(store_dir, chroma_url)
        return _clients[key]


_clients: dict[tuple[str, str], Any] = {}
_clients_lock = threading.Lock()


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def passage_tokens(window_tokens: int) -> int:
    """Passage size for an embedder: at most its window, and about 1/8 of a long one.

    Small sentence embedders (256-token window) were trained on shorter inputs and match a quoted line far
    better in 128-token passages; a long-window model (BGE-M3, 8192) still gets passages of ~1,000 tokens, so
    a 2,000-token scene is a handful of vectors rather than one.
    """
    return max(16, min(window_tokens - 2, max(128, window_tokens // 8)))


def passages_of(
    scenes: Sequence[Scene],
    window_tokens: int,
    count: Callable[[str], int],
    go_on: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Passages of every scene that fit ``window_tokens`` of the embedder, with where they come from.

    ``go_on`` is asked before each scene and may raise to stop: splitting a 10 MB text takes minutes.
    """
    passages: list[dict[str, Any]] = []
    for scene in scenes:
        if go_on:
            go_on()
        offset = int(scene["start"])
        pieces = split_by_tokens(scene["text"], window_tokens, count)
        for number, piece in enumerate(pieces, start=1):
            if piece.strip():
                passages.append(
                    {
                        "id": f"{scene['id']}#p{number}",
                        "text": piece,
                        "metadata": {
                            "scene_id": scene["id"],
                            "scene_index": int(scene["index"]),
                            "title": scene["title"],
                            "start": offset,
                            "end": offset + len(piece),
                        },
                    }
                )
            offset += len(piece)
    return passages


def fill_order(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Passages longest first, so that each batch the embedder pads holds passages of about one length.

    The embedder pads every passage of a batch to the batch's longest, and the padding is computed like any
    token. In document order a batch mixes full passages with a scene's short last piece: on Frankenstein
    (925 passages, 102 tokens on average) that padded 17 % more tokens than the passages hold, sorted 7 %.
    Order within the collection means nothing to Chroma; characters stand in for tokens.
    """
    return sorted(items, key=lambda item: len(item["text"]), reverse=True)


_store_locks: dict[str, threading.Lock] = {}
_scrubbed: set[tuple[str, str]] = (
    set()
)  # (store, collection) whose segment this process has loaded and scrubbed


def _store_lock(store_dir: str) -> threading.Lock:
    with _clients_lock:
        return _store_locks.setdefault(store_dir, threading.Lock())


def _scrub(store_dir: str) -> None:
    """Zero the HNSW files' unused capacity (see ``vectorstore.scrub_unused_capacity``) of an embedded store.

    Chroma writes those files when a batch is added and when a process first loads a segment that holds no
    element yet; each such moment is followed by a scrub, under the store's lock, so a scrub never races a
    write of this process (a run directory is held by one process at a time).
    """
    if store_dir:
        from storyjudge.core.vectorstore import scrub_unused_capacity

        scrub_unused_capacity(store_dir)


def _fill(
    collection: Any, items: Sequence[dict[str, Any]], progress: Progress | None, store_dir: str = ""
) -> None:
    ordered = fill_order(items)
    for begin in range(0, len(ordered), BATCH):
        batch = ordered[begin : begin + BATCH]
        with _store_lock(store_dir):
            collection.add(
                ids=[item["id"] for item in batch],
                documents=[item["text"] for item in batch],
                metadatas=[item["metadata"] for item in batch],
            )
            _scrub(store_dir)
        if progress:
            progress(len(batch))


def _ensure_collection(
    client: Any,
    name: str,
    embedder: str,
    items: Sequence[dict[str, Any]],
    progress: Progress | None,
    store_dir: str = "",
) -> bool:
    """Create and fill a collection unless a complete one of this name exists; returns whether it did.

    A half-built one (a run stopped while embedding) is filled up: its name is a hash of what its passages are
    made from, so what it holds is some of these passages, and a resume embeds only the passages it lacks.
    """
    from storyjudge.core.vectorstore import collection

    existing = {getattr(c, "name", c) for c in client.list_collections()}
    held: set[str] = set()
    if name in existing:
        current = collection(client, name, embedder)
        complete = bool((current.metadata or {}).get("complete"))
        if complete and current.count() == len(items):
            return False
        if complete:  # complete, yet not these passages: built some other way, so built again
            client.delete_collection(name)
        else:
            held = set(current.get(include=[])["ids"])
    target = collection(client, name, embedder, {"complete": False, "embedder": embedder})
    if held and progress:
        progress(sum(1 for item in items if item["id"] in held))
    _fill(target, [item for item in items if item["id"] not in held], progress, store_dir)
    with _store_lock(store_dir):
        target.modify(metadata={"complete": True, "embedder": embedder, "items": len(items)})
        _scrub(store_dir)
    return True


@lru_cache(maxsize=1)
def _tokenizers_version() -> str:
    try:
        return metadata.version("tokenizers")
    except metadata.PackageNotFoundError:
        return ""


def collection_name(scenes: Sequence[Scene], embedder: str) -> str:
    """The scenes collection's name: a hash of everything its passages are made from.

    The passages follow from the scenes (text, id, order, title, offset), the embedder (its window and
    tokenizer) and how scenes are cut (``PASSAGE_SCHEME``, the tokenizer library's version). Naming the
    collection by those inputs rather than by the passages lets an unchanged document reuse its index
    without splitting it again and before the embedder is loaded: on Frankenstein (925 passages) the split
    alone took 2.7 s, all of it before a factscore run's first call.
    """
    scene_fields = [(s["id"], s["index"], s["title"], s["start"], s["text"]) for s in scenes]
    key = _digest([PASSAGE_SCHEME, _tokenizers_version(), embedder, scene_fields])
    return f"sj-scenes-{key[:32]}"


def embedder_passages(
    scenes: Sequence[Scene], embedder: str, go_on: Callable[[], None] | None = None
) -> list[dict[str, Any]]:
    """The passages an index of these scenes holds, cut with the embedder's own tokenizer (which loads it)."""
    model = get_embedder(embedder)
    window = passage_tokens(model.window_tokens)  # leaves room for the model's [CLS]/[SEP]
    return passages_of(scenes, window, model.count_tokens, go_on)


def _complete_size(client: Any, name: str, embedder: str) -> int | None:
    """Passages of a complete collection of this name, or None when there is none (or it is half built)."""
    from storyjudge.core.vectorstore import open_collection

    if name not in {getattr(c, "name", c) for c in client.list_collections()}:
        return None
    current = open_collection(client, name, embedder)
    meta = current.metadata or {}
    items = meta.get("items")
    if meta.get("complete") and isinstance(items, int) and current.count() == items:
        return items
    return None


def build_index(
    scenes: Sequence[Scene],
    *,
    store_dir: str | Path,
    chroma_url: str = "",
    embedder: str = "minilm",
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
    go_on: Callable[[], None] | None = None,
) -> tuple[IndexRef, bool]:
    """Index scenes, reusing a complete collection; returns the reference and whether it embedded anything.

    ``on_total`` hears the number of passages to embed before any work; ``progress`` hears
    each batch's size; ``go_on`` is asked between scenes while they are split, and may raise to stop.
    """
    store = "" if chroma_url else str(store_dir)
    client = _client(store, chroma_url)
    name = collection_name(scenes, embedder)
    built = False
    passages = _complete_size(client, name, embedder)
    if passages is None:
        items = embedder_passages(scenes, embedder, go_on)
        passages = len(items)
        if on_total:
            on_total(passages)
        built = _ensure_collection(client, name, embedder, items, progress, store)
    elif on_total:  # an unchanged document: neither split again nor the embedder loaded for it
        on_total(passages)
    ref = IndexRef(
        store_dir=store, chroma_url=chroma_url, embedder=embedder, scenes_collection=name, passages=passages
    )
    return ref, built


def _open(index: Mapping[str, Any], name: str) -> Any:
    from storyjudge.core.vectorstore import open_collection

    client = _client(str(index.get("store_dir", "")), str(index.get("chroma_url", "")))
    return open_collection(client, name, str(index.get("embedder", "minilm")))


def _scenes_key(index: Mapping[str, Any]) -> tuple[str, str, str]:
    """What names an index's scenes collection in this process: store, server URL, collection."""
    return (
        str(index.get("store_dir", "")),
        str(index.get("chroma_url", "")),
        str(index["scenes_collection"]),
    )


_searched_collections: dict[tuple[str, str, str], Any] = {}


def _searched(index: Mapping[str, Any]) -> Any:
    """The scenes collection a search reads, opened once per process (a search costs about 3 ms; opening 0.6)."""
    key = _scenes_key(index)
    with _clients_lock:
        found = _searched_collections.get(key)
    if found is None:
        found = _open(index, index["scenes_collection"])
        with _clients_lock:
            found = _searched_collections.setdefault(key, found)
    return found


def search_scenes(index: IndexRef, query: str, k: int) -> list[dict[str, Any]]:
    """The ``k`` scenes whose best passage ranks highest for the query, best first.

    Each hit is ``{"id", "title", "passage", "score"}``: ``passage`` is the scene's best passage and ``score``
    its fused rank score (dense similarity rank and BM25 rank, see the module docstring; higher is better).
    Scenes are distinct; fewer than ``k`` come back only when the document has fewer scenes.
    """
    return search_scenes_many(index, [query], k)[0]


def search_scenes_many(index: IndexRef, queries: Sequence[str], k: int) -> list[list[dict[str, Any]]]:
    """``search_scenes`` for each query, with one Chroma call for all of them.

    Why one call: Chroma's query lets go of the interpreter lock, and taking it back from the threads that
    read LLM answers waits up to a switch interval (5 ms), longer than the query itself (about 1.3 ms for one
    query, 1.6 ms for three). A sentence's facts are searched together.
    """
    out: list[list[dict[str, Any]]] = [[] for _ in queries]
    asked = [i for i, query in enumerate(queries) if query.strip()]
    if k < 1 or not asked:
        return out
    collection = _searched(index)
    lexical = _lexical(index, collection)
    total = len(lexical.scene_of)  # the complete collection's passages: what count() would ask Chroma for
    if total == 0:
        return out
    wanted = min(total, max(CANDIDATES, 10 * k))
    while asked:
        result = _query(index, collection, [queries[i] for i in asked], wanted)
        wider = []
        for row, i in enumerate(asked):
            ranked = _ranked(lexical, queries[i], result["ids"][row], result["distances"][row], wanted, k)
            if len(ranked) >= k or wanted >= total:
                out[i] = ranked[:k]
            else:  # too few distinct scenes among the candidates: ask for more
                wider.append(i)
        asked, wanted = wider, min(total, wanted * 4)
    return out


def _ranked(
    lexical: LexicalIndex, query: str, ids: Sequence[str], distances: Sequence[float], wanted: int, k: int
) -> list[dict[str, Any]]:
    """Scenes by their best passage's fused score, best first (at most ``k``, fewer if the candidates are)."""
    dense = {pid: 1.0 - float(d) for pid, d in zip(ids, distances, strict=True)}
    fused = _fuse(_scaled(dense), _scaled(lexical.top(query, wanted)))
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


def _query(index: Mapping[str, Any], collection: Any, queries: list[str], wanted: int) -> Any:
    """One dense query call; the first of a collection in this process loads its segment, which may rewrite it."""
    store_dir, name = str(index.get("store_dir", "")), str(index["scenes_collection"])
    if not store_dir or (store_dir, name) in _scrubbed:
        return collection.query(query_texts=queries, n_results=wanted, include=["distances"])
    with _store_lock(store_dir):
        result = collection.query(query_texts=queries, n_results=wanted, include=["distances"])
        if (store_dir, name) not in _scrubbed:
            _scrub(store_dir)
            _scrubbed.add((store_dir, name))
    return result


def _scaled(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores mapped onto [0, 1] over the candidates (all 1.0 when they are equal)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    return {key: (value - low) / (high - low) if high > low else 1.0 for key, value in scores.items()}


def _fuse(dense: Mapping[str, float], lexical: Mapping[str, float]) -> dict[str, float]:
    return {
        key: DENSE_WEIGHT * dense.get(key, 0.0) + (1.0 - DENSE_WEIGHT) * lexical.get(key, 0.0)
        for key in dense.keys() | lexical.keys()
    }


_TERM = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")


def terms(text: str) -> list[str]:
    """Lower-case word terms for lexical matching; apostrophes and hyphens stay inside ("o'er", "to-day")."""
    return _TERM.findall(text.casefold().replace("\u2019", "'"))


class LexicalIndex:
    """BM25 over a collection's passages, built once per process from what Chroma stores."""

    def __init__(
        self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]]
    ) -> None:
        self.text_of = dict(zip(ids, texts, strict=True))
        self.scene_of = {pid: str(meta["scene_id"]) for pid, meta in zip(ids, metadatas, strict=True)}
        self.title_of = {pid: str(meta.get("title", "")) for pid, meta in zip(ids, metadatas, strict=True)}
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
            postings = self.postings.get(term)
            if not postings:
                continue
            idf = math.log(1.0 + (size - len(postings) + 0.5) / (len(postings) + 0.5))
            for pid, tf in postings:
                norm = k1 * (1.0 - b + b * self.length[pid] / (self.average or 1.0))
                scores[pid] += repeats * idf * tf * (k1 + 1.0) / (tf + norm)
        return {pid: scores[pid] for pid in sorted(scores, key=lambda pid: (-scores[pid], pid))[:n]}


_lexical_indexes: dict[tuple[str, str, str], LexicalIndex] = {}
_lexical_lock = threading.Lock()


def _lexical(index: Mapping[str, Any], collection: Any) -> LexicalIndex:
    """The BM25 index of a scenes collection (collections are immutable once complete, so caching is safe)."""
    key = _scenes_key(index)
    with _lexical_lock:
        if key not in _lexical_indexes:
            stored = collection.get(include=["documents", "metadatas"])
            _lexical_indexes[key] = LexicalIndex(stored["ids"], stored["documents"], stored["metadatas"])
        return _lexical_indexes[key]
