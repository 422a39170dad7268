"""The searchable index of a document: scenes as embedder-sized passages, and the linearized CKG, in Chroma.

A scene is never embedded as one truncated vector: it is cut (by ``textsplit``, with the embedder's own
tokenizer) into passages that fit the embedder's window, each pointing back to its scene, and a query ranks
scenes by their best passage. Collections are named by a hash of exactly what they hold (texts, passage
window, embedder), and marked complete only after the last batch, so indexing an unchanged document again
costs nothing, and a run that crashed halfway is rebuilt rather than trusted.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from state import IndexRef, Scene
from storyjudge.embeddings import get_embedder
from storyjudge.textsplit import split_by_tokens

PASSAGE_SCHEME = "v1"
"""Changes whenever the way scenes become passages changes, so old collections are not reused by mistake."""

BATCH = 64
"""Passages embedded and written per Chroma call."""

Progress = Callable[[int], None]


def _client(store_dir: str, chroma_url: str) -> Any:
    from storyjudge.vectorstore import chroma_client

    with _clients_lock:
        key = (store_dir, chroma_url)
        if key not in _clients:
            _clients[key] = chroma_client(store_dir, chroma_url)
        return _clients[key]


_clients: dict[tuple[str, str], Any] = {}
_clients_lock = threading.Lock()


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def passages_of(
    scenes: Sequence[Scene], window_tokens: int, count: Callable[[str], int]
) -> list[dict[str, Any]]:
    """Passages of every scene that fit ``window_tokens`` of the embedder, with where they come from."""
    passages: list[dict[str, Any]] = []
    for scene in scenes:
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


def _fill(collection: Any, items: Sequence[dict[str, Any]], progress: Progress | None) -> None:
    for begin in range(0, len(items), BATCH):
        batch = items[begin : begin + BATCH]
        collection.add(
            ids=[item["id"] for item in batch],
            documents=[item["text"] for item in batch],
            metadatas=[item["metadata"] for item in batch],
        )
        if progress:
            progress(len(batch))


def _ensure_collection(
    client: Any, name: str, embedder: str, items: Sequence[dict[str, Any]], progress: Progress | None
) -> bool:
    """Create and fill a collection unless a complete one of this name exists; returns whether it did."""
    from storyjudge.vectorstore import collection

    existing = {getattr(c, "name", c) for c in client.list_collections()}
    if name in existing:
        current = collection(client, name, embedder)
        if (current.metadata or {}).get("complete") and current.count() == len(items):
            return False
        client.delete_collection(name)  # a half-built collection from an interrupted run
    target = collection(client, name, embedder, {"complete": False, "embedder": embedder})
    _fill(target, items, progress)
    target.modify(metadata={"complete": True, "embedder": embedder, "items": len(items)})
    return True


def plan(scenes: Sequence[Scene], ckg_lines: Sequence[str], embedder: str) -> dict[str, Any]:
    """What an index of these scenes and lines consists of: passages, lines, and the collection names."""
    model = get_embedder(embedder)
    window = max(16, model.window_tokens - 2)  # room for the model's [CLS]/[SEP]
    passages = passages_of(scenes, window, model.count_tokens)
    lines = [
        {"id": f"L{number:05d}", "text": line, "metadata": {"line": number}}
        for number, line in enumerate(dict.fromkeys(ckg_lines), start=1)
        if line.strip()
    ]
    scene_key = _digest(
        [PASSAGE_SCHEME, embedder, window, [(p["id"], p["text"], p["metadata"]) for p in passages]]
    )
    ckg_key = _digest([PASSAGE_SCHEME, embedder, [line["text"] for line in lines]])
    return {
        "passages": passages,
        "lines": lines,
        "scenes_collection": f"sj-scenes-{scene_key[:32]}",
        "ckg_collection": f"sj-ckg-{ckg_key[:32]}",
    }


def build_index(
    scenes: Sequence[Scene],
    ckg_lines: Sequence[str],
    *,
    store_dir: str | Path,
    chroma_url: str = "",
    embedder: str = "minilm",
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> tuple[IndexRef, bool]:
    """Index scenes and CKG lines, reusing complete collections; returns the reference and whether it worked.

    ``on_total`` hears the number of items to embed before any work; ``progress`` hears each batch's size.
    """
    layout = plan(scenes, ckg_lines, embedder)
    store = "" if chroma_url else str(store_dir)
    client = _client(store, chroma_url)
    if on_total:
        on_total(len(layout["passages"]) + len(layout["lines"]))
    built_scenes = _ensure_collection(
        client, layout["scenes_collection"], embedder, layout["passages"], progress
    )
    built_ckg = _ensure_collection(client, layout["ckg_collection"], embedder, layout["lines"], progress)
    ref = IndexRef(
        store_dir=store,
        chroma_url=chroma_url,
        embedder=embedder,
        scenes_collection=layout["scenes_collection"],
        ckg_collection=layout["ckg_collection"],
        passages=len(layout["passages"]),
    )
    return ref, built_scenes or built_ckg


def _open(index: Mapping[str, Any], name: str) -> Any:
    from storyjudge.vectorstore import open_collection

    client = _client(str(index.get("store_dir", "")), str(index.get("chroma_url", "")))
    return open_collection(client, name, str(index.get("embedder", "minilm")))


def search_scenes(index: IndexRef, query: str, k: int) -> list[dict[str, Any]]:
    """The ``k`` scenes whose best passage is nearest the query, best first.

    Each hit is ``{"id", "title", "passage", "score"}`` where ``passage`` is the scene's best passage and
    ``score`` its cosine similarity. Scenes are distinct; fewer than ``k`` come back only when the document
    has fewer scenes.
    """
    if k < 1 or not query.strip():
        return []
    collection = _open(index, index["scenes_collection"])
    total = collection.count()
    if total == 0:
        return []
    wanted = min(total, max(4 * k, 16))
    while True:
        result = collection.query(
            query_texts=[query], n_results=wanted, include=["documents", "metadatas", "distances"]
        )
        best: dict[str, dict[str, Any]] = {}
        for text, meta, distance in zip(
            result["documents"][0], result["metadatas"][0], result["distances"][0], strict=True
        ):
            scene_id = str(meta["scene_id"])
            if scene_id not in best:  # results come nearest first: the first passage of a scene is its best
                best[scene_id] = {
                    "id": scene_id,
                    "title": str(meta.get("title", "")),
                    "passage": text,
                    "score": round(1.0 - float(distance), 6),
                }
        if len(best) >= k or wanted >= total:
            return sorted(best.values(), key=lambda hit: -hit["score"])[:k]
        wanted = min(total, wanted * 4)


def search_ckg(index: IndexRef, query: str, k: int) -> list[str]:
    """The ``k`` linearized CKG lines nearest the query, best first."""
    if k < 1 or not query.strip() or not index.get("ckg_collection"):
        return []
    collection = _open(index, index["ckg_collection"])
    total = collection.count()
    if total == 0:
        return []
    result = collection.query(query_texts=[query], n_results=min(k, total), include=["documents"])
    return [str(text) for text in result["documents"][0]]
