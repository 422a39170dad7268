"""Every LLM call in storyjudge goes through here: cached, bounded, retried, accounted, never silently wrong.

``ask_text`` returns text; ``ask_structured`` returns a pydantic object or an explicit failure that callers count
(a judge answer that cannot be parsed is *unjudged*, never "supported"). Structured output uses the strongest
strategy the model supports: a JSON-schema response format (llama.cpp grammar-constrained decoding for the
embedded model), falling back to JSON mode, then to plain text, always with tolerant parsing and bounded retries
that show the model its unparseable answer. An answer counts only when it was read whole: one cut off at
``max_tokens`` (finish reason "length") or one that copies the prompt is a failure even if it parses, and a
cut-off answer is never stored in the call cache.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

import openai
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from storyjudge.core import retry
from storyjudge.core.callcache import cache_for, request_key, server_id
from storyjudge.core.concurrency import (
    check_cancelled,
    failure_since,
    in_worker,
    llm_slot,
    note_failure,
    pause,
    wait_cancellable,
)
from storyjudge.core.context import ConfigError, Context
from storyjudge.core.echo import copied_span, request_data
from storyjudge.core.jsonparse import ParseFailure, parse_json_as, strip_thinking
from storyjudge.core.models import LOCAL_LOCK, SERVER_KEY_ENV, chat_model, is_local, resolve_spec
from storyjudge.core.tokens import count_tokens
from storyjudge.core.usage import Usage, failure, merge_usage, one_call, record

log = logging.getLogger(__name__)


class Prompt(Protocol):
    """What the gateway needs of a prompt (``prompts.Prompt`` is one): its text and its version id.

    A protocol, so the core never imports the method layer that owns the prompt files.
    """

    @property
    def text(self) -> str: ...  # noqa: D102

    @property
    def version_id(self) -> str: ...  # noqa: D102


T = TypeVar("T", bound=BaseModel)
Message = tuple[Literal["system", "user", "assistant"], str]
Method = Literal["json_schema", "json_mode", "text"]


CUT_OFF = frozenset({"length", "content_filter"})
"""Finish reasons of an answer the model did not finish: never a valid answer, never cached."""


def cut_off(finish_reason: str | None) -> bool:
    """Whether an answer ended because of the token limit (or a content filter), not because it was done."""
    return finish_reason in CUT_OFF


_KEY_LIKE = re.compile(r"\b(?:sk|key)-[A-Za-z0-9_\-]{8,}")


def redact(text: str) -> str:
    """Text without the API keys in use or anything shaped like a key (servers may echo the key back)."""
    for name in ("OPENAI_API_KEY", SERVER_KEY_ENV):
        key = os.environ.get(name, "")
        if len(key) >= 8:
            text = text.replace(key, "[redacted]")
    return _KEY_LIKE.sub("[redacted]", text)


class ModelError(RuntimeError):
    """A model call failed for a reason retrying will not fix (bad key, unknown model, unreachable server).

    The run ends with it. Its message never carries an API key, even when the server's error message echoes it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class CallFailed(ModelError):
    """One call's transient failures outlasted ``retry_budget_s``: its unit fails (counted), not the run.

    ``ask_structured`` returns it as a failed Answer; a caller of ``ask_text`` that can go on without the
    answer catches it; one that cannot (a summarizer step) lets it end the run.
    """


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


@dataclass
class TextAnswer:
    """A text completion with its finish reason and cost."""

    text: str
    finish_reason: str | None
    cached: bool
    usage: Usage


# Structured-output strategy that worked, per (spec, base_url): later calls skip strategies a server rejected.
_methods: dict[tuple[str, str], Method] = {}


def _to_messages(messages: Sequence[Message]) -> list[AnyMessage]:
    out: list[AnyMessage] = []
    for role, content in messages:
        if role == "system":
            out.append(SystemMessage(content))
        elif role == "user":
            out.append(HumanMessage(content))
        else:
            out.append(AIMessage(content))
    return out


def run_identity(ctx: Context) -> str:
    """The run a call belongs to, as far as failures go: its cache directory (``concurrency.note_failure``)."""
    return str(_cache_dir(ctx).resolve())


