"""Reading one whole JSON answer from a model's text, and nothing less: a cut-off answer fails, never a fragment."""

from __future__ import annotations

import json
import re
from contextlib import suppress
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_CLOSE_THINK = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_OPENER = re.compile(r"[{\[]")
_DEPTH = {"{": 1, "[": 1, "}": -1, "]": -1}
# a JSON string (maybe unclosed) or a bracket
_SPAN_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"?|[{}\[\]]', re.DOTALL)


class ParseFailure(ValueError):
    """The answer holds no JSON object valid for the schema."""


def strip_thinking(text: str) -> str:
    """Remove ``<think>...</think>`` blocks; a lone closing tag means all before it is thinking."""
    text = _CLOSE_THINK.split(_THINK.sub("", text))[-1]
    return re.sub(r"^\s*<think(?:ing)?>", "", text, flags=re.IGNORECASE).strip()


def _top_level(text: str) -> tuple[list[Any], bool]:
    """The complete outermost JSON values in prose, in order, and whether a bracketed span never closes."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while (match := _OPENER.search(text, position)) is not None:
        try:
            value, position = decoder.raw_decode(text, match.start())
            values.append(value)
        except json.JSONDecodeError:  # skip the bracketed span whole (nothing nested is decoded on its own)
            depth = 0
            for token in _SPAN_TOKEN.finditer(text, match.start()):
                depth += _DEPTH.get(token.group(), 0)
                if depth == 0:
                    position = token.end()
                    break
            else:
                return values, True
    return values, False


def _candidates(text: str) -> tuple[list[Any], bool]:
    """Whole-answer candidates: the text itself, else the one fenced block, else the outermost values."""
    blocks = _FENCE.findall(text)
    for whole in [text, blocks[0].strip()] if len(blocks) == 1 else [text]:
        with suppress(json.JSONDecodeError):
            return [json.loads(whole)], False
    return _top_level(text)


def parse_json_as(text: str, schema: type[T]) -> T:
    """The whole JSON answer in ``text`` valid for ``schema`` (a bare list fills a one-list schema); two is none."""
    cleaned = strip_thinking(text)
    if not cleaned:
        raise ParseFailure("empty answer")
    candidates, unclosed = _candidates(cleaned)
    errors: list[str] = []
    valid: list[T] = []
    # a bare list answer fills a schema whose only field is a list
    fields = schema.model_fields
    lists = [name for name, info in fields.items() if getattr(info.annotation, "__origin__", None) is list]
    list_field = lists[0] if len(fields) == len(lists) == 1 else None
    for value in candidates:
        if isinstance(value, list) and list_field is not None:
            value = {list_field: value}
        if not isinstance(value, dict):
            continue
        try:
            parsed = schema.model_validate(value)
        except ValidationError as exc:
            problems = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()[:3]]
            errors.append(str(exc).splitlines()[0] + ": " + "; ".join(problems))
            continue
        if parsed not in valid:
            valid.append(parsed)
    if len(valid) == 1:
        return valid[0]
    if valid:
        raise ParseFailure(f"{len(valid)} different JSON answers valid for {schema.__name__} in one reply")
    if errors:
        raise ParseFailure(f"JSON found but invalid for {schema.__name__}: {errors[0]}")
    if unclosed:
        raise ParseFailure(
            f"no JSON object in answer: a JSON value starts but never ends (cut off?): {cleaned[-120:]!r}"
        )
    raise ParseFailure(f"no JSON object in answer: {cleaned[:120]!r}")
