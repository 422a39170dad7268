"""Every LLM call goes through here: cached, bounded, retried, accounted, never silently wrong.

A structured answer that cannot be parsed, is cut off or copies the prompt is a counted failure, never cached.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar

import openai
from langchain_core.messages import AIMessage
from pydantic import BaseModel

from storyjudge.core import concurrency, retry
from storyjudge.core.callcache import cache_for, request_key, server_id
from storyjudge.core.concurrency import check_cancelled
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.jsonparse import ParseFailure, parse_json_as, strip_thinking
from storyjudge.core.models import LOCAL_LOCK, chat_model, check_spec, is_local, resolve_spec
from storyjudge.core.promptcopy import copied_span, request_data
from storyjudge.core.retry import CallFailed, ModelError
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import Usage, failure, merge_usage, one_call, record

log = logging.getLogger(__name__)


class Prompt(Protocol):
    """What the gateway needs of a prompt (``prompts.Prompt`` is one), so the core never imports the prompts."""

    @property
    def text(self) -> str: ...  # noqa: D102

    @property
    def version_id(self) -> str: ...  # noqa: D102


T = TypeVar("T", bound=BaseModel)
Message = tuple[Literal["system", "user", "assistant"], str]
Method = Literal["json_schema", "json_mode", "text"]


def cut_off(finish_reason: str | None) -> bool:
    """Whether an answer ended at the token limit (or a content filter): never a valid answer, never cached."""
    return finish_reason in ("length", "content_filter")


@dataclass
class Answer(Generic[T]):
    """What one logical call produced: the parsed value or the reason there is none, plus its cost."""

    value: T | None
    text: str
    error: str | None = None
    finish_reason: str | None = None
    attempts: int = 1
    cached: bool = False
    usage: Usage = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether a value came back."""
        return self.value is not None


class TextAnswer(NamedTuple):
    """A text completion with its finish reason and cost."""

    text: str
    finish_reason: str | None
    cached: bool
    usage: Usage


_methods: dict[tuple[str, str], Method] = {}  # (spec, base_url) -> the structured-output strategy that worked
_failures: dict[str, tuple[float, BaseException]] = {}  # run (its cache directory) -> when it failed, and why


def note_failure(run: str, error: BaseException) -> None:
    """Remember that the run ``run`` is ending with ``error``, for ``stop_if_run_ended``."""
    _failures[run] = (time.monotonic(), error)


def stop_if_run_ended(ctx: Context, since: float) -> None:
    """Raise if the work was cancelled, or if a call of this run failed after ``since`` (``time.monotonic()``).

    LangGraph raises a branch's error only once its step's other branches end, so long work asks between steps.
    """
    check_cancelled()
    when, error = _failures.get(_run(ctx), (0.0, None))
    if error is not None and when >= since:
        raise error


def _cache_dir(ctx: Context) -> Path:
    return Path(ctx.cache_dir or (Path(ctx.run_dir or ".storyjudge") / "cache"))


def _run(ctx: Context) -> str:
    return str(_cache_dir(ctx).resolve())


def _is_unsupported_format(exc: Exception) -> bool:
    return isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError) and any(
        word in str(exc).lower() for word in ("response_format", "json_schema", "json_object", "schema")
    )


def _raw_call(
    spec: str, ctx: Context, messages: Sequence[Message], params: dict[str, Any]
) -> tuple[str, str | None, int, int]:
    """One uncached call as (text, finish_reason, input tokens, output tokens), retried by ``retry.Policy``."""
    model, local = chat_model(spec, ctx), is_local(spec)
    invoke = partial(model.invoke, list(messages), **params)
    policy = retry.Policy(ctx, spec, "" if local else retry.server_name(ctx))
    attempt = glitches = 0  # every attempt; the cut-off or empty answers among them
    while True:
        attempt += 1
        check_cancelled()  # Ctrl-C: no call is sent after it
        try:
            with LOCAL_LOCK if local else concurrency.llm_slots(ctx):
                check_cancelled()
                record(ctx.run_dir, spec, "sent")  # the run's ledger counts every attempt
                sent = time.perf_counter()
                message = invoke() if local else concurrency.within(ctx.request_timeout, invoke)
                seconds = time.perf_counter() - sent
            finish = message.response_metadata.get("finish_reason")
            if not local and glitches < retry.EMPTY_RETRIES:  # a server's glitch, asked again in the budget
                glitch = "a cut-off" if cut_off(finish) else "" if str(message.text).strip() else "an empty"
                if glitch:
                    glitches += 1
                    raise retry.EmptyAnswer(f"{glitch} answer (finish_reason {finish!r})")
            break
        except Exception as exc:  # noqa: BLE001 - classified below
            local_fault = isinstance(exc, OSError) and not isinstance(exc, ConnectionError | TimeoutError)
            if _is_unsupported_format(exc) or local_fault:
                raise  # a format to fall back from; a local fault (a full disk under the ledger) is not the model's
            try:
                policy.wait_after(exc, attempt, messages)
            except CallFailed:
                if isinstance(exc, retry.EmptyAnswer):
                    break  # no time left to ask again: the empty answer is returned, and counted by the caller
                raise
    retry.answered(policy.server)
    if not isinstance(message, AIMessage):
        raise ModelError(f"{spec} returned {type(message).__name__}, not a chat message")
    text = strip_thinking(message.text)
    usage: dict[str, Any] = dict(message.usage_metadata or {})
    input_tokens = int(usage.get("input_tokens") or count_tokens("\n".join(c for _, c in messages)))
    output_tokens = int(usage.get("output_tokens") or count_tokens(text))
    record(ctx.run_dir, spec, "answer", input_tokens, output_tokens, seconds=seconds)  # a dry run's latency
    return text, message.response_metadata.get("finish_reason"), input_tokens, output_tokens