def stop_if_run_ended(ctx: Context, since: float) -> None:
    """Raise if the work was cancelled, or if a call of this run failed after ``since`` (``time.monotonic()``).

    Long work beside the LLM calls (the index's embedding) asks between its steps; the error raised is the
    failed call's own, so the user reads the same message whichever branch LangGraph reports.
    """
    check_cancelled()
    failed = failure_since(run_identity(ctx), since)
    if failed is not None:
        raise failed


def _cache_dir(ctx: Context) -> Path:
    if ctx.cache_dir:
        return Path(ctx.cache_dir)
    if ctx.run_dir:
        return Path(ctx.run_dir) / "cache"
    return Path(".storyjudge") / "cache"


def _invoke_within(model: Any, messages: list[AnyMessage], params: dict[str, Any], seconds: float) -> Any:
    """``model.invoke`` that gives up after ``seconds`` in all, or at once when the work is cancelled.

    httpx's timeout bounds each read, not the request: a server that trickles bytes, or a stalled connection
    pool, could hold a call far longer. The call runs on a daemon worker thread (kept between calls,
    ``storyjudge.core.concurrency.in_worker``); one that outlives its deadline is abandoned (its own read
    timeout, the same ``request_timeout``, ends it soon after) and the attempt fails with ``TimeoutError``,
    retried at once.
    """
    pending = in_worker(lambda: model.invoke(messages, **params))
    # Ctrl-C ends the wait for the answer of a call in flight at once
    if not wait_cancellable(pending.done, seconds):
        raise TimeoutError(f"no answer within the request timeout of {seconds:g}s")
    return pending.result()


def _is_unsupported_format(exc: Exception) -> bool:
    return isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError) and any(
        word in str(exc).lower() for word in ("response_format", "json_schema", "json_object", "schema")
    )


def _check_fits(ctx: Context, spec: str, prompt_version: str, messages: Sequence[Message]) -> None:
    """Refuse, unsent, a prompt longer than the model's context window.

    The server would reject it after the tokens were sent (and billed), and a run would send thousands like it.

    Tokenized only when it is over twice the window in bytes: English averages over 4 bytes a token.
    """
    size = sum(len(content.encode("utf-8")) for _, content in messages)
    if size <= 2 * ctx.context_window:
        return
    tokens = count_tokens("\n".join(content for _, content in messages))
    if tokens > ctx.context_window:
        raise ModelError(
            f"The {prompt_version.partition('@')[0]} prompt for {spec} is {tokens} tokens, more than "
            f"context_window ({ctx.context_window}); not sent. Shorten the input (a summary, a scene), or set "
            "context_window to the model's real window."
        )


