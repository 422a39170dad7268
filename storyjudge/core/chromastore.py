"""Chroma behind the scene index: an embedded store in the run directory, or a Chroma server by URL."""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import chromadb  # noqa: E402 - telemetry must be off before import
from chromadb.api import ClientAPI  # noqa: E402
from chromadb.api.client import Client  # noqa: E402
from chromadb.api.models.Collection import Collection  # noqa: E402
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings  # noqa: E402
from chromadb.config import Settings  # noqa: E402
from chromadb.utils.embedding_functions import register_embedding_function  # noqa: E402

from storyjudge.core.embeddings import get_embedder  # noqa: E402
from storyjudge.core.queryvectors import prepared  # noqa: E402
from storyjudge.core.records import Passage  # noqa: E402

log = logging.getLogger(__name__)


@register_embedding_function
class StoryjudgeEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma adapter over ``storyjudge.core.embeddings``: Chroma never falls back to its downloading default."""

    def __init__(self, embedder: str = "minilm") -> None:
        self.embedder = embedder

    def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - Chroma's protocol names it so
        """Embed documents with the configured embedder (queries embedded ahead by ``prepare_queries``)."""
        import numpy as np

        ready = prepared(self.embedder, input)
        if ready is not None:
            return ready
        vectors = get_embedder(self.embedder).embed_documents(list(input))
        return [np.asarray(v, dtype=np.float32) for v in vectors]

    @staticmethod
    def name() -> str:
        """Registry name stored in the collection's configuration."""
        return "storyjudge"

    def get_config(self) -> dict[str, Any]:
        """What Chroma persists to rebuild this function."""
        return {"embedder": self.embedder}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> StoryjudgeEmbeddingFunction:
        """Rebuild from persisted config, reusing the already loaded model."""
        return StoryjudgeEmbeddingFunction(config.get("embedder", "minilm"))

    def default_space(self) -> str:  # type: ignore[override]
        """Vectors are unit-normalised: cosine distance."""
        return "cosine"

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        """Changing the embedder would silently mix vector spaces: refuse."""
        if old_config.get("embedder") != new_config.get("embedder"):
            raise ValueError("a collection's embedder cannot change; index into a new collection")


def chroma_client(store_dir: str | Path, url: str = "") -> ClientAPI:
    """An embedded persistent client under ``store_dir``, or an HTTP client for a Chroma server URL.

    Each gets fresh settings: Chroma writes the server address into the settings object it is given.
    """
    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if url:
        parsed = urlparse(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 8000)
        host, https = parsed.hostname or "127.0.0.1", parsed.scheme == "https"
        return chromadb.HttpClient(host=host, port=port, ssl=https, settings=settings)
    Path(store_dir).mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(store_dir), settings=settings)


def collection(
    client: ClientAPI, name: str, embedder: str, metadata: dict[str, Any] | None = None
) -> Collection:
    """Get or create a cosine collection with storyjudge's embedding function."""
    return client.get_or_create_collection(
        name=name,
        embedding_function=StoryjudgeEmbeddingFunction(embedder),  # type: ignore[arg-type]
        configuration={"hnsw": {"space": "cosine"}},
        metadata=metadata or None,
    )


def open_collection(client: ClientAPI, name: str, embedder: str) -> Collection:
    """An existing collection, always with storyjudge's embedding function (never Chroma's downloading default)."""
    return client.get_collection(name=name, embedding_function=StoryjudgeEmbeddingFunction(embedder))  # type: ignore[arg-type]


def _is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


OPEN_STORES = 2  # idle stores whose clients (native threads, loaded segments) stay open; the rest are closed


class OpenStore:
    """One store's client while open: its users now, its collections, its lock, what was scrubbed there."""

    def __init__(self, location: str) -> None:
        url = location if _is_url(location) else ""
        self.client = chroma_client("" if url else location, url)
        self.users = 0
        self.collections: dict[str, Collection] = {}
        self.lock = threading.Lock()
        self.scrubbed: set[str] = set()  # collections whose loaded segment this client scrubbed

    def close(self) -> None:
        """Forget the collections and close the client (Chroma stops a system once none of its clients is left)."""
        self.collections.clear()
        if isinstance(self.client, Client):  # every client ``chroma_client`` makes
            self.client.close()


_open: OrderedDict[str, OpenStore] = OrderedDict()  # least recently used first
_open_lock = threading.Lock()


@contextmanager
def store_at(location: str) -> Iterator[OpenStore]:
    """The store's open client, held inside the block; then idle stores beyond ``OPEN_STORES`` are closed."""
    key = location if _is_url(location) else os.path.realpath(location)
    with _open_lock:
        store = _open.get(key)
        if store is None:
            store = _open[key] = OpenStore(location)
        store.users += 1
        _open.move_to_end(key)
    try:
        yield store
    finally:
        # closed under the lock: a store opened again meanwhile would share a stopping system
        with _open_lock:
            store.users -= 1
            idle = [name for name, held in _open.items() if not held.users]
            for name in idle[: max(0, len(idle) - OPEN_STORES)]:
                _open.pop(name).close()


