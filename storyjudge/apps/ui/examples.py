"""The narratives the demo offers: the bundled public-domain examples and SQuALITY's dev stories.

Examples are found next to the package (``examples/`` in a checkout, ``storyjudge/examples`` in a wheel);
SQuALITY's dev split is the one bundled with the evaluation data (``eval/data``), or a path the user gives.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
BUNDLED = (
    (
        "macbeth-witches.md",
        "Macbeth, Act I, scenes i-iii (4 scenes as read: the long scene iii in 2 parts; the quickest demo)",
    ),
    ("macbeth-act1.md", "Macbeth, Act I (8 scenes as read: its 7, scene iii in 2 parts)"),
    ("macbeth.md", "Macbeth (33 scenes as read: 5 acts, 28 scenes, the long ones in parts)"),
    ("frankenstein.txt", "Frankenstein (63 scenes as read: 4 letters, 24 chapters, in parts)"),
)
"""Each file's label counts the scenes as the page shows them (the default chunk size splits long scenes)."""


@dataclass(frozen=True)
class Example:
    """One narrative the user can pick."""

    id: str
    title: str  # the run's name (becomes the run directory's prefix)
    label: str  # what the picker shows
    group: str
    path: Path
    line: int = -1  # JSONL line for SQuALITY stories, -1 for plain files

    def text(self) -> str:
        """The narrative's full text."""
        if self.line < 0:
            return self.path.read_text(encoding="utf-8")
        with self.path.open(encoding="utf-8") as lines:
            for raw in itertools.islice(lines, self.line, None):
                return str(json.loads(raw)["document"])
        raise FileNotFoundError(f"{self.path} has no line {self.line}")


def example_dirs() -> list[Path]:
    """Where bundled examples may live: the checkout's ``examples/``, then a copy inside the package."""
    return [REPO_ROOT / "examples", Path(__file__).resolve().parents[2] / "examples"]


BOILERPLATE = ("produced by", "distributed proofreading", "***", "[transcriber")


def _story_title(document: str, fallback: str) -> str:
    """The story's title line, skipping e-text credits; shouted titles are put in title case."""
    for raw in document.splitlines():
        line = raw.strip()
        if not line or line.lower().startswith(BOILERPLATE):
            continue
        if line.isupper():
            line = " ".join(word.capitalize() for word in line.split())
        return line[:80]
    return fallback


def squality_examples(path: Path) -> list[Example]:
    """One example per story of a SQuALITY JSONL file (title from the story's first line)."""
    found: dict[str, Example] = {}  # by story: SQuALITY has several rows per story
    with path.open(encoding="utf-8") as lines:
        for n, raw in enumerate(lines):
            if not raw.strip():
                continue
            record = json.loads(raw)
            passage = str((record.get("metadata") or {}).get("passage_id") or n)
            if passage in found:
                continue
            title = _story_title(str(record.get("document", "")), f"story {passage}")
            words = len(str(record.get("document", "")).split())
            label = f"{title} ({words:,} words)"
            found[passage] = Example(
                f"squality-{passage}", title, label, "SQuALITY stories (dev split)", path, n
            )
    return list(found.values())


def list_examples(squality: Path | None = None) -> list[Example]:
    """Every example here, bundled ones first, then SQuALITY's (``squality``, else the bundled dev split)."""
    from eval.datasets import SQUALITY_DEV

    found: list[Example] = []
    for filename, label in BUNDLED:
        path = next((folder / filename for folder in example_dirs() if (folder / filename).is_file()), None)
        if path is not None:  # its stem: the example's id and its run's name
            found.append(Example(path.stem, path.stem, label, "Bundled (public domain)", path))
    source = squality or SQUALITY_DEV
    if source.is_file():
        found.extend(squality_examples(source))
    return found
