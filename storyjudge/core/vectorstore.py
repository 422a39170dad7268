"""The Chroma factory: an embedded store in the run directory, or a Chroma server by URL.

Collections always carry storyjudge's own embedding function (registered with Chroma, rebuilt from its config),
so Chroma never falls back to its default function, which would download a model.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import chromadb  # noqa: E402 - telemetry must be off before import
from chromadb.api import ClientAPI  # noqa: E402
from chromadb.api.models.Collection import Collection  # noqa: E402
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings  # noqa: E402
from chromadb.config import Settings  # noqa: E402
from chromadb.utils.embedding_functions import register_embedding_function  # noqa: E402

from storyjudge.core.embeddings import get_embedder  # noqa: E402


@register_embedding_function
class StoryjudgeEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma adapter over ``storyjudge.core.embeddings`` (the model is shared with the rest of the process)."""

    def __init__(self, embedder: str = "minilm") -> None:
        self.embedder = embedder

    def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - Chroma's protocol names it so
        """Embed documents with the configured embedder (queries embedded ahead by ``prepare_queries``)."""
        import numpy as np

        with _prepared_lock:
            ready = [_prepared.get((self.embedder, text)) for text in input]
        if ready and all(vector is not None for vector in ready):
            return [vector for vector in ready if vector is not None]
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

    def supported_spaces(self) -> list[str]:  # type: ignore[override]
        """Spaces that make sense for normalised vectors."""
        return ["cosine", "ip", "l2"]

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        """Changing the embedder would silently mix vector spaces: refuse."""
        if old_config.get("embedder") != new_config.get("embedder"):
            raise ValueError("a collection's embedder cannot change; index into a new collection")

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        """Any embedder spec is resolved lazily by get_embedder."""
        return


PREPARED_QUERIES = 4096
"""Query vectors kept by ``prepare_queries`` (about 1.5 kB each for a 384-d embedder)."""
_prepared: OrderedDict[tuple[str, str], Any] = OrderedDict()
_prepared_lock = threading.Lock()


def prepare_queries(embedder: str, queries: Sequence[str]) -> None:
    """Embed many queries in one batch, so the searches that follow skip one forward pass each.

    Retrieval asks Chroma one query at a time; one forward pass per query costs 25 ms on an idle CPU core and
    ~0.4 s on a busy one, while a batch of 60 queries costs about as much as a few single ones.
    """
    import numpy as np

    with _prepared_lock:
        missing = list(dict.fromkeys(q for q in queries if (embedder, q) not in _prepared))
    if not missing:
        return
    vectors = get_embedder(embedder).embed_documents(missing)
    with _prepared_lock:
        for text, vector in zip(missing, vectors, strict=True):
            _prepared[(embedder, text)] = np.asarray(vector, dtype=np.float32)
        while len(_prepared) > PREPARED_QUERIES:
            _prepared.popitem(last=False)


def _settings() -> Settings:
    """Fresh client settings for every client.

    Chroma's client constructors write the server address and API into the settings object they are given, so one
    shared object would send a later embedded store to an earlier server.
    """
    return Settings(anonymized_telemetry=False, allow_reset=False)


def chroma_client(store_dir: str | Path, url: str = "") -> ClientAPI:
    """An embedded persistent client under ``store_dir``, or an HTTP client for a Chroma server URL."""
    if url:
        parsed = urlparse(url)
        return chromadb.HttpClient(
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or (443 if parsed.scheme == "https" else 8000),
            ssl=parsed.scheme == "https",
            settings=_settings(),
        )
    Path(store_dir).mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(store_dir), settings=_settings())


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
