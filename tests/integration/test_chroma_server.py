"""Chroma as a server: a real ``chroma run`` on 127.0.0.1 gives the same retrieval as the embedded store.

The same scenes are indexed both ways (``Context.chroma_url`` empty: an embedded store in the run directory;
set: the server) and the same queries must rank the same scenes. The server runs offline, telemetry off.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storyjudge.core.sceneindex import build_index, search_scenes_many
from storyjudge.core.segmentation import scenes_from_list

pytestmark = pytest.mark.slow

CHROMA = Path(sys.executable).parent / "chroma"
SCENES = [
    "Three witches meet on a heath in thunder and lightning and plan to meet Macbeth.",
    "Lady Macbeth reads her husband's letter and resolves to push him to murder the king.",
    "Macbeth kills King Duncan in his sleep and returns with bloody daggers.",
    "Banquo's ghost appears at the feast and sits in Macbeth's place.",
    "Macduff learns that his wife and children have been slaughtered at Fife.",
]
QUERIES = [
    "Who stabs Duncan in his sleep?",
    "a ghost at the banquet",
    "the witches' prophecy on the heath",
    "Macduff's family is murdered",
    "a letter read aloud",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[str]:
    """``chroma run`` on a free port of 127.0.0.1, persisting in tmp_path; stopped by process id."""
    if not CHROMA.is_file():
        pytest.skip("the chroma CLI is not installed next to this Python")
    port = free_port()
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "CHROMA_TELEMETRY": "False"}
    log = (tmp_path / "chroma.log").open("wb")
    command = [
        str(CHROMA),
        "run",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--path",
        str(tmp_path / "srv"),
    ]
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # only bounds how long a failed start takes
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "chroma.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


def test_a_chroma_server_ranks_scenes_as_the_embedded_store_does(
    tmp_path: Path, chroma_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    scenes = scenes_from_list(SCENES)
    embedded, built_here = build_index(scenes, location=tmp_path / "embedded")
    served, built_there = build_index(scenes, location=chroma_server)
    assert built_here and built_there
    assert served["location"] == chroma_server and embedded["location"] == str(tmp_path / "embedded")
    assert embedded["scenes_collection"] == served["scenes_collection"]  # content-addressed, shareable
    for query in QUERIES:
        here = [hit["id"] for hit in search_scenes_many(embedded, [query], 3)[0]]
        there = [hit["id"] for hit in search_scenes_many(served, [query], 3)[0]]
        assert here == there, query
        assert len(here) == 3
    assert search_scenes_many(served, ["Who stabs Duncan in his sleep?"], 1)[0][0]["passage"] == SCENES[2]
    _, built_again = build_index(scenes, location=chroma_server)
    assert not built_again  # a second worker finds the collection complete and embeds nothing
    log = (tmp_path / "chroma.log").read_text(errors="replace").lower()
    assert "posthog" not in log and "telemetry event" not in log


@pytest.mark.slow
def test_an_embedded_store_after_a_server_stays_embedded(tmp_path: Path, chroma_server: str) -> None:
    """A server client must not leave its address behind for the next embedded client of the process."""
    from storyjudge.core.chromastore import chroma_client

    chroma_client("", chroma_server).heartbeat()
    embedded = chroma_client(tmp_path / "store")
    embedded.get_or_create_collection("probe")
    assert (tmp_path / "store" / "chroma.sqlite3").is_file()
