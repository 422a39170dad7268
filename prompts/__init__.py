"""Prompt templates as versioned text files (``version: <label>``, ``---``, then the ``{{field}}`` template).

``version_id`` adds a hash of the text, so an edit without a new label still changes every cache key. A prompt
directory (``--prompt-dir``) overrides bundled files by name, in this format or, for ``POSITIONAL_FIELDS``, in
the official BooookScore format (no header, positional ``{}`` placeholders; label ``official``).
"""

from __future__ import annotations

import hashlib
import re
import string
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROMPT_DIR = Path(__file__).resolve().parent
_PLACEHOLDER = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
# prompts that accept the official BooookScore format, and the order of its ``{}`` placeholders (seed 000, M.4)
POSITIONAL_FIELDS: dict[str, tuple[str, ...]] = {"coherence": ("summary", "sentence")}
OFFICIAL_LABEL = "official"


@dataclass(frozen=True)
class Prompt:
    """One template: its name, declared version, and text (``positional``: an official ``{}`` template)."""

    name: str
    version: str
    text: str
    positional: tuple[str, ...] = ()

    @property
    def version_id(self) -> str:
        """Name, declared version and content hash: what cache keys and run records store."""
        digest = hashlib.sha256(self.text.encode()).hexdigest()[:8]
        return f"{self.name}@{self.version}+{digest}"

    @property
    def record(self) -> dict[str, str]:
        """What a score reports about the prompt it was computed with: name, declared version, content hash."""
        digest = hashlib.sha256(self.text.encode()).hexdigest()
        return {"name": self.name, "version": self.version, "sha256": digest, "id": self.version_id}

    @property
    def fields(self) -> set[str]:
        """Placeholders the template expects."""
        return set(self.positional or _PLACEHOLDER.findall(self.text))

    def render(self, **values: object) -> str:
        """Fill every placeholder; a missing or unexpected value is a programming error, raised at once."""
        missing = self.fields - values.keys()
        extra = values.keys() - self.fields
        if missing or extra:
            raise KeyError(f"prompt {self.name}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        if self.positional:
            return self.text.format(*(values[name] for name in self.positional))
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


def _auto_fields(text: str) -> int | None:
    """How many ``{}`` placeholders a ``str.format`` template has; None when it has none or named ones."""
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError:
        return None
    return len(names) if names and all(name == "" for name in names) else None


def _parse(name: str, path: Path) -> Prompt:
    raw = path.read_text(encoding="utf-8")
    header, sep, body = raw.partition("\n---\n")
    match = re.fullmatch(r"version:\s*(\S+)\s*", header.strip())
    if sep and match:
        return Prompt(name=name, version=match.group(1), text=body.strip("\n"))
    count = _auto_fields(raw)
    if count is not None and not raw.lstrip().startswith("version"):
        order = POSITIONAL_FIELDS.get(name)
        if order is None:
            accepted = ", ".join(f"{n}.txt" for n in POSITIONAL_FIELDS)
            raise ValueError(
                f"{path}: a template with '{{}}' placeholders is accepted only as {accepted}; write this one "
                "as 'version: <label>', a '---' line, then the template with {{field}} placeholders"
            )
        if count != len(order):
            raise ValueError(
                f"{path}: the official format of {name!r} has {len(order)} '{{}}' placeholders "
                f"({', then '.join(order)}), this file has {count}"
            )
        return Prompt(name=name, version=OFFICIAL_LABEL, text=raw.strip("\n"), positional=order)
    raise ValueError(f"{path}: the first line must be 'version: <label>', followed by a '---' line")


def known_names(prompt_dir: str | Path = "") -> list[str]:
    """Names of the bundled prompts and of the files of a prompt directory."""
    names = {p.stem for p in PROMPT_DIR.glob("*.txt")}
    if prompt_dir:
        names |= {p.stem for p in Path(prompt_dir).glob("*.txt")}
    return sorted(names)


def versions(prompt_dir: str | Path = "") -> dict[str, str]:
    """Version ids of every prompt a run can use: bundled ones, and a prompt directory's files in their place."""
    found = {}
    for name in known_names(prompt_dir):
        try:
            found[name] = load(name, prompt_dir).version_id
        except (ValueError, FileNotFoundError):
            continue
    return found


def check_dir(prompt_dir: str | Path = "") -> None:
    """Raise ValueError when a file of ``prompt_dir`` has other placeholders than the prompt it replaces."""
    if not prompt_dir:
        return
    for path in sorted(Path(prompt_dir).glob("*.txt")):
        if not (bundled := PROMPT_DIR / path.name).is_file():
            continue
        given, expected = load(path.stem, prompt_dir).fields, _parse(path.stem, bundled).fields
        if given != expected:
            raise ValueError(
                f"{path} has the placeholders {sorted(given)}, the {path.stem!r} prompt needs exactly "
                f"{sorted(expected)} (written {{{{name}}}}); fix the file or remove it from the prompt folder."
            )


@cache
def load(name: str, prompt_dir: str | Path = "") -> Prompt:
    """The prompt ``<prompt_dir>/<name>.txt`` when that file exists, else the bundled ``prompts/<name>.txt``."""
    if prompt_dir and (override := Path(prompt_dir) / f"{name}.txt").is_file():
        return _parse(name, override)
    path = PROMPT_DIR / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"No prompt named {name!r}; known prompts: {known_names(prompt_dir)}")
    return _parse(name, path)


