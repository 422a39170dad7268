"""Reading one whole JSON answer from a model's text, and nothing less: a cut-off answer fails, never a fragment."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_CLOSE_THINK = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_OPENER = re.compile(r"[{\[]")


class ParseFailure(ValueError):
    """The answer holds no JSON object valid for the schema."""


def strip_thinking(text: str) -> str:
    """Remove ``<think>...</think>`` blocks; a lone closing tag means all before it is thinking."""
    text = _THINK.sub("", text)
    orphan_close = list(_CLOSE_THINK.finditer(text))
    if orphan_close:
        text = text[orphan_close[-1].end() :]
    return re.sub(r"^\s*<think(?:ing)?>", "", text, flags=re.IGNORECASE).strip()


def _span_end(text: str, start: int) -> int | None:
    """End (exclusive) of the bracketed span opening at ``start``, skipping JSON strings; None if it never closes."""
    depth = 0
    in_string = False
    escaped = False
    for position in range(start, len(text)):
        char = text[position]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return position + 1
    return None


def _top_level(text: str) -> tuple[list[Any], bool]:
    """The complete outermost JSON values in prose, in order, and whether a bracketed span never closes."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while True:
        match = _OPENER.search(text, position)
        if match is None:
            return values, False
        start = match.start()
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            span_end = _span_end(text, start)
            if span_end is None:
                return values, True
            position = span_end
            continue
        values.append(value)
        position = end


def _candidates(text: str) -> tuple[list[Any], bool]:
    """Whole-answer candidates: the text itself, else the one fenced block, else the outermost values."""
    try:
        return [json.loads(text)], False
    except json.JSONDecodeError:
        pass
    blocks = _FENCE.findall(text)
    if len(blocks) == 1:
        try:
            return [json.loads(blocks[0].strip())], False
        except json.JSONDecodeError:
            pass
    return _top_level(text)


def _list_field(schema: type[BaseModel]) -> str | None:
    """The one field of a schema whose only field is a list (a bare list answer fills it), else None."""
    fields = schema.model_fields
    if len(fields) != 1:
        return None
    name, info = next(iter(fields.items()))
    return name if getattr(info.annotation, "__origin__", None) is list else None


def parse_json_as(text: str, schema: type[T]) -> T:
    """The whole JSON answer in ``text`` valid for ``schema`` (a bare list fills a one-list schema); two is none."""
    cleaned = strip_thinking(text)
    if not cleaned:
        raise ParseFailure("empty answer")
    candidates, unclosed = _candidates(cleaned)
    errors: list[str] = []
    valid: list[T] = []
    list_field = _list_field(schema)
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
