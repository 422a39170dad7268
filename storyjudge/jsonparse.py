"""Tolerant extraction of one JSON object from a model's text answer.

Models wrap JSON in code fences, add prose around it, or think aloud first. This finds the object that validates
against the schema, or says precisely why none does; it never invents a value.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_CLOSE_THINK = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class ParseFailure(ValueError):
    """The answer holds no JSON object valid for the schema."""


def strip_thinking(text: str) -> str:
    """Remove ``<think>...</think>`` blocks (and an unclosed trailing one's opening tag).

    A closing tag without an opening one means the chat template opened the block in the prompt: everything
    before it is thinking.
    """
    text = _THINK.sub("", text)
    orphan_close = list(_CLOSE_THINK.finditer(text))
    if orphan_close:
        text = text[orphan_close[-1].end() :]
    return re.sub(r"^\s*<think(?:ing)?>", "", text, flags=re.IGNORECASE).strip()


def _candidates(text: str) -> list[Any]:
    found: list[Any] = []
    stripped = text.strip()
    try:
        found.append(json.loads(stripped))
    except json.JSONDecodeError:
        pass
    for block in _FENCE.findall(text):
        try:
            found.append(json.loads(block.strip()))
        except json.JSONDecodeError:
            pass
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[{\[]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        found.append(value)
    return found


def parse_json_as(text: str, schema: type[T]) -> T:
    """The first JSON value in ``text`` that validates as ``schema``.

    A bare list is accepted for a schema with exactly one list field (models often drop the wrapper object).
    """
    cleaned = strip_thinking(text)
    if not cleaned:
        raise ParseFailure("empty answer")
    errors: list[str] = []
    list_fields = [
        name for name, f in schema.model_fields.items() if getattr(f.annotation, "__origin__", None) is list
    ]
    for value in _candidates(cleaned):
        if isinstance(value, list) and len(list_fields) == 1 and len(schema.model_fields) == 1:
            value = {list_fields[0]: value}
        if not isinstance(value, dict):
            continue
        try:
            return schema.model_validate(value)
        except ValidationError as exc:
            problems = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()[:3]]
            errors.append(str(exc).splitlines()[0] + ": " + "; ".join(problems))
    if errors:
        raise ParseFailure(f"JSON found but invalid for {schema.__name__}: {errors[0]}")
    raise ParseFailure(f"no JSON object in answer: {cleaned[:120]!r}")
