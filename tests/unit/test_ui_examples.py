"""The web UI's example list says what the page then shows: each label's scene count is the segmentation's."""

from __future__ import annotations

import re

import pytest

from storyjudge.apps.ui.examples import BUNDLED, example_dirs
from storyjudge.core.context import Context
from storyjudge.core.segmentation import segment_document


@pytest.mark.parametrize(("file", "label"), BUNDLED, ids=[b[0] for b in BUNDLED])
def test_a_label_counts_the_scenes_the_page_shows(file: str, label: str) -> None:
    path = next(d / file for d in example_dirs() if (d / file).is_file())
    scenes, _ = segment_document(path.read_text(encoding="utf-8"), Context().chunk_size)
    said = re.search(r"\((\d+) scenes as read", label)
    assert said is not None and int(said.group(1)) == len(scenes), (label, len(scenes))