def _raw_call(
    spec: str, ctx: Context, messages: Sequence[Message], params: dict[str, Any]
) -> tuple[str, str | None, int, int]:
    """One uncached call, transient failures retried within ``ctx.retry_budget_s`` (``storyjudge.core.retry``).

    Returns (text, finish_reason, input tokens, output tokens). Raises ``ModelError`` for a permanent failure
    and ``CallFailed`` when the budget ran out.
    """
    model = chat_model(spec, ctx)
    lc_messages = _to_messages(messages)
    server = "" if is_local(spec) else retry.server_name(ctx)
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        check_cancelled()  # Ctrl-C: no call is sent after it (storyjudge.core.concurrency)
        try:
            if is_local(spec):
                with LOCAL_LOCK:
                    check_cancelled()
                    record(ctx.run_dir, spec, "sent")
                    message = model.invoke(lc_messages, **params)
            else:
                with llm_slot(ctx):  # the run's budget; waiting for it ends on Ctrl-C
                    record(ctx.run_dir, spec, "sent")  # the run's ledger counts every attempt
                    message = _invoke_within(model, lc_messages, params, ctx.request_timeout)
                finish = (getattr(message, "response_metadata", None) or {}).get("finish_reason")
                if attempt <= retry.EMPTY_RETRIES and not cut_off(finish) and not str(message.text).strip():
                    raise retry.EmptyAnswer(f"an empty answer (finish_reason {finish!r})")
            break
        except Exception as exc:  # noqa: BLE001 - classified below
            if isinstance(exc, openai.LengthFinishReasonError | openai.ContentFilterFinishReasonError):
                # the SDK refuses to parse a cut-off structured answer; it is one
                cut = "length" if isinstance(exc, openai.LengthFinishReasonError) else "content_filter"
                return "", cut, count_tokens(str(messages)), 0
            local_fault = isinstance(exc, OSError) and not isinstance(exc, ConnectionError | TimeoutError)
            if _is_unsupported_format(exc) or local_fault:
                raise  # a format to fall back from; a local fault (a full disk under the ledger) is not the model's
            verdict = retry.classify(exc)
            if isinstance(exc, openai.APIStatusError):
                retry.servers.answered(server)
            if verdict == "refused" and retry.servers.refused_for(server) >= min(
                retry.GONE_SECONDS, ctx.retry_budget_s
            ):
                raise ModelError(retry.refusal(spec, ctx, verdict, exc, messages)) from None
            if verdict not in ("retry", "timeout", "refused"):
                raise ModelError(retry.refusal(spec, ctx, verdict, exc, messages)) from None
            wait = retry.retry_after(exc)
            if wait is None:  # a timed-out attempt already waited: its retry starts at once
                wait = 0.0 if verdict == "timeout" else retry.backoff(attempt, verdict)
            spent = time.monotonic() - started
            detail = f"{spec}: {type(exc).__name__}: {redact(str(exc))}"
            if spent + wait > ctx.retry_budget_s:
                if isinstance(exc, retry.EmptyAnswer):
                    break  # no time left to ask again: the empty answer is returned, and counted by the caller
                raise CallFailed(
                    f"{detail} (after {attempt} attempt(s) in {spent:.0f}s; retry_budget_s is "
                    f"{ctx.retry_budget_s:g})"
                ) from None
            retry.storm.waiting(retry.status_of(exc), f"{detail}; attempt {attempt}, waiting {wait:.1f}s")
            try:
                pause(wait)
            finally:
                retry.storm.resumed()
    retry.servers.answered(server)
    if not isinstance(message, AIMessage):
        raise ModelError(f"{spec} returned {type(message).__name__}, not a chat message")
    text = strip_thinking(message.text)
    meta = message.response_metadata or {}
    finish = meta.get("finish_reason")
    usage: dict[str, Any] = dict(message.usage_metadata or {})
    prompt_text = "\n".join(content for _, content in messages)
    input_tokens = int(usage.get("input_tokens") or count_tokens(prompt_text))
    output_tokens = int(usage.get("output_tokens") or count_tokens(text))
    record(ctx.run_dir, spec, "answer", input_tokens, output_tokens)
    return text, finish, input_tokens, output_tokens


def _complete(
    ctx: Context,
    spec: str,
    prompt_version: str,
    messages: Sequence[Message],
    *,
    temperature: float,
    max_tokens: int,
    method: Method,
    schema: type[BaseModel] | None,
    sample: int,
    attempt: int = 0,
    usable: Callable[[str, str | None], bool] | None = None,
) -> TextAnswer:
    """A cached completion: identical requests to the same server are answered from the cache at no cost.

    ``attempt`` numbers parse retries: a retry whose conversation repeats the previous one must reach the
    model again. ``usable(text, finish_reason)`` says whether an answer can be used (a structured answer that
    parses): one that cannot is neither stored nor, from an older cache, replayed.
    """
    schema_json = json_schema(schema) if schema is not None else None
    request = {
        "messages": list(messages),
        "temperature": temperature,
        "max_tokens": max_tokens,
        "method": method if schema is not None else "text",
        "schema": schema_json,
        "sample": sample,
        "seed": ctx.seed,
    }
    if attempt:
        request["attempt"] = attempt
    cache = cache_for(_cache_dir(ctx))
    key = request_key(spec, prompt_version, request, "" if is_local(spec) else server_id(ctx.base_url))

    def cached() -> TextAnswer | None:
        hit = cache.get(key)
        # older caches may hold cut-off or unusable answers
        if (
            hit is not None
            and not cut_off(hit.get("finish_reason"))
            and (usable is None or usable(hit["text"], hit.get("finish_reason")))
        ):
            record(ctx.run_dir, spec, "hit")
            return TextAnswer(hit["text"], hit.get("finish_reason"), True, one_call(spec, 0, 0, cached=True))
        return None

    found = cached()
    if found is not None:
        return found
    flight, leader = _board(_cache_dir(ctx), key)
    while not leader:  # the identical request is in flight: its answer is this one's
        wait_cancellable(flight.done)
        if flight.answer is not None:
            record(ctx.run_dir, spec, "hit")
            shared = flight.answer
            return TextAnswer(shared.text, shared.finish_reason, True, one_call(spec, 0, 0, cached=True))
        flight, leader = _board(_cache_dir(ctx), key)  # it failed: ask again, perhaps as the one who asks
    try:
        found = cached()  # an identical call may have landed between the first look and boarding
        if found is not None:
            flight.answer = found
            return found
        answer = _ask_server(ctx, spec, prompt_version, messages, request, key, schema, usable)
        flight.answer = answer
        return answer
    finally:
        _land(flight)