def _request(
    ctx: Context,
    messages: Sequence[Message],
    temperature: float | None,
    max_tokens: int | None,
    sample: int,
    schema: type[BaseModel] | None = None,
    method: Method = "text",
    attempt: int = 0,
) -> dict[str, Any]:
    """What a call asks, as the call cache keys it (``attempt``: parse retries must reach the model)."""
    request = {
        "messages": list(messages),
        "temperature": ctx.temperature if temperature is None else temperature,
        "max_tokens": max_tokens or ctx.max_output_tokens,
        "method": method if schema is not None else "text",
        "schema": json_schema(schema) if schema is not None else None,
        "sample": sample,
        "seed": ctx.seed,
    }
    return {**request, "attempt": attempt} if attempt else request


def _complete(
    ctx: Context,
    spec: str,
    prompt_version: str,
    request: dict[str, Any],
    schema: type[BaseModel] | None = None,
    usable: Callable[[str, str | None], bool] | None = None,
) -> TextAnswer:
    """A cached completion; an unusable answer is neither stored nor replayed, but the embedded model's is."""
    cache = cache_for(_cache_dir(ctx))
    key = request_key(spec, prompt_version, request, "" if is_local(spec) else server_id(ctx.base_url))

    def cached() -> TextAnswer | None:
        hit = cache.get(key) or {}
        text, finish = hit.get("text"), hit.get("finish_reason")
        if text is None:
            return None
        if not (hit.get("deterministic") and is_local(spec)) and (
            cut_off(finish) or (usable is not None and not usable(text, finish))
        ):
            return None  # older caches may hold cut-off or unusable answers
        return shared(text, finish)

    def shared(text: str, finish: str | None) -> TextAnswer:
        record(ctx.run_dir, spec, "hit")
        return TextAnswer(text, finish, True, one_call(spec, 0, 0, cached=True))

    if (found := cached()) is not None:
        return found
    flight, leader = _board(_cache_dir(ctx), key)
    while not leader:  # the identical request is in flight: its answer is this one's
        concurrency.wait_any([flight])
        answer = flight.result()
        if answer is not None:
            return shared(answer.text, answer.finish_reason)
        flight, leader = _board(_cache_dir(ctx), key)  # it failed: ask again, perhaps as the one who asks
    answer = None
    try:  # an identical call may have landed between the first look and boarding
        answer = cached() or _ask_server(ctx, spec, prompt_version, request, key, schema, usable)
        return answer
    finally:
        with _flights_lock:  # later identical requests read the cache
            _flights.pop((str(_cache_dir(ctx)), key), None)
        flight.set_result(answer)


_flights: dict[tuple[str, str], Future[TextAnswer | None]] = {}
_flights_lock = threading.Lock()


def _board(cache_dir: Path, key: str) -> tuple[Future[TextAnswer | None], bool]:
    """The flight of an uncached request, and whether this caller sends it: identical requests share one call."""
    with _flights_lock:
        leader = (str(cache_dir), key) not in _flights
        return _flights.setdefault((str(cache_dir), key), Future()), leader


def _ask_server(
    ctx: Context,
    spec: str,
    prompt_version: str,
    request: dict[str, Any],
    key: str,
    schema_type: type[BaseModel] | None,
    usable: Callable[[str, str | None], bool] | None,
) -> TextAnswer:
    params: dict[str, Any] = {"temperature": request["temperature"], "max_tokens": request["max_tokens"]}
    schema, method, local = request["schema"], request["method"], is_local(spec)
    if local or ctx.seed or request["sample"]:
        params["seed"] = ctx.seed + request["sample"]
    if schema is not None and method == "json_schema":
        schema = copy.deepcopy(schema)  # the cached schema stays as built
        if local:
            params["response_format"] = {"type": "json_object", "schema": schema}
        else:
            # in the raw body: a typed ``response_format`` takes the SDK's slower ``parse`` path
            name = schema_type.__name__ if schema_type else "Answer"
            format_ = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
            params["extra_body"] = {"response_format": format_}
    elif schema is not None and method == "json_mode" and not local:
        params["extra_body"] = {"response_format": {"type": "json_object"}}
    messages = request["messages"]
    try:  # a prompt over the window is refused unsent (tokenized only when over twice it in bytes)
        if sum(len(content.encode("utf-8")) for _, content in messages) > 2 * ctx.context_window:
            tokens = count_tokens("\n".join(content for _, content in messages))
            if tokens > ctx.context_window:
                raise ModelError(
                    f"The {prompt_version.partition('@')[0]} prompt for {spec} is {tokens} tokens, more than "
                    f"context_window ({ctx.context_window}); not sent. Shorten the input (a summary, a scene), "
                    "or set context_window to the model's real window."
                )
        text, finish, n_in, n_out = _raw_call(spec, ctx, messages, params)
    except ModelError as exc:
        if not isinstance(exc, CallFailed):  # the run ends with it (not just the caller's unit): stop early
            note_failure(_run(ctx), exc)
        raise
    # an empty or cut-off answer is retried later, not replayed; the embedded model's is kept (``_complete``)
    good = bool(text.strip()) and not cut_off(finish) and (usable is None or usable(text, finish))
    if good or local:
        response: dict[str, Any] = {"text": text, "finish_reason": finish, "usage": [n_in, n_out]}
        if not good:
            response["deterministic"] = True
        cache_for(_cache_dir(ctx)).put(key, spec, prompt_version, response)
    return TextAnswer(text, finish, False, one_call(spec, n_in, n_out, cached=False))