# tags that delimit data: defused inside every block, so a scene cannot fake the judge prompt's ``<fact>`` block
DATA_TAGS = frozenset(
    {"scene", "excerpt", "summary", "sentence", "sentences", "fact", "graph", "flagged_facts", "context"}
    | {"passage", "outline"}
)
# ``<`` and characters a model may read as one: full-width, small, CJK and mathematical angle brackets
LESS_THAN_LOOKALIKES = "<\uff1c\ufe64\u3008\u2329\u27e8\u2039\u02c2\u1438\u276e\u29fc"
_OPENER = re.compile(f"[{LESS_THAN_LOOKALIKES}]")
_SLASH = "/\u2044\u2215\u29f8"
ATTRIBUTE_LIMIT = 200  # longest attribute value (a scene title) shown, in characters


def _normal(text: str) -> str:
    """NFKC form without invisible format characters: what a look-alike tag reads as."""
    return unicodedata.normalize("NFKC", "".join(c for c in text if unicodedata.category(c) != "Cf"))


@cache
def _live_tag(tag: str) -> re.Pattern[str]:
    """What follows a ``<`` that opens this block's tag or a data tag (built once: thousands of blocks a run)."""
    names = "|".join(re.escape(name) for name in sorted(DATA_TAGS | {tag}, key=len, reverse=True))
    return re.compile(rf"\s*[{_SLASH}]?\s*(?:{names})\b", re.IGNORECASE)


def _defuse(text: str, tag: str) -> str:
    """The text with every ``<`` (or look-alike) that opens a data tag written as ``&lt;``."""
    live = _live_tag(tag)

    def escape(match: re.Match[str]) -> str:
        return "&lt;" if live.match(_normal(text[match.end() : match.end() + 40])) else match.group()

    return _OPENER.sub(escape, text)


def _attribute(value: object, tag: str) -> str:
    """An attribute value on one line: NFKC, whitespace collapsed, at most ATTRIBUTE_LIMIT characters, escaped."""
    text = "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in _normal(str(value)))
    text = " ".join(text.split())
    if len(text) > ATTRIBUTE_LIMIT:
        text = text[: ATTRIBUTE_LIMIT - 1].rstrip() + "\u2026"
    text = text.replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    return _defuse(text, tag)


def data_block(tag: str, text: str, **attributes: object) -> str:
    """Wrap narrative or summary text as delimited data that the text itself cannot close.

    Every ``<`` (or NFKC look-alike) opening this tag or a ``DATA_TAGS`` tag becomes ``&lt;``; other markup is
    left alone. Attribute values are put on one line, cut to ``ATTRIBUTE_LIMIT`` and escaped.
    """
    defused = _defuse(text, tag)
    attrs = "".join(f' {key}="{_attribute(value, tag)}"' for key, value in attributes.items())
    return f"<{tag}{attrs}>\n{defused}\n</{tag}>"


_TAG_LINE = re.compile(r"^\s*</?[A-Za-z_][\w-]*(\s+[\w-]+=\"[^\"]*\")*\s*>\s*$", re.MULTILINE)


def unwrap_data(text: str) -> str:
    """Model output without echoed data-block tags (small models repeat ``<summary>`` lines they were shown)."""
    return re.sub(r"\n{3,}", "\n\n", _TAG_LINE.sub("", text)).strip()