@dataclass
class _Flight:
    """One request on its way to the server; callers asking the identical request meanwhile wait for it."""

    key: tuple[str, str]
    done: threading.Event = field(default_factory=threading.Event)
    answer: TextAnswer | None = None


_flights: dict[tuple[str, str], _Flight] = {}
_flights_lock = threading.Lock()


def _board(cache_dir: Path, key: str) -> tuple[_Flight, bool]:
    """The flight of an uncached request, and whether this caller is the one to send it (single-flight).

    Branches of one run may ask the identical request at once (a fact that two summary sentences share, judged
    in two branches): one HTTP call answers both, as the cache would have had they come one after the other.
    Keyed by cache directory too, so runs with separate caches keep separate calls.
    """
    flight_key = (str(cache_dir), key)
    with _flights_lock:
        flight = _flights.get(flight_key)
        if flight is not None:
            return flight, False
        flight = _flights[flight_key] = _Flight(flight_key)
        return flight, True


def _land(flight: _Flight) -> None:
    """End a flight: later identical requests read the cache; the waiting ones wake up."""
    with _flights_lock:
        if _flights.get(flight.key) is flight:
            del _flights[flight.key]
    flight.done.set()


def _ask_server(
    ctx: Context,
    spec: str,
    prompt_version: str,
    messages: Sequence[Message],
    request: dict[str, Any],
    key: str,
    schema: type[BaseModel] | None,
    usable: Callable[[str, str | None], bool] | None,
) -> TextAnswer:
    """The uncached part of ``_complete``: send the request, store a usable answer in the cache."""
    temperature, max_tokens, method, sample = (
        request["temperature"],
        request["max_tokens"],
        request["method"],
        request["sample"],
    )
    schema_json = request["schema"]
    cache = cache_for(_cache_dir(ctx))
    params: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
    if is_local(spec):
        params["seed"] = ctx.seed + sample
        if schema_json is not None and method == "json_schema":
            params["response_format"] = {"type": "json_object", "schema": copy.deepcopy(schema_json)}
    else:
        if ctx.seed or sample:
            params["seed"] = ctx.seed + sample
        # The format goes in the request body as it is, not as a typed argument: given ``response_format``,
        # LangChain sends the call through the SDK's ``parse`` path, which walks the schema through the SDK's
        # type transforms and rebuilds the answer as models; the body on the wire is the same, and the answer
        # is parsed here. Measured over 150 calls: 7.4 ms of client CPU a call that way, 5.4 ms this way.
        if schema_json is not None and method == "json_schema":
            params["extra_body"] = {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": schema.__name__ if schema else "Answer",
                        "schema": copy.deepcopy(schema_json),  # the cached schema stays as built
                    },
                }
            }
        elif schema_json is not None and method == "json_mode":
            params["extra_body"] = {"response_format": {"type": "json_object"}}
    try:
        _check_fits(ctx, spec, prompt_version, messages)
        text, finish, n_in, n_out = _raw_call(spec, ctx, messages, params)
    except CallFailed:  # the caller's unit fails, the run goes on
        raise
    except ModelError as exc:  # the run ends with it: a long branch beside this one stops early
        note_failure(run_identity(ctx), exc)
        raise
    # an empty or cut-off answer is a fault to retry later, not a result to replay
    if text.strip() and not cut_off(finish) and (usable is None or usable(text, finish)):
        cache.put(key, spec, prompt_version, {"text": text, "finish_reason": finish, "usage": [n_in, n_out]})
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
    """A free-text answer from the role's model (cached, retried on transport errors).

    Raises ``CallFailed`` when the server kept failing for ``ctx.retry_budget_s``: a caller that can count the
    unit as failed catches it.
    """
    spec = resolve_spec(ctx, role)
    return _complete(
        ctx,
        spec,
        prompt.version_id,
        messages,
        temperature=ctx.temperature if temperature is None else temperature,
        max_tokens=max_tokens or ctx.max_output_tokens,
        method="text",
        schema=None,
        sample=sample,
    )


