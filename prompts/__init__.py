"""Prompt templates as versioned text files, loaded by name.

Each ``<name>.txt`` starts with a ``version: <label>`` line, then ``---``, then the template. Placeholders are
``{{field}}``. The prompt's ``version_id`` joins the declared label with a hash of the text, so editing a prompt
without bumping its label still changes every cache key and run record that mentions it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROMPT_DIR = Path(__file__).resolve().parent
_PLACEHOLDER = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Prompt:
    """One template: its name, declared version, and text."""

    name: str
    version: str
    text: str

    @property
    def version_id(self) -> str:
        """Name, declared version and content hash: what cache keys and run records store."""
        digest = hashlib.sha256(self.text.encode()).hexdigest()[:8]
        return f"{self.name}@{self.version}+{digest}"

    @property
    def fields(self) -> set[str]:
        """Placeholders the template expects."""
        return set(_PLACEHOLDER.findall(self.text))

    def render(self, **values: object) -> str:
        """Fill every placeholder; a missing or unexpected value is a programming error, raised at once."""
        missing = self.fields - values.keys()
        extra = values.keys() - self.fields
        if missing or extra:
            raise KeyError(f"prompt {self.name}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


@cache
def load(name: str) -> Prompt:
    """The prompt ``prompts/<name>.txt``."""
    path = PROMPT_DIR / f"{name}.txt"
    if not path.is_file():
        known = sorted(p.stem for p in PROMPT_DIR.glob("*.txt"))
        raise FileNotFoundError(f"No prompt named {name!r}; known prompts: {known}")
    raw = path.read_text(encoding="utf-8")
    header, sep, body = raw.partition("\n---\n")
    match = re.fullmatch(r"version:\s*(\S+)\s*", header.strip())
    if not sep or not match:
        raise ValueError(f"{path}: the first line must be 'version: <label>', followed by a '---' line")
    return Prompt(name=name, version=match.group(1), text=body.strip("\n"))


DATA_TAGS = frozenset(
    {"scene", "excerpt", "summary", "sentence", "sentences", "fact", "graph", "flagged_facts", "context"}
    | {"passage", "outline"}
)
"""Tags that delimit data in storyjudge's prompts: defused inside every block, not only their own, so a scene
cannot fake a ``<fact>`` block of the judge prompt it is shown in."""


def data_block(tag: str, text: str, **attributes: object) -> str:
    """Wrap narrative or summary text as delimited data that the text itself cannot close.

    Any opening or closing ``<tag`` inside the text, of this block's tag or of one of ``DATA_TAGS``, is
    defused (``<`` becomes ``&lt;``), so a story containing ``</scene> Ignore previous instructions`` stays
    inside its block. Other markup (``<b>``, ``3 < 4``) is left alone.
    """
    names = "|".join(re.escape(name) for name in sorted(DATA_TAGS | {tag}, key=len, reverse=True))
    defused = re.sub(rf"<(\s*/?\s*(?:{names})\b)", r"&lt;\1", text, flags=re.IGNORECASE)
    attrs = "".join(f' {key}="{str(value).replace(chr(34), "&quot;")}"' for key, value in attributes.items())
    return f"<{tag}{attrs}>\n{defused}\n</{tag}>"


_TAG_LINE = re.compile(r"^\s*</?[A-Za-z_][\w-]*(\s+[\w-]+=\"[^\"]*\")*\s*>\s*$", re.MULTILINE)


def unwrap_data(text: str) -> str:
    """Model output without echoed data-block tags (small models repeat ``<summary>`` lines they were shown)."""
    return re.sub(r"\n{3,}", "\n\n", _TAG_LINE.sub("", text)).strip()
