"""Segmentation of a narrative into scenes with stable ids and offsets, the scenes slices of the document.

The first rule finding two headings wins (screenplay, play, chapters), else token-bounded chunks; a scene over
the chunk size is split into parts ``S003.1``, ``S003.2``, ...
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from storyjudge.core.records import Scene
from storyjudge.core.textsplit import split_by_tokens
from storyjudge.core.tokens import count_tokens

JSON_JOINER = "\n\n"  # between the scenes of a JSON scene list; their offsets refer to the joined text
OPENING_MERGE_TOKENS = 256  # shorter text before the first heading (a title, contents) joins the first scene

_START = r"^[ \t]*(?:\#{1,6}[ \t]*)?(?:\*\*)?"  # Markdown hashes and bold may open a heading
_NUMBER_WORD = (
    r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    r"seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
    r"(?:[- ](?:one|two|three|four|five|six|seven|eight|nine))?"
)
_NUMBER = rf"(?:[IVXLCDM]+|\d+|(?i:{_NUMBER_WORD}))"

_SCREENPLAY = re.compile(
    r"^[ \t]*(?:\d+[A-Z]?[ \t.]+)?(?:INT\.?/EXT\.?|EXT\.?/INT\.?|I/E\.?|INT\.|EXT\.)[ \t]+\S[^\n]*$",
    re.MULTILINE,
)
_ACT, _SCENE = (
    re.compile(
        rf"{_START}(?:{word}|{word.title()})[ \t]+(?P<num>{_NUMBER})\b[.:]?[ \t]*(?P<rest>[^\n]{{0,{rest}}}?)"
        r"(?:\*\*)?[ \t]*$",
        re.MULTILINE,
    )
    for word, rest in (("ACT", 80), ("SCENE", 120))
)
_CHAPTER = re.compile(
    rf"{_START}(?P<kind>CHAPTER|Chapter|LETTER|Letter)[ \t]+(?P<num>{_NUMBER})\b"
    rf"(?:[ \t]*[.:\-\u2013\u2014][ \t]*(?P<rest>[^\n]{{0,100}}?))?(?:\*\*)?[ \t]*$",
    re.MULTILINE,
)


class _Heading(NamedTuple):
    start: int  # where the scene's text starts (the heading line, or an act heading just before it)
    title: str


def segment_document(text: str, chunk_size: int = 2048) -> tuple[list[Scene], str]:
    """Scenes of a document (or JSON scene list), at most ``chunk_size`` tokens, and the rule that made them."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1 token")
    if not text.strip():
        return [], "empty"
    try:
        items = json.loads(text) if text.strip().startswith("[") else None
    except json.JSONDecodeError:
        items = None
    if isinstance(items, list):
        return scenes_from_list(items, chunk_size), "json"
    for rule, finder in (
        ("screenplay", _screenplay_headings),
        ("play", _play_headings),
        ("chapters", _chapters),
    ):
        headings = finder(text)
        if len(headings) >= 2:
            return _cut(text, headings, chunk_size), rule
    return _number_groups([[chunk] for chunk in _split_piece(text, 0, "", chunk_size)]), "token-chunks"


def scenes_from_list(items: Sequence[Any], chunk_size: int = 2048) -> list[Scene]:
    """Scenes from a list of strings or objects with ``text`` (and optional ``title``); blank ones dropped."""
    groups: list[list[Scene]] = []
    offset = 0
    for position, item in enumerate(items):
        if isinstance(item, str):
            title, body = "", item
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            title, body = str(item.get("title") or ""), item["text"]
        else:
            raise ValueError(
                f"scene {position + 1} of the list is neither a string nor an object with a 'text' string; "
                'give a JSON list like ["scene text", {"title": "...", "text": "..."}].'
            )
        if body.strip():
            groups.append(_split_piece(body, offset, title, chunk_size))
        offset += len(body) + len(JSON_JOINER)
    if not groups:
        raise ValueError("the scene list holds no text; give at least one non-blank scene.")
    return _number_groups(groups)


def join_scenes(scenes: Iterable[Scene]) -> str:
    """The document a list of scenes forms (what a JSON scene list's offsets refer to)."""
    return JSON_JOINER.join(scene["text"] for scene in scenes)


def _screenplay_headings(text: str) -> list[_Heading]:
    return [_Heading(m.start(), " ".join(m.group(0).split())) for m in _SCREENPLAY.finditer(text)]


def _titled(title: str, rest: str | None) -> str:
    place = (rest or "").strip().strip("*_ ").rstrip(".").strip()
    return f"{title}. {place}" if place else title


