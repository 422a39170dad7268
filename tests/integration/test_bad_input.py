"""Bad input through the CLI: one clear error line naming the problem and what to do, nothing written over.

Every case runs the real command (typer's CliRunner, in process). A failure must exit non-zero, print no
traceback, end with exactly one ``error:`` line, and leave the run directory as it was (or not create it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from storyjudge.apps.cli import app
from storyjudge.core.rundir import document_hash
from storyjudge.core.scripted_server import OpenAIServer, schema_name
from tests.scripted_story import STORY, StoryResponder

UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
GOOD = "Alice meets Bob at the harbour. Bob gives Alice a map. They sail to the island together."


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], env={"OPENAI_API_KEY": "", **(env or {})})


def assert_one_line_error(result: Result, *words: str) -> str:
    """A clean failure: non-zero exit, no traceback, the last line the only error line, saying ``words``."""
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.output
    for word in words:
        assert word.lower() in errors[0].lower(), (word, errors[0])
    return errors[0]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.txt"
    path.write_text(GOOD)
    return path


def refine(path: Path, run_dir: Path, *extra: str, env: dict[str, str] | None = None) -> Result:
    return invoke(
        "refine", path, "--model", "openai:scripted", "--base-url", UNREACHABLE, "--run-dir", run_dir, *extra,
        env=env,
    )  # fmt: skip


# --- the document file ---

BAD_FILES: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "missing": (lambda d: d / "missing.txt", ("does not exist", "give the path")),
    "directory": (lambda d: _mkdir(d / "folder"), ("is a directory", "give the path")),
    "empty": (lambda d: _write(d / "empty.txt", b""), ("is empty", "give a file with text")),
    "whitespace": (lambda d: _write(d / "blank.txt", b"  \n\t\n   \n"), ("only whitespace", "give a file")),
    "binary": (lambda d: _write(d / "photo.jpg", bytes(range(256)) * 64), ("binary", "plain-text")),
    "one word": (lambda d: _write(d / "word.txt", b"Hello"), ("fewer than 3 words", "give a narrative")),
    "encoded data": (
        lambda d: _write(d / "data.txt", b"QUJD" * 2000),
        ("does not look like prose", "plain text"),
    ),
}


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_document_file(case: str, tmp_path: Path) -> None:
    make, words = BAD_FILES[case]
    path = make(tmp_path)
    result = refine(path, tmp_path / "run")
    line = assert_one_line_error(result, *words)
    assert str(path.name) in line
    assert not (tmp_path / "run").exists()


def test_empty_summary_file_for_score(good: Path, tmp_path: Path) -> None:
    summary = _write(tmp_path / "summary.txt", b"")
    result = invoke(
        "score", good, "--summary", summary, "--model", "openai:scripted", "--base-url", UNREACHABLE,
        "--run-dir", tmp_path / "run",
    )  # fmt: skip
    assert_one_line_error(result, "summary file", "is empty")
    assert not (tmp_path / "run").exists()


def test_empty_summary_file_for_coherence(tmp_path: Path) -> None:
    summary = _write(tmp_path / "summary.txt", b"\n\n")
    assert_one_line_error(
        invoke("coherence", summary, "--model", "openai:scripted"), "summary file", "whitespace"
    )


WORDLESS = "!!! ??? ...\n\n*** --- ***\n"


def test_a_summary_with_no_words_is_refused_by_score(
    scripted_server: Callable[..., OpenAIServer], good: Path, tmp_path: Path
) -> None:
    """Punctuation alone has no sentence to score (it scored NFS 1.000 with no fact): refused, no judge asked."""
    server = scripted_server(StoryResponder())
    summary = _write(tmp_path / "summary.txt", WORDLESS.encode())
    result = invoke(
        "score", good, "--summary", summary, "--model", "openai:scripted", "--base-url", server.base_url,
        "--run-dir", tmp_path / "run", "--ckg-samples", "1",
    )  # fmt: skip
    assert_one_line_error(result, "summary", "no words", "give a summary with at least one sentence of words")
    assert "1.000" not in result.output
    assert not any(schema_name(body) in ("AtomicFacts", "Verdict") for body in server.completions)
    assert not (tmp_path / "run" / "result.json").exists()


def test_a_summary_with_no_words_is_refused_by_coherence(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(lambda body: "Questions: no confusion\nTypes: no confusion")
    summary = _write(tmp_path / "summary.txt", WORDLESS.encode())
    result = invoke(
        "coherence", summary, "--model", "openai:scripted", "--base-url", server.base_url,
        "--out", tmp_path / "out.json",
    )  # fmt: skip
    assert_one_line_error(result, "no words", "give a summary with at least one sentence of words")
    assert server.completions == []


# --- models and endpoints ---


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("gpt-4o", ("not 'provider:model'", "openai:gpt-4o-mini")),
        ("acme:model-x", ("unknown model provider", "install")),
        ("local:giant", ("unknown local model", "local:smollm2")),
    ],
)
def test_unknown_model_spec(spec: str, words: tuple[str, ...], good: Path, tmp_path: Path) -> None:
    result = invoke("refine", good, "--model", spec, "--run-dir", tmp_path / "run")
    assert_one_line_error(result, spec, *words)
    assert not (tmp_path / "run").exists()


def test_missing_api_key_for_an_openai_model(good: Path, tmp_path: Path) -> None:
    result = invoke("refine", good, "--model", "openai:gpt-4o-mini", "--run-dir", tmp_path / "run")
    assert_one_line_error(result, "needs OPENAI_API_KEY", "export it")
    assert not (tmp_path / "run").exists()


def test_unreachable_base_url_fails_fast_with_advice(good: Path, tmp_path: Path) -> None:
    result = refine(good, tmp_path / "run", "--ckg-samples", "1", env={"STORYJUDGE_RETRY_BUDGET_S": "0"})
    assert_one_line_error(result, "cannot reach the model server", UNREACHABLE, "check --base-url")


# --- run directories ---


def test_resume_in_a_run_directory_of_another_document(good: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "meta.json").write_text(
        json.dumps({"document_hash": document_hash("another story"), "source": "x"})
    )
    (run_dir / "result.json").write_text('{"kind": "refine"}')
    before = snapshot(run_dir)
    result = refine(good, run_dir, "--resume")
    assert_one_line_error(result, "belongs to another document", "choose a different --run-dir")
    assert snapshot(run_dir) == before


def test_resume_with_nothing_to_resume(good: Path, tmp_path: Path) -> None:
    result = refine(good, tmp_path / "run", "--resume")
    assert_one_line_error(result, "nothing to resume")
    assert not (tmp_path / "run").exists()


def test_a_new_run_in_a_directory_of_another_document(good: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "meta.json").write_text(
        json.dumps({"document_hash": document_hash("another story"), "source": "x"})
    )
    before = snapshot(run_dir)
    assert_one_line_error(refine(good, run_dir), "belongs to another document")
    assert snapshot(run_dir) == before


# --- settings ---


@pytest.mark.parametrize(
    ("options", "env", "words"),
    [
        (["--retrieval-k", "-1"], {}, ("retrieval_k", ">= 1")),
        (["--predicate-threshold", "1.5"], {}, ("predicate_threshold", "between 0 and 1")),
        (["--target-score", "2"], {}, ("target_score", "between 0 and 1")),
        (["--ckg-samples", "0"], {}, ("ckg_samples", ">= 1")),
        (["--evidence-tokens", "10"], {}, ("evidence_tokens", ">= 64")),
        (["--concurrency", "0"], {}, ("concurrency", ">= 1")),
        ([], {"STORYJUDGE_RETRIEVAL_K": "-2"}, ("retrieval_k", "STORYJUDGE_RETRIEVAL_K", "unset")),
        (
            [],
            {"STORYJUDGE_PREDICATE_THRESHOLD": "7"},
            ("predicate_threshold", "STORYJUDGE_PREDICATE_THRESHOLD"),
        ),
        (
            [],
            {"STORYJUDGE_CONCURRENCY": "many"},
            ("concurrency", "STORYJUDGE_CONCURRENCY", "must be an integer"),
        ),
        ([], {"STORYJUDGE_RETRY_BUDGET_S": "-1"}, ("retry_budget_s", "STORYJUDGE_RETRY_BUDGET_S")),
        ([], {"STORYJUDGE_STRATEGY": "magic"}, ("strategy", "hierarchical")),
    ],
)
def test_invalid_settings(
    options: list[str], env: dict[str, str], words: tuple[str, ...], good: Path, tmp_path: Path
) -> None:
    result = refine(good, tmp_path / "run", *options, env=env)
    assert_one_line_error(result, "invalid setting", *words)
    assert not (tmp_path / "run").exists()


def test_option_given_on_the_command_line_wins_over_a_bad_environment_value(
    good: Path, tmp_path: Path
) -> None:
    """A bad STORYJUDGE_RETRIEVAL_K does not matter when --retrieval-k sets it; the next problem shows."""
    result = refine(
        good,
        tmp_path / "run",
        "--retrieval-k",
        "2",
        "--target-score",
        "5",
        env={"STORYJUDGE_RETRIEVAL_K": "-2"},
    )
    assert_one_line_error(result, "target_score")


# --- encodings and sizes that work ---


def test_utf16_story_with_bom_is_decoded_with_a_note(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(StoryResponder())
    story = _write(tmp_path / "story.txt", STORY.encode("utf-16"))
    result = invoke(
        "refine", story, "--model", "openai:scripted", "--base-url", server.base_url,
        "--run-dir", tmp_path / "run", "--ckg-samples", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "decoded it as utf-16" in " ".join(result.output.split())  # the console wraps long paths
    record = json.loads((tmp_path / "run" / "result.json").read_text())
    assert record["document"]["hash"] == document_hash(STORY)
    assert [s["nfs"] for s in record["scores"]] == pytest.approx([2 / 3, 1.0])


def test_cp1252_summary_is_decoded_with_a_note(
    scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    server = scripted_server(lambda body: "Questions: no confusion\nTypes: no confusion")
    text = "Zoë opens the café at dawn. “Nobody comes,” she says – and then Ana arrives."
    summary = _write(tmp_path / "summary.txt", text.encode("cp1252"))
    out = tmp_path / "coherence.json"
    result = invoke(
        "coherence", summary, "--model", "openai:scripted", "--base-url", server.base_url, "--out", out
    )
    assert result.exit_code == 0, result.output
    assert "decoded it as cp1252" in " ".join(result.output.split())  # the console wraps long paths
    sentences = [a["sentence"] for a in json.loads(out.read_text())["summaries"][0]["annotations"]]
    assert sentences[0] == "Zoë opens the café at dawn."
    assert "“Nobody comes,” she says – and then Ana arrives." in sentences[1]


@pytest.mark.slow
def test_a_10_mb_single_line_is_read_and_segmented(tmp_path: Path) -> None:
    """Prose without line breaks is a valid narrative: it is split into token chunks, then work goes on.

    The model server is unreachable, so the run stops before its first LLM call with its one-line error, having
    claimed nothing; the dry run reads, decodes and segments the 10 MB on one line into token chunks (about 20 s
    on 2 cores) instead of hanging.
    """
    sentence = (
        "Alice walks to the harbour, and Bob follows her with a lantern. The gulls cry over the grey water! "
    )
    story = _write(
        tmp_path / "line.txt", (sentence * (10_000_000 // len(sentence) + 1))[:10_000_000].encode()
    )
    assert story.read_bytes().count(b"\n") == 0
    result = refine(story, tmp_path / "run", "--ckg-samples", "1", env={"STORYJUDGE_RETRY_BUDGET_S": "0"})
    assert_one_line_error(result, "cannot reach the model server")
    assert not (tmp_path / "run").exists()
    estimated = refine(story, tmp_path / "run", "--ckg-samples", "1", "--dry-run", "--json")
    assert estimated.exit_code == 0, estimated.output
    assert json.loads(estimated.stdout[estimated.stdout.index("{") :])["scenes"] > 1000


def test_document_at_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    from storyjudge.apps.cli.common import MAX_DOCUMENT_BYTES

    path = tmp_path / "huge.txt"
    with path.open("wb") as handle:
        handle.truncate(MAX_DOCUMENT_BYTES + 1)  # sparse: no disk used
    line = assert_one_line_error(refine(path, tmp_path / "run"), "over the", "limit", "split it")
    assert "huge.txt" in line
    assert not (tmp_path / "run").exists()
    os.remove(path)


# --- settings are checked before a run directory is claimed ---


@pytest.mark.parametrize(
    ("command", "options", "words"),
    [
        (["index"], ["--ckg-samples", "0"], ("ckg_samples", ">= 1")),
        (["index"], ["--predicate-threshold", "2"], ("predicate_threshold", "between 0 and 1")),
        (["summarize"], ["--max-summary-tokens", "1"], ("max_summary_tokens", ">= 16")),
        (["summarize"], ["--set", "strategy=magic"], ("strategy", "hierarchical")),
        (["refine"], ["--set", "patience=0"], ("patience", ">= 1")),
        (["score", "--summary", "SUMMARY"], ["--retrieval-k", "0"], ("retrieval_k", ">= 1")),
    ],
)
def test_a_bad_setting_leaves_no_run_directory(
    command: list[str], options: list[str], words: tuple[str, ...], good: Path, tmp_path: Path
) -> None:
    summary = tmp_path / "summary.txt"
    summary.write_text("Alice sails to the island.")
    args = [str(summary) if a == "SUMMARY" else a for a in command]
    run_dir = tmp_path / "run"
    result = invoke(
        *args, good, "--model", "openai:scripted", "--base-url", UNREACHABLE, "--run-dir", run_dir, *options
    )
    assert_one_line_error(result, "invalid setting", *words)
    assert not run_dir.exists()


def test_a_bad_model_spec_leaves_no_run_directory(good: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = invoke("index", good, "--extractor-model", "bogus", "--run-dir", run_dir)
    assert_one_line_error(result)
    assert not run_dir.exists()


@pytest.mark.parametrize(
    ("pair", "words"),
    [
        ("ckg_sample=2", ("no setting of that name", "ckg_samples")),
        ("temprature=0.3", ("no setting", "temperature")),
        ("retrieval_k", ("FIELD=VALUE",)),
        ("retrieval_k=many", ("retrieval_k", "must be an integer")),
    ],
)
def test_a_bad_set_pair_is_one_line(pair: str, words: tuple[str, ...], good: Path, tmp_path: Path) -> None:
    result = refine(good, tmp_path / "run", "--set", pair)
    assert_one_line_error(result, *words)
    assert not (tmp_path / "run").exists()


def test_a_setting_given_twice_is_refused(good: Path, tmp_path: Path) -> None:
    result = refine(good, tmp_path / "run", "--ckg-samples", "1", "--set", "ckg-samples=2")
    assert_one_line_error(result, "ckg_samples is given twice")


# --- run directories, base URLs and outputs that cannot work ---


def _file(d: Path) -> Path:
    return _write(d / "taken", b"a file")


def _meta(d: Path, meta: bytes | None = None, checkpoints: bytes | None = None) -> Path:
    run = d / "run"
    run.mkdir()
    if meta is None:
        (run / "meta.json").mkdir()
    else:
        (run / "meta.json").write_bytes(meta)
    if checkpoints is not None:
        (run / "checkpoints.sqlite").write_bytes(checkpoints)
    return run


def _meta_of_good(thread: str = "refine-earlier") -> bytes:
    return json.dumps(
        {"document_hash": document_hash(GOOD), "source": "good.txt", "refine_thread": thread}
    ).encode()


BAD_RUN_DIRS: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "an existing file": (_file, ("is a file", "--run-dir")),
    "a path under a file": (lambda d: _file(d) / "run", ("cannot use", "--run-dir")),
    "not creatable": (lambda d: Path("/proc/storyjudge-run"), ("cannot use", "--run-dir")),
    "meta.json a list": (lambda d: _meta(d, b"[1, 2]"), ("meta.json", "malformed")),
    "meta.json a directory": (lambda d: _meta(d), ("meta.json", "unreadable")),
    "garbage checkpoints": (
        lambda d: _meta(d, _meta_of_good(), b"not a database at all" * 100),
        ("checkpoints.sqlite", "not a checkpoint database"),
    ),
}


@pytest.mark.parametrize("resume", [False, True])
@pytest.mark.parametrize("case", list(BAD_RUN_DIRS))
def test_bad_run_directory(case: str, resume: bool, good: Path, tmp_path: Path) -> None:
    make, words = BAD_RUN_DIRS[case]
    run_dir = make(tmp_path)
    before = snapshot(tmp_path)
    result = refine(good, run_dir, *(["--resume"] if resume else []))
    if resume and case in ("an existing file", "a path under a file", "not creatable"):
        words = ()  # "nothing to resume" or the path's problem: either is one line
    assert_one_line_error(result, *words)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://256.1.1.1/v1", ("base_url", "not a valid url", "ipv4")),
        ("http://[::1/v1", ("base_url", "not a valid url", "ipv6")),
        ("ftp://localhost/v1", ("base_url", "http or https")),
        ("http://localhost:99999/v1", ("base_url", "port")),
    ],
)
def test_invalid_base_url(url: str, words: tuple[str, ...], good: Path, tmp_path: Path) -> None:
    result = invoke(
        "refine", good, "--model", "openai:scripted", "--base-url", url, "--run-dir", tmp_path / "run"
    )
    assert_one_line_error(result, *words)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_bad_out_path_is_refused_before_any_call(
    where: str, tmp_path: Path, scripted_server: Callable[..., OpenAIServer]
) -> None:
    summary = _write(tmp_path / "summary.txt", GOOD.encode())
    out = _mkdir(tmp_path / "out") if where == "a directory" else _file(tmp_path) / "out.json"
    server = scripted_server(lambda body: "Questions: no confusion\nTypes: no confusion")
    result = invoke(
        "coherence", summary, "--model", "openai:scripted", "--base-url", server.base_url, "--out", out
    )
    assert_one_line_error(result, "--out")
    assert not server.completions


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_a_summary_on_standard_input_is_read(
    name: str, scripted_server: Callable[..., OpenAIServer], tmp_path: Path
) -> None:
    """``coherence -`` (and a pipe named /dev/stdin) reads the summary from standard input, to its end."""
    import subprocess
    import sys

    server = scripted_server(lambda body: "Questions: no confusion\nTypes: no confusion")
    args = [sys.executable, "-m", "storyjudge", "coherence", name, "--base-url", server.base_url]
    done = subprocess.run(
        [*args, "--model", "openai:scripted", "--json", "--set", f"cache_dir={tmp_path}"],
        input="Mara repairs the lamp. She lights it at dusk.\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "OPENAI_API_KEY": ""},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["summaries"][0]["sentences"] == 2
    empty = invoke("coherence", "-", "--base-url", UNREACHABLE, "--model", "openai:scripted")
    assert_one_line_error(empty, "standard input", "empty")
