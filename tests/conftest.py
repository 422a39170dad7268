"""Fixtures every test module may use: a scripted OpenAI-compatible server and a Context pointed at it.

Kept small and topic-free on purpose; fixtures for one topic belong in that topic's test module.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storyjudge.core.context import ENV_PREFIX, Context
from storyjudge.core.scripted_server import OpenAIServer, Responder

MAX_THREADS = 150
"""Threads the test process may hold after any test, native ones and idle workers included: runs release what
they open (a suite once reached 942), and no pool keeps the threads of its busiest moment."""

PLANTING_OFF = {f"{ENV_PREFIX}PLANTED_FACTS": "0", f"{ENV_PREFIX}PLANTED_SENTENCES": "0"}
"""Most scripted models approve every fact and find every sentence clear, which planted control items rightly
show to be unreliable judges; so tests plant nothing unless they ask (the ``planting`` fixture), and their call
counts stay those of the summary's own items."""


@pytest.fixture(autouse=True)
def _no_storyjudge_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see Context defaults, not the developer's shell-wide ``STORYJUDGE_*`` settings (planting off)."""
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    for name, value in PLANTING_OFF.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def planting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant control items as a user's run does (the Context defaults)."""
    for name in PLANTING_OFF:
        monkeypatch.delenv(name)


@pytest.fixture
def scripted_server() -> Iterator[Callable[..., OpenAIServer]]:
    """Factory: ``scripted_server(responder, **options)`` starts an OpenAIServer, stopped after the test."""
    started: list[OpenAIServer] = []

    def start(responder: Responder, **options: Any) -> OpenAIServer:
        server = OpenAIServer(responder, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def ctx_for(tmp_path: Path) -> Callable[..., Context]:
    """Factory: ``ctx_for(server, **fields)``, a Context sending every role to ``server``, cache in tmp_path.

    ``retry_budget_s`` defaults to 0 so a scripted fault surfaces at once instead of after back-off sleeps; pass
    ``retry_budget_s=`` to test retrying.
    """

    def make(server: OpenAIServer, **fields: Any) -> Context:
        values: dict[str, Any] = {
            "model": "openai:scripted",
            "base_url": server.base_url,
            "cache_dir": str(tmp_path / "cache"),
            "run_dir": str(tmp_path / "run"),
            "retry_budget_s": 0,
        }
        values.update(fields)
        return Context(**values)

    return make


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[Any]:
    """The web UI's server on a free port of 127.0.0.1, keeping its runs under ``tmp_path``; shut down after."""
    from storyjudge.apps.ui.server import make_server

    server = make_server("127.0.0.1", 0, runs_dir=tmp_path / "runs")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


_thread_peak: dict[str, Any] = {"threads": 0, "test": ""}


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Count the process's threads (native ones too) after each test; the session fails above ``MAX_THREADS``."""
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 0
    if threads > _thread_peak["threads"]:
        _thread_peak.update(threads=threads, test=item.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail a session whose process held more than ``MAX_THREADS`` threads after one of its tests."""
    if _thread_peak["threads"] > MAX_THREADS:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"The test process held {_thread_peak['threads']} threads (more than {MAX_THREADS}) after "
                f"{_thread_peak['test']}: something a run opened was not closed.",
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