def ask_text(
    ctx: Context,
    role: str,
    prompt: Prompt,
    messages: Sequence[Message],
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
    sample: int = 0,
) -> TextAnswer:
    """A free-text answer from the role's model; ``CallFailed`` when the server kept failing for its budget."""
    request = _request(ctx, messages, temperature, max_tokens, sample)
    return _complete(ctx, resolve_spec(ctx, role), prompt.version_id, request)


@cache
def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema, built once. Callers must not change it."""
    return schema.model_json_schema()


def schema_instruction(schema: type[BaseModel]) -> str:
    """The format instruction appended after the data, so the long fixed prompt stays a cacheable prefix."""
    return (
        "Answer with one JSON object and nothing else. It must validate against this JSON schema:\n"
        + json.dumps(json_schema(schema), separators=(",", ":"))
    )


def ask_structured(
    ctx: Context,
    role: str,
    prompt: Prompt,
    messages: Sequence[Message],
    schema: type[T],
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
    sample: int = 0,
) -> Answer[T]:
    """A pydantic object from the role's model, or an Answer whose ``error`` says why; ModelError when permanent."""
    spec, instruction = resolve_spec(ctx, role), schema_instruction(schema)
    if messages and messages[-1][0] == "user":
        base: list[Message] = [*messages[:-1], ("user", messages[-1][1] + "\n\n" + instruction)]
    else:
        base = [*messages, ("user", instruction)]
    method_key = (spec, "" if is_local(spec) else ctx.base_url)
    method: Method = _methods.get(method_key, "json_schema")
    usage: Usage = {}
    conversation = list(base)
    text, error, finish, cached = "", "not attempted", None, False

    @cache  # the cache asks too
    def check(answer: str, finish_reason: str | None) -> tuple[T | None, str]:
        """The parsed answer and why it cannot count ("" when it can)."""
        try:
            value = parse_json_as(answer, schema)
        except ParseFailure as exc:
            return None, str(exc)
        if cut_off(finish_reason):
            return value, f"output cut off (finish_reason {finish_reason!r}); a partial answer is no answer"
        fixed = [prompt.text, instruction]
        copied = copied_span(answer, fixed, request_data([content for _, content in base], fixed))
        return value, f"the answer copies the prompt ({copied!r}...), it does not answer it" if copied else ""

    def usable(answer: str, finish_reason: str | None) -> bool:
        return not check(answer, finish_reason)[1]

    attempts = 0
    while attempts <= ctx.parse_retries:
        try:
            request = _request(ctx, conversation, temperature, max_tokens, sample, schema, method, attempts)
            reply = _complete(ctx, spec, prompt.version_id, request, schema, usable)
        except CallFailed as exc:  # the server kept failing: this unit has no answer, counted as such
            error = f"no answer from the server: {exc}"
            break
        except Exception as exc:
            if _is_unsupported_format(exc) and method != "text":
                method = _methods[method_key] = "json_mode" if method == "json_schema" else "text"
                log.info("%s rejected the response format; falling back to %s", spec, method)
                continue
            raise
        attempts += 1
        usage = merge_usage(usage, reply.usage)
        text, finish, cached = reply.text, reply.finish_reason, reply.cached
        value, problem = check(text, finish)
        if value is not None and not problem:
            return Answer(value, text, None, finish, attempts, cached, usage)
        error = problem or "no answer"
        if cut_off(finish) and "cut off" not in error:
            error += f" (output cut off: finish_reason {finish!r})"
        retry_note = f"That answer could not be used: {error}. {instruction}"
        conversation = [*base, ("assistant", text[:2000]), ("user", retry_note)]
    return Answer(None, text, error, finish, attempts, cached, merge_usage(usage, failure(spec)))


def require_models(ctx: Context, roles: Sequence[str]) -> None:
    """Check every role's spec before any work starts, so a bad spec fails in a second, not mid-run."""
    for role in roles:
        try:
            check_spec(resolve_spec(ctx, role), ctx)
        except ConfigError as exc:
            raise ConfigError(f"{role} model: {exc}") from None
