"""``storyjudge data get`` against a local HTTP server that serves the published files' layout on 127.0.0.1.

``STORYJUDGE_DATA_URL`` points the downloader at the server (``/<owner>/<repo>/<commit>/<path>``), and
``STORYJUDGE_DATA_DIR`` at a temporary cache: nothing leaves the machine. The SQuALITY dev file served is the
bundled one, so its pinned checksum is the real one; a damaged, cut-off or missing file must leave nothing
written and say what to do in one line; a fetched split is then usable by name.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from eval.datasets import SQUALITY_DEV, STORYSUMM_VAL
from eval.download import SOURCES
from storyjudge.apps.cli import app

SHARED_BOOOOKSCORE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "booookscore"


class Files:
    """What the server answers: path -> bytes; ``cut`` paths announce more bytes than they send."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.cut: set[str] = set()
        self.requests: list[str] = []

    def put(self, dataset: str, split: str, role: str, body: bytes) -> None:
        source = SOURCES[(dataset, split)][role]
        self.files[f"/{source.repo}/{source.commit}/{source.path}"] = body


@pytest.fixture
def served() -> Iterator[tuple[Files, str]]:
    files = Files()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            files.requests.append(self.path)
            body = files.files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2] if self.path in files.cut else body)
            self.close_connection = True

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield files, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _storysumm_file() -> bytes:
    """The published layout (indent 4, every split): the bundled val records and two test records."""
    records = json.loads(STORYSUMM_VAL.read_text(encoding="utf-8"))
    for n, record in enumerate(list(records.values())[:2]):
        records[f"test{n}"] = {**record, "split": "test"}
    return json.dumps(records, indent=4).encode()


def _data(args: list[str], cache: Path, base: str) -> Any:
    env = {"STORYJUDGE_DATA_DIR": str(cache), "STORYJUDGE_DATA_URL": base, "COLUMNS": "300"}
    return CliRunner().invoke(app, args, env=env)


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_get_checks_converts_and_the_name_then_works(served: tuple[Files, str], tmp_path: Path) -> None:
    files, base = served
    cache = tmp_path / "cache"
    files.put("squality", "dev", "split", SQUALITY_DEV.read_bytes())
    got = _data(["data", "get", "squality"], cache, base)
    assert got.exit_code == 0, got.output
    assert (cache / "squality" / "dev.jsonl").read_bytes() == SQUALITY_DEV.read_bytes()  # pinned sha256 held
    assert f"squality:dev: 25 item(s) -> {cache / 'squality' / 'dev.jsonl'}" in got.output
    assert "storyjudge eval squality squality:dev" in got.output
    assert all(path.startswith("/nyu-mll/SQuALITY/") for path in files.requests)

    files.put("storysumm", "test", "all", _storysumm_file())
    got = _data(["data", "get", "storysumm", "--split", "test"], cache, base)
    assert got.exit_code == 0, got.output
    test_split = json.loads((cache / "storysumm" / "test.json").read_text(encoding="utf-8"))
    assert sorted(test_split) == ["test0", "test1"]
    assert "no published checksum" in got.output  # held to the recorded one from now on
    manifest = json.loads((cache / "storysumm" / "SOURCES.json").read_text(encoding="utf-8"))
    assert manifest["storysumm.json"]["pinned"] is False and len(manifest["storysumm.json"]["sha256"]) == 64

    # the val split converts from the same file, not fetched again, into the bundled copy's bytes
    asked = len(files.requests)
    got = _data(["data", "get", "storysumm", "--split", "val"], cache, base)
    assert got.exit_code == 0, got.output
    assert len(files.requests) == asked
    assert (cache / "storysumm" / "val.json").read_bytes() == STORYSUMM_VAL.read_bytes()
    assert "differs" not in got.output

    # eval takes the name; the dry run calls no model
    dry = _data(
        ["eval", "storysumm", "storysumm:test", "--dry-run", "--out-dir", str(tmp_path / "exp")], cache, base
    )
    assert dry.exit_code == 0, dry.output
    assert "Dry run" in dry.output

    # the published file changes: refused against the recorded checksum, the old split kept
    before = (cache / "storysumm" / "test.json").read_bytes()
    files.put("storysumm", "test", "all", _storysumm_file().replace(b"Daniel", b"Dennis"))
    refused = _data(["data", "get", "storysumm", "--split", "test", "--force"], cache, base)
    assert refused.exit_code == 1
    assert "does not match its checksum" in refused.output and "nothing was written" in refused.output
    assert (cache / "storysumm" / "test.json").read_bytes() == before
    assert not [p for p in _files(cache) if ".partial-" in p]

    listed = _data(["data", "list"], cache, base)
    assert listed.exit_code == 0, listed.output
    assert f"fetched: {cache / 'storysumm' / 'test.json'}" in listed.output
    assert "squality:test" in listed.output and "storyjudge data get squality --split test" in listed.output


