"""SQLite cache of LLM answers keyed by model spec, prompt version and the full request.

A rerun, or a run resumed after a crash, reads every answer it already paid for from here. Only answers that
came back from the model whole and usable are stored: transport errors, empty and cut-off answers and structured
answers that do not parse as their schema are never cached. Keys name the server (its base URL) too.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def server_id(base_url: str) -> str:
    """A base URL as the cache tells servers apart.

    Scheme and host lower-cased, a default port and a trailing slash dropped; "" for no base URL and for OpenAI's
    own API (where no base URL goes too), so those keys are the same as before servers were part of them.
    """
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
    """Stable hash of everything that determines an answer.

    ``server`` (a ``server_id``) names who answers, so two servers serving a model of the same name never share
    answers; "" (embedded models, OpenAI's API) leaves it out of the key.
    """
    content: dict[str, Any] = {"spec": spec, "prompt": prompt_version, "request": request}
    if server:
        content["server"] = server
    payload = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


class CallCache:
    """A process-safe key/value store in ``<cache_dir>/llm_calls.sqlite`` (WAL, one connection per thread)."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "llm_calls.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")  # persistent: set once for the file
            conn.execute(
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, spec TEXT, prompt TEXT, "
                "response TEXT, created REAL DEFAULT (unixepoch('subsec')))"
            )

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            # With WAL, NORMAL still survives a killed process (only a power cut may lose the last answers,
            # which a rerun asks again); FULL would sync the disk on every answer stored (~6 ms per call).
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer for a key, or None."""
        row = self._connect().execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, spec: str, prompt_version: str, response: dict[str, Any]) -> None:
        """Store an answer (the last write wins)."""
        self._connect().execute(
            "INSERT OR REPLACE INTO calls (key, spec, prompt, response) VALUES (?, ?, ?, ?)",
            (key, spec, prompt_version, json.dumps(response)),
        )

    def __len__(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM calls").fetchone()[0])


_caches: dict[Path, CallCache] = {}
_named: dict[str, CallCache] = {}  # absolute directory names as given -> their cache
_lock = threading.Lock()


def cache_for(directory: str | Path) -> CallCache:
    """One CallCache per directory per process."""
    named = _named.get(str(directory))  # every LLM call asks: skip resolving the path (syscalls) each time
    if named is not None:
        return named
    key = Path(directory).resolve()
    with _lock:
        if key not in _caches:
            _caches[key] = CallCache(key)
        if Path(directory).is_absolute():  # a relative name means another folder after a chdir
            _named[str(directory)] = _caches[key]
        return _caches[key]