@cache
def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema, built once: pydantic rebuilds it on every call (about 2 ms, twice per request).

    Callers must not change the returned dict.
    """
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
    """A pydantic object from the role's model, or an Answer whose ``error`` says why there is none.

    Permanent failures (key, model, request) raise ModelError; a call that kept failing for
    ``ctx.retry_budget_s``, and answers that do not parse after ``ctx.parse_retries`` more attempts with the
    failed answer shown to the model, are returned as failures.
    """
    spec = resolve_spec(ctx, role)
    temp = ctx.temperature if temperature is None else temperature
    limit = max_tokens or ctx.max_output_tokens
    base = [*messages]
    if base and base[-1][0] == "user":
        base[-1] = ("user", base[-1][1] + "\n\n" + schema_instruction(schema))
    else:
        base.append(("user", schema_instruction(schema)))
    method_key = (spec, "" if is_local(spec) else ctx.base_url)
    method: Method = _methods.get(method_key, "json_schema")
    usage: Usage = {}
    conversation = list(base)
    text, error, finish, cached = "", "not attempted", None, False

    checked: dict[tuple[str, str | None], tuple[T | None, str]] = {}

    def check(answer: str, finish_reason: str | None) -> tuple[T | None, str]:
        """The parsed answer and why it cannot count ("" when it can), worked out once per answer.

        The cache asks before it replays or stores an answer, and the same answer is then used.
        """
        seen = (answer, finish_reason)
        if seen not in checked:
            try:
                value = parse_json_as(answer, schema)
                checked[seen] = (value, _unread(answer, finish_reason, prompt, base, schema) or "")
            except ParseFailure as exc:
                checked[seen] = (None, str(exc))
        return checked[seen]

    def usable(answer: str, finish_reason: str | None) -> bool:
        return not check(answer, finish_reason)[1]

    attempts = 0
    while attempts <= ctx.parse_retries:
        try:
            reply = _complete(
                ctx,
                spec,
                prompt.version_id,
                conversation,
                temperature=temp,
                max_tokens=limit,
                method=method,
                schema=schema,
                sample=sample,
                attempt=attempts,
                usable=usable,
            )
        except CallFailed as exc:  # the server kept failing: this unit has no answer, counted as such
            error = f"no answer from the server: {exc}"
            break
        except Exception as exc:
            if _is_unsupported_format(exc) and method != "text":
                method = "json_mode" if method == "json_schema" else "text"
                _methods[method_key] = method
                log.info("%s rejected the response format; falling back to %s", spec, method)
                continue
            raise
        attempts += 1
        usage = merge_usage(usage, reply.usage)
        text, finish, cached = reply.text, reply.finish_reason, reply.cached
        value, problem = check(text, finish)
        if problem or value is None:
            error = problem or "no answer"
            if cut_off(finish) and "cut off" not in error:
                error += f" (output cut off: finish_reason {finish!r})"
            conversation = [
                *base,
                ("assistant", text[:2000]),
                ("user", f"That answer could not be used: {error}. {schema_instruction(schema)}"),
            ]
            continue
        return Answer(value, text, None, finish, attempts, cached, usage)
    return Answer(None, text, error, finish, attempts, cached, merge_usage(usage, failure(spec)))


def _unread(
    text: str, finish: str | None, prompt: Prompt, messages: Sequence[Message], schema: type[BaseModel]
) -> str | None:
    """Why a parsed answer still cannot count: cut off, or a copy of the prompt; None when it can."""
    if cut_off(finish):
        return f"output cut off (finish_reason {finish!r}); a partial answer is no answer"
    fixed = [prompt.text, schema_instruction(schema)]
    copied = copied_span(text, fixed, request_data([content for _, content in messages], fixed))
    if copied:
        return f"the answer copies the prompt ({copied!r}...), it does not answer it"
    return None


def require_models(ctx: Context, roles: Sequence[str]) -> None:
    """Check every role's spec before any work starts, so a bad spec fails in a second, not mid-run."""
    from storyjudge.core.models import check_spec

    for role in roles:
        spec = resolve_spec(ctx, role)
        try:
            check_spec(spec, ctx)
        except ConfigError as exc:
            raise ConfigError(f"{role} model: {exc}") from None
