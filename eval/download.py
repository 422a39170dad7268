"""The public datasets fetched at fixed commits, checked and converted for the loaders (``storyjudge data get``).

A file's sha256 is pinned where known, else held to the one recorded at its first fetch (``SOURCES.json``).
Files arrive under temporary names and are renamed into place only once the whole split has arrived, matched
and converted. ``STORYJUDGE_DATA_URL`` replaces ``https://raw.githubusercontent.com`` (a mirror, a test server).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.datasets import BUNDLED_DATA, LOADERS, PUBLISHED, data_home, split_file

GITHUB_RAW = "https://raw.githubusercontent.com"
BASE_URL_ENV = "STORYJUDGE_DATA_URL"
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Source:
    """One published file: a path in a GitHub repository at a fixed commit, and its sha256 where known."""

    repo: str
    commit: str
    path: str
    sha256: str = ""


STORYSUMM = Source("melaniesubbiah/storysumm", "22d47af2bfb2a6b2d443b44dbcc81dd01ac742cb", "storysumm.json")
SQUALITY_COMMIT = "dc08d4f574639d773bc64ef3ab3527043108fb4e"  # v1.3, as plain text
SQUALITY_DEV_SHA256 = "e9cbb1daff74b70a6cd15641ba2f602a925761759200a17c9225aca90018a42b"
BOOOOKSCORE = "lilakk/BooookScore"

SOURCES: dict[tuple[str, str], dict[str, Source]] = {
    ("storysumm", "val"): {"all": STORYSUMM},
    ("storysumm", "test"): {"all": STORYSUMM},
    **{
        ("squality", split): {
            "split": Source(
                "nyu-mll/SQuALITY",
                SQUALITY_COMMIT,
                f"data/v1-3/txt/{split}.jsonl",
                SQUALITY_DEV_SHA256 if split == "dev" else "",
            )
        }
        for split in ("train", "dev", "test")
    },
    # the authors' ChatGPT-2048 incremental summaries of 100 books with GPT-4's annotations: v1 (the paper's
    # per-sentence prompt) and v2 (every sentence as the official code split it); later commits removed them
    ("booookscore", "chatgpt-2048-inc"): {
        "summaries": Source(
            BOOOOKSCORE,
            "79d3faaa5515281cb6f8ebfeeee57da85e9117cc",
            "summaries/chatgpt-2048-inc-cleaned.json",
            "53cd0fbd73eebf9b45f0aeed16a89361bb10166a41dd3a639ccdb3e4c6cd68ae",
        ),
        "annotations-v1": Source(
            BOOOOKSCORE,
            "f769a73e9640f0ccdda547884d63c87795c487eb",
            "gpt4_annotations/chatgpt-2048-inc.json",
            "ac75bb6b5492ef38b1232bf4f9ec39847f99412afcb379bfc4980a55ca35a890",
        ),
        "annotations-v2": Source(
            BOOOOKSCORE,
            "9fabd0faa91341719c056fb4a88f470421723416",
            "annotations/v2/chatgpt-2048-inc-cleaned.json",
            "70519df9e935f6928a88080c1e430f7a8e8e0f4af5c4b76f39cdbf1ccc481f8f",
        ),
    },
}
"""(dataset, split) -> role -> source file."""

MANIFEST = "SOURCES.json"


@dataclass
class Fetched:
    """What ``get`` wrote: the converted split, how many items it holds, and what it said along the way."""

    name: str
    split: str
    path: Path
    items: int
    sources: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _download(url: str, target: Path) -> str:
    """Stream ``url`` into ``target``; its sha256. A short body (fewer bytes than announced) is an error."""
    request = urllib.request.Request(url, headers={"User-Agent": "storyjudge-data"})
    digest = hashlib.sha256()
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, target.open("wb") as out:
        expected = response.headers.get("Content-Length")
        for block in iter(lambda: response.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
        size = out.tell()
    if expected is not None and expected.isdigit() and size != int(expected):
        raise http.client.IncompleteRead(b"", int(expected) - size)
    return digest.hexdigest()


def _convert_storysumm(split: str, files: dict[str, Path], out: Path) -> None:
    records = json.loads(files["all"].read_text(encoding="utf-8"))
    if not isinstance(records, dict):
        raise ValueError("storysumm.json is not an object keyed by summary id")
    chosen = {key: r for key, r in records.items() if isinstance(r, dict) and r.get("split") == split}
    out.write_text(json.dumps(chosen, indent=1), encoding="utf-8")  # the layout of the bundled val split


def _convert_squality(split: str, files: dict[str, Path], out: Path) -> None:
    out.write_bytes(files["split"].read_bytes())  # already the loader's format


def _convert_booookscore(split: str, files: dict[str, Path], out: Path) -> None:
    """``{"id", "summary", "sentences"}`` lines, sentences as the official code split them (v2 annotations)."""
    summaries = json.loads(files["summaries"].read_text(encoding="utf-8"))
    v2 = json.loads(files["annotations-v2"].read_text(encoding="utf-8"))
    with out.open("w", encoding="utf-8") as lines:
        for book, summary in summaries.items():
            entry: dict[str, Any] = {"id": book, "summary": summary}
            if annotated := v2.get(book):
                ordered = sorted(annotated.values(), key=lambda a: int(a["sentence_num"]))
                entry["sentences"] = [str(a["sentence"]) for a in ordered]
            lines.write(json.dumps(entry, ensure_ascii=False) + "\n")


def _count(name: str, path: Path) -> int:
    """Items in a converted split, read by its loader (a file the loader cannot read fails here)."""
    if name in LOADERS:
        return len(LOADERS[name](path).items)
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


CONVERT: dict[str, Callable[[str, dict[str, Path], Path], None]] = {
    "storysumm": _convert_storysumm,
    "squality": _convert_squality,
    "booookscore": _convert_booookscore,
}


def get(
    name: str,
    split: str | None = None,
    *,
    home: Path | None = None,
    force: bool = False,
    say: Callable[[str], None] = lambda _line: None,
) -> Fetched:
    """Fetch one split into ``home`` (the data cache), check and convert it; sources that still match stay.

    A ValueError says in one line what failed and what to do; nothing is left half-written.
    """
    name = name.lower()
    if name not in PUBLISHED:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(PUBLISHED)}")
    split = split or PUBLISHED[name].default
    if (name, split) not in SOURCES:
        raise ValueError(f"{name} has no split {split!r}; its splits: {', '.join(PUBLISHED[name].splits)}")
    home = home or data_home()
    folder = home / name
    command = f"storyjudge data get {name} --split {split}"
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    manifest = manifest if isinstance(manifest, dict) else {}
    renames: list[tuple[Path, Path]] = []
    files: dict[str, Path] = {}
    notes: list[str] = []
    folder.mkdir(parents=True, exist_ok=True)
    base = (os.environ.get(BASE_URL_ENV, "").strip() or GITHUB_RAW).rstrip("/")
    with tempfile.TemporaryDirectory(dir=folder, prefix=".partial-") as partial:  # renames from it are atomic
        for role, source in SOURCES[(name, split)].items():
            final = folder / "source" / source.path
            expected = source.sha256 or str((manifest.get(source.path) or {}).get("sha256") or "")
            if not force and expected and final.is_file() and _sha256(final) == expected:
                files[role] = final
                continue
            url = f"{base}/{source.repo}/{source.commit}/{source.path}"
            say(f"fetching {url}")
            temp = Path(partial) / f"{role}.download"
            try:
                got = _download(url, temp)
            except (OSError, http.client.HTTPException) as exc:
                if isinstance(exc, urllib.error.HTTPError):
                    reason = f"the server answered {exc.code} {exc.reason}"
                else:  # a URLError's reason, or the error itself
                    reason = str(getattr(exc, "reason", "") or exc) or type(exc).__name__
                raise ValueError(
                    f"could not fetch {url} ({reason}); nothing was written. Check the connection and run "
                    f"`{command}` again (or set {BASE_URL_ENV} to a mirror)."
                ) from None
            if expected and got != expected:
                raise ValueError(
                    f"{url} does not match its checksum (sha256 {got[:16]}..., expected {expected[:16]}...): "
                    f"a damaged or changed file; nothing was written. Run `{command} --force` again; if it "
                    "still differs, download the file yourself and give eval its path."
                )
            if not expected:
                notes.append(f"{source.path}: no published checksum to check; recorded sha256 {got}")
            manifest[source.path] = {"url": url, "sha256": got, "pinned": bool(source.sha256)}
            files[role] = temp
            renames.append((temp, final))
        out_final = split_file(name, split, home)
        out_temp = Path(partial) / out_final.name  # the loader reads it by its suffix
        try:
            CONVERT[name](split, files, out_temp)
            items = _count(name, out_temp)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"the fetched {name} {split} files do not convert ({exc}); nothing was written. Run "
                f"`{command} --force`; if it fails again, the published files changed."
            ) from None
        if items == 0:
            raise ValueError(f"the fetched {name} file holds no {split} records; nothing was written.")
        bundled = BUNDLED_DATA / name / out_final.name
        if bundled.is_file() and _sha256(bundled) != _sha256(out_temp):
            notes.append(f"differs from the copy bundled with storyjudge ({bundled})")
        manifest_temp = Path(partial) / MANIFEST
        manifest_temp.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        for temp, final in renames:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(temp, final)
        os.replace(manifest_temp, folder / MANIFEST)
        os.replace(out_temp, out_final)
    sources = [folder / "source" / s.path for s in SOURCES[(name, split)].values()]
    return Fetched(name, split, out_final, items, sources, notes)
