"""Query vectors embedded ahead (``prepare_queries``), in batches shared by the threads asking at once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from storyjudge.core.embeddings import get_embedder

PREPARED_QUERIES = 4096  # query vectors kept (about 1.5 kB each for a 384-d embedder)
_prepared: OrderedDict[tuple[str, str], Any] = OrderedDict()
_prepared_lock = threading.Lock()


QUERY_BATCH = 4  # queries per forward pass, about one sentence's facts: the first verdicts need not wait

_waiting: dict[str, dict[str, None]] = {}  # embedder -> queries asked for and not embedded yet, oldest first
_embedding: set[str] = set()  # embedders with a batch in progress
_embedded = threading.Condition(_prepared_lock)  # notified after each batch


def prepare_queries(embedder: str, queries: Sequence[str]) -> None:
    """Embed queries in batches shared by the threads asking at once (oldest first), for the searches to follow."""
    import numpy as np

    with _embedded:
        missing = list(dict.fromkeys(q for q in queries if (embedder, q) not in _prepared))
        if not missing:
            return
        _waiting.setdefault(embedder, {}).update(dict.fromkeys(missing))
    while True:
        with _embedded:
            left = [q for q in missing if (embedder, q) not in _prepared]
            if not left:
                return
            if embedder in _embedding:
                _embedded.wait()
                continue
            waiting = _waiting.setdefault(embedder, {})
            waiting.update(dict.fromkeys(q for q in left if q not in waiting))  # a failed batch lost them
            batch = list(waiting)[:QUERY_BATCH]
            for query in batch:
                del waiting[query]
            _embedding.add(embedder)
        vectors: list[list[float]] | None = None
        try:
            vectors = get_embedder(embedder).embed_documents(batch)
        finally:
            with _embedded:
                for text, vector in zip(batch, vectors or [], strict=False):
                    _prepared[(embedder, text)] = np.asarray(vector, dtype=np.float32)
                while len(_prepared) > PREPARED_QUERIES:
                    _prepared.popitem(last=False)
                _embedding.discard(embedder)
                _embedded.notify_all()


def prepared(embedder: str, texts: Sequence[str]) -> list[Any] | None:
    """The vectors ``prepare_queries`` embedded for all of ``texts``, or None when any is missing."""
    with _prepared_lock:
        ready = [_prepared.get((embedder, text)) for text in texts]
    return ready if ready and all(vector is not None for vector in ready) else None
