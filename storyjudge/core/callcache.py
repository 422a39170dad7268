"""SQLite cache of whole, usable LLM answers keyed by spec, prompt version, server and request."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def server_id(base_url: str) -> str:
    """A base URL as the cache tells servers apart, normalised; "" for none and for OpenAI's own API."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").rstrip(".")
    if not base_url.strip() or host == "api.openai.com":
        return ""
    scheme = parts.scheme.lower()
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None and (scheme, parts.port) not in (("http", 80), ("https", 443)):
        netloc += f":{parts.port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def request_key(spec: str, prompt_version: str, request: dict[str, Any], server: str = "") -> str:
    """Stable hash of everything that determines an answer, the server (a ``server_id``) included."""
    content: dict[str, Any] = {"spec": spec, "prompt": prompt_version, "request": request}
    if server:
        content["server"] = server
    payload = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


IDLE_CONNECTIONS = 4  # connections a cache keeps open between calls
OPEN_CACHES = 8  # caches keeping idle connections; the least recently used beyond these close theirs


class CallCache:
    """A process-safe store in ``<cache_dir>/llm_calls.sqlite`` (WAL), its connections pooled, not per thread."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "llm_calls.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._idle: list[sqlite3.Connection] = []
        self._idle_lock = threading.Lock()
        with self._connection() as conn:
            conn.execute("PRAGMA journal_mode=WAL")  # persistent: set once for the file
            conn.execute(
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, spec TEXT, prompt TEXT, "
                "response TEXT, created REAL DEFAULT (unixepoch('subsec')))"
            )

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._idle_lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            # with WAL, NORMAL survives a killed process; FULL would sync the disk on every answer stored
            conn.execute("PRAGMA synchronous=NORMAL")
        try:
            yield conn
        finally:
            with self._idle_lock:
                keep = len(self._idle) < IDLE_CONNECTIONS
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()
            _used(self)

    def close(self) -> None:
        """Close the idle connections (the cache stays usable: it opens new ones when asked)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer for a key, or None."""
        with self._connection() as conn:
            row = conn.execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, spec: str, prompt_version: str, response: dict[str, Any]) -> None:
        """Store an answer (the last write wins)."""
        with self._connection() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO calls (key, spec, prompt, response) VALUES (?, ?, ?, ?)",
                (key, spec, prompt_version, json.dumps(response)),
            )

    def __len__(self) -> int:
        with self._connection() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])


_recent: OrderedDict[int, CallCache] = OrderedDict()  # caches holding idle connections, least recent first
_recent_lock = threading.Lock()


def _used(cache: CallCache) -> None:
    with _recent_lock:
        _recent[id(cache)] = cache
        _recent.move_to_end(id(cache))
        stale = [_recent.popitem(last=False)[1] for _ in range(max(0, len(_recent) - OPEN_CACHES))]
    for old in stale:
        old.close()


_caches: dict[Path, CallCache] = {}
_named: dict[str, CallCache] = {}  # absolute directory names as given -> their cache
_lock = threading.Lock()


def cache_for(directory: str | Path) -> CallCache:
    """One CallCache per directory per process."""
    if (named := _named.get(str(directory))) is not None:  # every LLM call asks: no path resolved (syscalls)
        return named
    key = Path(directory).resolve()
    with _lock:
        if key not in _caches:
            _caches[key] = CallCache(key)
        if Path(directory).is_absolute():  # a relative name means another folder after a chdir
            _named[str(directory)] = _caches[key]
        return _caches[key]
