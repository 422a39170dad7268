"""Run directories: one document per directory, resume only what exists, files written atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storyjudge.core.rundir import RunDir, RunDirMismatch, default_run_dir, document_hash, slug


def test_claim_marks_a_fresh_directory(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.claim("abc123", "macbeth.md")
    assert json.loads(run.meta.read_text()) == {"document_hash": "abc123", "source": "macbeth.md"}


def test_claim_again_for_the_same_document_is_fine(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.claim("abc123", "macbeth.md")
    run.claim("abc123", "copy-of-macbeth.md")
    run.claim("abc123", "macbeth.md", resume=True)
    assert json.loads(run.meta.read_text())["source"] == "macbeth.md"


def test_claim_refuses_a_directory_of_another_document(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.claim("abc123", "macbeth.md")
    for resume in (False, True):
        with pytest.raises(RunDirMismatch, match="macbeth.md") as info:
            run.claim("def456", "hamlet.md", resume=resume)
        assert "--run-dir" in str(info.value)
    assert json.loads(run.meta.read_text())["document_hash"] == "abc123"


def test_resume_refuses_a_directory_without_a_run(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "never-run")
    with pytest.raises(RunDirMismatch, match="Nothing to resume"):
        run.claim("abc123", "macbeth.md", resume=True)
    assert not run.meta.exists()


def test_write_json_replaces_the_file_whole(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write_json(run.result, {"score": 0.5, "title": "Macbeth — Act I", "path": tmp_path})
    run.write_json(run.result, {"score": 0.75})
    assert json.loads(run.result.read_text(encoding="utf-8")) == {"score": 0.75}
    assert list(tmp_path.iterdir()) == [run.result]


def test_write_json_keeps_non_ascii_text_readable(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write_json(run.ckg, {"name": "Gloucester’s «eye»"})
    assert "Gloucester’s «eye»" in run.ckg.read_text(encoding="utf-8")


def test_a_failed_write_leaves_the_previous_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = RunDir(tmp_path)
    run.write_json(run.result, {"iteration": 1})
    circular: dict[str, object] = {}
    circular["self"] = circular
    with pytest.raises(ValueError):
        run.write_json(run.result, circular)
    assert json.loads(run.result.read_text()) == {"iteration": 1}

    def crash(self: Path, target: Path) -> Path:
        raise OSError("disk gone")

    monkeypatch.setattr(Path, "replace", crash)
    with pytest.raises(OSError):
        run.write_json(run.result, {"iteration": 2})
    assert json.loads(run.result.read_text()) == {"iteration": 1}


def test_layout_lives_under_the_root(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    paths = [
        run.result,
        run.ckg,
        run.chroma,
        run.cache,
        run.checkpoints,
        run.report,
        run.summary_tree,
        run.meta,
    ]
    assert all(path.parent == tmp_path for path in paths)
    assert len(set(paths)) == len(paths)


def test_default_run_dir_is_stable_per_document() -> None:
    text = "When shall we three meet again?"
    digest = document_hash(text)
    assert digest == document_hash(text) != document_hash(text + " ")
    assert (
        default_run_dir("The Tragedy of Macbeth!", digest)
        == Path("runs") / f"the-tragedy-of-macbeth-{digest[:8]}"
    )
    assert slug("   ") == "document"
    assert slug("Ünïcode / path\\..") == "n-code-path"
    assert len(slug("x" * 100)) == 40


def test_claim_refuses_an_unreadable_meta_file(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.meta.write_text('{"document_hash": "abc')
    with pytest.raises(RunDirMismatch, match="unreadable"):
        run.claim("abc123", "macbeth.md")


def test_writers_at_once_each_write_a_temporary_file_of_their_own(tmp_path: Path) -> None:
    """40 threads write one file at once (the web UI's concurrent creates): none fails, the file is whole."""
    from concurrent.futures import ThreadPoolExecutor

    run = RunDir(tmp_path)
    values = [{"writer": n, "text": "x" * 20_000} for n in range(40)]
    with ThreadPoolExecutor(max_workers=40) as pool:
        list(pool.map(lambda value: run.write_json(run.meta, value), values))
    assert json.loads(run.meta.read_text(encoding="utf-8")) in values
    assert list(tmp_path.iterdir()) == [run.meta]  # no temporary file left behind