class ChromaIndex:
    """A ``SceneIndex`` in a Chroma collection of a store directory (scrubbed after writes) or a server URL."""

    def __init__(self, location: str, name: str, embedder: str) -> None:
        self.location, self.name, self.embedder = location, name, embedder
        self.store_dir = "" if _is_url(location) else location

    def _collection(self, store: OpenStore, create: bool = False) -> Collection:
        """The collection, opened once per client; created only to be filled (a gone one fails a search)."""
        if self.name not in store.collections:
            client, meta = store.client, {"complete": False, "embedder": self.embedder}
            if create:
                store.collections[self.name] = collection(client, self.name, self.embedder, meta)
            else:
                store.collections[self.name] = open_collection(client, self.name, self.embedder)
        return store.collections[self.name]

    def _exists(self, store: OpenStore) -> bool:
        listed = store.client.list_collections
        return self.name in store.collections or self.name in {getattr(c, "name", c) for c in listed()}

    def size(self) -> int | None:
        """Passages of a complete collection; None when there is none or it is half built."""
        with store_at(self.location) as store:
            if not self._exists(store):
                return None
            found = self._collection(store)
            meta = found.metadata or {}
            items = meta.get("items")
            if meta.get("complete") and isinstance(items, int) and found.count() == items:
                return items
            return None

    def add(self, passages: Sequence[Passage], total: int) -> None:
        """One Chroma call for the batch; marked complete once the collection holds ``total``."""
        with store_at(self.location) as store:
            target = self._collection(store, create=True)
            with store.lock:
                if passages:
                    target.add(
                        ids=[p["id"] for p in passages],
                        documents=[p["text"] for p in passages],
                        metadatas=[p["metadata"] for p in passages],
                    )
                if target.count() == total:
                    target.modify(metadata={"complete": True, "embedder": self.embedder, "items": total})
                if self.store_dir:
                    scrub_unused_capacity(self.store_dir)

    def search(self, queries: Sequence[str], n: int) -> list[list[tuple[str, float]]]:
        """One query call for all the queries; Chroma's cosine distance turned back into similarity."""
        with store_at(self.location) as store:
            first = bool(self.store_dir) and self.name not in store.scrubbed  # loads the segment: scrub after
            with store.lock if first else nullcontext():
                result = self._collection(store).query(
                    query_texts=list(queries), n_results=n, include=["distances"]
                )
                if first and self.name not in store.scrubbed:
                    scrub_unused_capacity(self.store_dir)
                    store.scrubbed.add(self.name)
        return [
            [(pid, 1.0 - float(d)) for pid, d in zip(ids, far, strict=True)]
            for ids, far in zip(result["ids"], result["distances"] or [], strict=True)
        ]

    def get(self, ids: Sequence[str] | None = None) -> list[Passage]:
        """Kept passages with their metadata (none of a collection not created yet)."""
        with store_at(self.location) as store:
            if not self._exists(store):
                return []
            asked = None if ids is None else list(ids)
            stored = self._collection(store).get(ids=asked, include=["documents", "metadatas"])
        texts, metas = stored["documents"] or [], stored["metadatas"] or []
        return [
            {"id": pid, "text": text, "metadata": dict(meta)}
            for pid, text, meta in zip(stored["ids"], texts, metas, strict=True)
        ]


_HNSW_HEADER = struct.Struct(
    "<iQQQQQQiIQQQdQ"
)  # header.bin: fields 2-4 are max_elements, count, element size
_LEVEL_BYTES = 4  # length.bin: one int32 level per reserved element


def scrub_unused_capacity(store_dir: str | Path) -> int:
    """Zero the never-set reservation of Chroma's HNSW files (it may hold freed API keys); bytes that were not zero."""
    nonzero = 0
    for header_path in Path(store_dir).glob("*/header.bin"):
        segment = header_path.parent
        data_path, levels_path = segment / "data_level0.bin", segment / "length.bin"
        try:
            header = header_path.read_bytes()
            fields = _HNSW_HEADER.unpack_from(header) if len(header) == _HNSW_HEADER.size else None
        except OSError:
            continue  # a segment being deleted
        if fields is None:
            log.warning("HNSW header of unknown layout left as it is: %s", header_path)
            continue
        capacity, count, element_bytes = int(fields[2]), int(fields[3]), int(fields[4])
        for path, unit in ((data_path, element_bytes), (levels_path, _LEVEL_BYTES)):
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size != capacity * unit or count > capacity:
                log.warning("HNSW file of unexpected size left as it is: %s", path)
                continue
            with path.open("r+b") as handle:
                handle.seek(count * unit)
                tail = handle.read()
                if tail.count(0) < len(tail):
                    nonzero += len(tail) - tail.count(0)
                    handle.seek(count * unit)
                    handle.write(bytes(len(tail)))
                    handle.flush()
                    os.fsync(handle.fileno())
    return nonzero