def _play_headings(text: str) -> list[_Heading]:
    """Scene starts of a play; an act heading right before a scene heading opens that scene's text."""
    acts = [(m.start(), m.group("num").upper(), m.group("rest")) for m in _ACT.finditer(text)]
    scenes = list(_SCENE.finditer(text))
    if len(scenes) < 2:  # a play divided only into acts: each act is a scene
        return [_Heading(start, _titled(f"ACT {num}", rest)) for start, num, rest in acts]
    headings: list[_Heading] = []
    for match in scenes:
        act_index = bisect_left(acts, match.start(), key=lambda act: act[0]) - 1  # the last act before it
        label = _titled(f"SCENE {match.group('num').upper()}", match.group("rest"))
        start = match.start()
        if act_index >= 0:
            act_start, act_num, _ = acts[act_index]
            label = f"ACT {act_num}, {label}"
            previous_end = headings[-1].start if headings else -1
            if act_start > previous_end and not text[act_start:start].strip().splitlines()[1:]:
                start = act_start  # "## ACT II" directly above "### SCENE I" belongs to that scene
        headings.append(_Heading(start, label))
    return headings


def _chapters(text: str) -> list[_Heading]:
    return [
        _Heading(m.start(), _titled(f"{m.group('kind').title()} {m.group('num')}", m.group("rest")))
        for m in _CHAPTER.finditer(text)
    ]


def _cut(text: str, headings: list[_Heading], chunk_size: int) -> list[Scene]:
    """Slices from each heading to the next; empty sections (a contents list) join the section after them."""
    merged: list[tuple[int, int, str]] = []
    first: int | None = None  # the start of the empty sections waiting for a body
    for (start, title), end in zip(headings, [*(h.start for h in headings[1:]), len(text)], strict=True):
        first = start if first is None else first
        if text[start:end].partition("\n")[2].strip() or end == len(text):
            merged.append((first, end, title))
            first = None
    first_start = merged[0][0]
    opening = text[:first_start]
    if opening.strip() and count_tokens(opening) >= OPENING_MERGE_TOKENS:
        merged.insert(0, (0, first_start, "Opening"))
    else:
        merged[0] = (0, merged[0][1], merged[0][2])  # a title line or a contents list is not a scene
    groups = [_split_piece(text[start:end], start, title, chunk_size) for start, end, title in merged]
    return _number_groups(groups)


def _split_piece(piece: str, offset: int, title: str, chunk_size: int) -> list[Scene]:
    parts, total = [piece], count_tokens(piece)
    if total > chunk_size:  # as few parts as needed, of similar sizes (no 2,040 + 30 token split)
        wanted = math.ceil(total / chunk_size)
        parts = split_by_tokens(piece, min(chunk_size, math.ceil(total / wanted * 1.1)))
        if len(parts) > wanted:
            parts = split_by_tokens(piece, chunk_size)
    if len(parts) > 1 and not parts[-1].strip() and count_tokens(parts[-2] + parts[-1]) <= chunk_size:
        parts[-2] += parts.pop()  # trailing blank lines stay with the text before them
    scenes: list[Scene] = []
    cursor = offset
    for n, part in enumerate(parts, start=1):
        part_title = title if len(parts) == 1 else (f"{title} (part {n}/{len(parts)})" if title else "")
        scenes.append(
            Scene(id="", index=0, title=part_title, text=part, start=cursor, end=cursor + len(part))
        )
        cursor += len(part)
    return scenes


def _number_groups(groups: list[list[Scene]]) -> list[Scene]:
    """Ids ``S001``... per section; parts of a split section get ``S003.1``, ``S003.2``, ..."""
    scenes: list[Scene] = []
    width = max(3, len(str(len(groups))))
    for number, group in enumerate(groups, start=1):
        base = f"S{number:0{width}d}"
        for part_number, scene in enumerate(group, start=1):
            scene_id = base if len(group) == 1 else f"{base}.{part_number}"
            scenes.append(Scene(**{**scene, "id": scene_id, "index": len(scenes)}))
    return scenes


def normalize_scenes(items: Sequence[Any], chunk_size: int = 2048) -> list[Scene]:
    """Scenes given by a caller: complete Scene records are kept as they are, anything else is segmented."""
    keys = tuple(Scene.__annotations__)
    if items and all(isinstance(item, dict) and set(keys) <= item.keys() for item in items):
        return [Scene(**{key: item[key] for key in keys}) for item in items]  # type: ignore[typeddict-item]
    return scenes_from_list(items, chunk_size)


def guess_title(text: str) -> str:
    """A short title: the document's first Markdown heading, else its first short line, else "document"."""
    lines = text[:4000].splitlines()
    heading = next((line[2:].strip(" #*_") for line in lines if line.startswith("# ")), None)
    first = next(filter(None, (line.strip().strip("#*_;:,.").strip() for line in lines)), "")
    title = heading if heading is not None else first if len(first) <= 80 else ""
    return title or "document"