@pytest.mark.parametrize("fault", ["damaged", "cut off", "missing"])
def test_a_failed_download_writes_nothing_and_says_what_to_do(
    served: tuple[Files, str], tmp_path: Path, fault: str
) -> None:
    files, base = served
    cache = tmp_path / "cache"
    if fault != "missing":
        body = SQUALITY_DEV.read_bytes()
        files.put("squality", "dev", "split", body.replace(b"Jinx", b"Jynx") if fault == "damaged" else body)
        if fault == "cut off":
            files.cut.update(files.files)
    got = _data(["data", "get", "squality", "--split", "dev"], cache, base)
    assert got.exit_code == 1
    lines = [line for line in got.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error:") and "Traceback" not in got.output
    assert "nothing was written" in lines[-1] and "storyjudge data get squality --split dev" in lines[-1]
    assert _files(cache) == []


def test_unknown_names_and_splits_are_one_line(served: tuple[Files, str], tmp_path: Path) -> None:
    _, base = served
    for args, said in (
        (["data", "get", "booksum"], "unknown dataset 'booksum'; known: storysumm, squality, booookscore"),
        (["data", "get", "squality", "--split", "val"], "squality has no split 'val'"),
        (["eval", "squality", "squality:test", "--dry-run"], "storyjudge data get squality --split test"),
    ):
        got = _data(args, tmp_path / "cache", base)
        assert got.exit_code == 1, got.output
        assert said in got.output and "Traceback" not in got.output


@pytest.mark.skipif(
    not SHARED_BOOOOKSCORE.is_dir(), reason="the BooookScore release is not beside the checkout"
)
def test_booookscore_annotations_arrive_with_the_official_sentences(
    served: tuple[Files, str], tmp_path: Path
) -> None:
    files, base = served
    for role, name in (
        ("summaries", "summaries-chatgpt-2048-inc.json"),
        ("annotations-v1", "annotations-v1-chatgpt-2048-inc.json"),
        ("annotations-v2", "annotations-v2-chatgpt-2048-inc.json"),
    ):
        files.put("booookscore", "chatgpt-2048-inc", role, (SHARED_BOOOOKSCORE / name).read_bytes())
    cache = tmp_path / "cache"
    got = _data(["data", "get", "booookscore"], cache, base)
    assert got.exit_code == 0, got.output
    assert "no published checksum" not in got.output  # all three pinned
    lines = [json.loads(line) for line in (cache / "booookscore" / "chatgpt-2048-inc.jsonl").open()]
    assert len(lines) == 100
    assert sum(len(line.get("sentences", [])) for line in lines) == 2044  # the official split's count
    assert (cache / "booookscore" / "source" / "gpt4_annotations" / "chatgpt-2048-inc.json").is_file()
    assert "storyjudge coherence" in got.output


def test_a_split_named_like_an_emoji_code_is_printed_as_written(
    served: tuple[Files, str], tmp_path: Path
) -> None:
    """``squality:train: 25 item(s)`` holds ``:train:``, which rich would print as a train: text stays text."""
    files, base = served
    files.put("squality", "train", "split", SQUALITY_DEV.read_bytes())
    got = _data(["data", "get", "squality", "--split", "train"], tmp_path / "cache", base)
    assert got.exit_code == 0, got.output
    assert "squality:train: 25 item(s)" in got.output and "\N{TRAM CAR}" not in got.output, got.output
