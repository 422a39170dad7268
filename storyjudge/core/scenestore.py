"""The retrieval seam: what the scene index asks of a vector store, and the one place that picks the store."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from storyjudge.core.context import Context
from storyjudge.core.embeddings import get_embedder
from storyjudge.core.queryvectors import prepared
from storyjudge.core.records import Passage
from storyjudge.core.rundir import RunDir

STORES = ("chroma", "memory")


class SceneIndex(Protocol):
    """One document's passages in a store: all that building and searching an index needs of it."""

    def size(self) -> int | None:
        """Passages of the index once complete; None when it was never built or was stopped halfway."""

    def add(self, passages: Sequence[Passage], total: int) -> None:
        """Embed and keep ``passages``; the index is complete once it holds ``total``."""

    def search(self, queries: Sequence[str], n: int) -> list[list[tuple[str, float]]]:
        """For each query, the ``n`` nearest passages as (id, cosine similarity), nearest first."""

    def get(self, ids: Sequence[str] | None = None) -> list[Passage]:
        """The kept passages with these ids (every passage when None)."""


class MemoryIndex:
    """A ``SceneIndex`` in this process's memory: exact cosine similarity over every passage's vector."""

    def __init__(self, embedder: str) -> None:
        self.embedder = embedder
        self.passages: dict[str, Passage] = {}
        self.vectors: dict[str, Any] = {}
        self.total: int | None = None
        self._lock = threading.Lock()

    def size(self) -> int | None:
        """Passages once complete, else None."""
        return self.total

    def add(self, passages: Sequence[Passage], total: int) -> None:
        """Embed as indexing does (``embed_documents``) and keep the unit vectors."""
        texts = [p["text"] for p in passages]
        vectors = _unit(get_embedder(self.embedder).embed_documents(texts)) if texts else []
        with self._lock:
            for passage, vector in zip(passages, vectors, strict=True):
                self.passages[passage["id"]] = dict(passage)
                self.vectors[passage["id"]] = vector
            if len(self.passages) == total:
                self.total = total

    def search(self, queries: Sequence[str], n: int) -> list[list[tuple[str, float]]]:
        """Dot products of unit vectors: the cosine similarity Chroma ranks by, computed exactly."""
        import numpy as np

        with self._lock:
            ids = list(self.vectors)
            matrix = np.stack([self.vectors[pid] for pid in ids]) if ids else None
        if matrix is None:
            return [[] for _ in queries]
        asked = prepared(self.embedder, queries) or get_embedder(self.embedder).embed_documents(list(queries))
        similarity, names = np.stack(_unit(asked)) @ matrix.T, np.array(ids)
        # most similar first, ties by id
        return [[(ids[i], float(row[i])) for i in np.lexsort((names, -row))[:n]] for row in similarity]

    def get(self, ids: Sequence[str] | None = None) -> list[Passage]:
        """Kept passages, in the order asked (or added)."""
        with self._lock:
            wanted = list(self.passages) if ids is None else [pid for pid in ids if pid in self.passages]
            return [dict(self.passages[pid]) for pid in wanted]


def _unit(vectors: Sequence[Sequence[float]]) -> list[Any]:
    import numpy as np

    arrays = [np.asarray(vector, dtype=np.float32) for vector in vectors]
    return [array / norm if (norm := float(np.linalg.norm(array))) else array for array in arrays]


_indexes: dict[tuple[str, str, str, str], SceneIndex] = {}
_indexes_lock = threading.Lock()


def scene_index(store: str, location: str, name: str, embedder: str, *, create: bool = False) -> SceneIndex:
    """The index ``name`` of a store, opened once per process; a memory index only where it was built."""
    key = (store, location, name, embedder)
    with _indexes_lock:
        found = _indexes.get(key)
    if found is not None:
        return found
    if store == "chroma":
        from storyjudge.core.chromastore import ChromaIndex

        opened: SceneIndex = ChromaIndex(location, name, embedder)
    elif store == "memory":
        if not create:
            raise ValueError(
                f"The in-memory scene index {name} went with the process that built it; run again without "
                "--resume, or with scene_store=chroma to keep the index in the run directory."
            )
        opened = MemoryIndex(embedder)
    else:
        raise ValueError(f"Unknown scene store {store!r}: use one of {', '.join(STORES)}.")
    with _indexes_lock:
        return _indexes.setdefault(key, opened)


def store_for(ctx: Context, run_dir: str | Path) -> tuple[str, str]:
    """The store and location a run indexes into: Chroma at ``chroma_url`` or in the run directory, or memory."""
    if ctx.scene_store == "memory":
        return "memory", ""
    return "chroma", ctx.chroma_url or str(RunDir(Path(run_dir)).chroma)


def where(index: Mapping[str, Any]) -> tuple[str, str]:
    """An index reference's store and location; references written before stores were named are Chroma's."""
    if "store" in index:
        return str(index["store"]), str(index.get("location", ""))
    return "chroma", str(index.get("chroma_url") or index.get("store_dir") or "")


def still_there(index: Mapping[str, Any]) -> bool:
    """Whether an index an earlier process built may still be opened (checked without opening the store)."""
    store, location = where(index)
    if store == "memory":
        with _indexes_lock:
            return any(key[0] == "memory" and key[2] == index.get("scenes_collection") for key in _indexes)
    return location.startswith(("http://", "https://")) or Path(location).exists()
