"""Query vectors embedded ahead, in batches that the threads asking at once share.

Retrieval embeds a sentence's queries before searching (``prepare_queries``); whichever store then searches
finds them here (``prepared``) instead of embedding one query per forward pass.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from storyjudge.core.embeddings import get_embedder

PREPARED_QUERIES = 4096
"""Query vectors kept by ``prepare_queries`` (about 1.5 kB each for a 384-d embedder)."""
_prepared: OrderedDict[tuple[str, str], Any] = OrderedDict()
_prepared_lock = threading.Lock()


QUERY_BATCH = 4
"""Most queries one forward pass of ``prepare_queries`` takes, about one sentence's facts. The traced pass
costs about 6 ms plus 16-20 ms a query on one core, so a small batch costs hardly more a query than a large
one, and the first sentences' verdicts need not wait for sixteen queries to be embedded (factscore, 60 facts
at 16 in flight, measured side by side: 1.89-1.97 s with 4, 2.00-2.13 s with 16). Two passes at once, one per
core, were no faster: the LLM calls' client work needs the second core then."""

_waiting: dict[str, dict[str, None]] = {}  # embedder -> queries asked for and not embedded yet, oldest first
_embedding: set[str] = set()  # embedders with a batch in progress
_embedded = threading.Condition(_prepared_lock)  # notified after each batch


def prepare_queries(embedder: str, queries: Sequence[str]) -> None:
    """Embed many queries in batches, so the searches that follow skip one forward pass each.

    Retrieval asks Chroma one query at a time, and one forward pass per query costs 25 ms on an idle CPU core
    and far more on a busy one; a batch shares the pass. Callers in several threads at once (the factscore
    graph's sentence branches) share batches: queries wait in one list, oldest first, and a caller finding no
    batch in progress embeds the next ``QUERY_BATCH`` of them, its own or others'; the rest wait until theirs
    are done, so sixteen branches that ask together cost a few passes, not sixteen, and the first asked are
    the first ready.
    """
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
    if ready and all(vector is not None for vector in ready):
        return ready
    return None
