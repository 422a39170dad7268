"""SQLite cache of LLM answers keyed by model spec, prompt version and the full request.

A rerun, or a run resumed after a crash, reads every answer it already paid for from here. Only answers that
came back from the model are stored; transport errors are never cached.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any


def request_key(spec: str, prompt_version: str, request: dict[str, Any]) -> str:
    """Stable hash of everything that determines an answer."""
    payload = json.dumps(
        {"spec": spec, "prompt": prompt_version, "request": request}, sort_keys=True, default=str
    )
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
_lock = threading.Lock()


def cache_for(directory: str | Path) -> CallCache:
    """One CallCache per directory per process."""
    key = Path(directory).resolve()
    with _lock:
        if key not in _caches:
            _caches[key] = CallCache(key)
        return _caches[key]
