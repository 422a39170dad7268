"""`langgraph dev` serves every graph of langgraph.json, and a refine run over its HTTP API completes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import FIXED_SUMMARY, STORY, StoryResponder

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).parent / "langgraph"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not LANGGRAPH.exists(), reason="langgraph-cli[inmem] is not installed (make install adds it)"
    ),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(url: str, payload: dict[str, Any], timeout: float = 300) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def test_dev_server_serves_all_graphs_and_runs_refine(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "HF_HUB_OFFLINE": "1",
    }
    env_file = ROOT / ".env"  # langgraph.json reads it; the README says to copy .env.example, as here
    created = not env_file.exists()
    if created:
        shutil.copyfile(ROOT / ".env.example", env_file)
    log = (tmp_path / "dev.log").open("w")
    process = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/ok", timeout=2):
                    break
            except OSError:
                if time.time() > deadline or process.poll() is not None:
                    pytest.fail("langgraph dev did not start:\n" + (tmp_path / "dev.log").read_text()[-3000:])
                time.sleep(1)
        graphs = {a["graph_id"] for a in _post(f"{base}/assistants/search", {"limit": 20})}
        assert graphs == {"refine", "factscore", "index", "summarize", "coherence"}
        server = scripted_server(StoryResponder())
        context = {
            "model": "openai:scripted",
            "base_url": server.base_url,
            "ckg_samples": 1,
            "retry_budget_s": 0,
            "run_dir": str(tmp_path / "run"),
            "cache_dir": str(tmp_path / "cache"),
        }
        out = _post(
            f"{base}/runs/wait", {"assistant_id": "refine", "input": {"document": STORY}, "context": context}
        )
        assert out["summary"] == FIXED_SUMMARY, out
        assert [it["factscore"]["score"] for it in out["iterations"]] == pytest.approx([2 / 3, 1.0])
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        if created:
            env_file.unlink(missing_ok=True)
