"""What to do with a failed LLM request: retry it (and how long to wait), or say in one line why not.

Errors are told apart by type; transient ones are retried on a per-call time budget (honouring Retry-After),
permanent ones never; a server refusing every connection for ``GONE_SECONDS`` stops the run.
"""

from __future__ import annotations

import logging
import os
import random
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from typing import Literal

import httpx2
import openai

from storyjudge.core.concurrency import wait_any
from storyjudge.core.context import Context
from storyjudge.core.models import SERVER_KEY_ENV, is_openai
from storyjudge.core.tokens import count_tokens

log = logging.getLogger(__name__)

Verdict = Literal["retry", "refused", "timeout", "key", "model", "context", "bad_request", "fatal"]

GONE_SECONDS = 10.0  # a server refusing every connection this long is gone: the run stops
REFUSED_WAIT = 2.0  # the longest wait before retrying a refused connection
BACKOFF_CAP = 10.0  # the longest back-off when the server gives no Retry-After
RETRY_AFTER_CAP = 120.0  # the longest Retry-After honoured
STORM_LINE_SECONDS = 10.0  # at most one "server busy" line this often
EMPTY_RETRIES = 3  # empty or cut-off answers retried before one is returned as it is


class EmptyAnswer(ValueError):
    """A server answered with no text, or with text cut off at the token limit: retried like a transport fault."""


class ModelError(RuntimeError):
    """A call failed for a reason retrying will not fix: the run ends. Its message never carries an API key."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class CallFailed(ModelError):
    """One call's transient failures outlasted ``retry_budget_s``: its unit fails (counted), not the run."""


_KEY_LIKE = re.compile(r"\b(?:sk|key)-[A-Za-z0-9_\-]{8,}")


def redact(text: str) -> str:
    """Text without the API keys in use or anything shaped like a key (servers may echo the key back)."""
    for name in ("OPENAI_API_KEY", SERVER_KEY_ENV):
        key = os.environ.get(name, "")
        if len(key) >= 8:
            text = text.replace(key, "[redacted]")
    return _KEY_LIKE.sub("[redacted]", text)


class Policy:
    """The retries of one call, on its time budget (``ctx.retry_budget_s``), told apart by exception type."""

    def __init__(self, ctx: Context, spec: str, server: str) -> None:
        self.ctx, self.spec, self.server = ctx, spec, server
        self.started = time.monotonic()

    def wait_after(self, exc: Exception, attempt: int, messages: Sequence[tuple[str, str]]) -> None:
        """Wait, outside the LLM slot, before attempt ``attempt + 1``; else ``ModelError`` (``CallFailed``: no time)."""
        verdict = classify(exc)
        if isinstance(exc, openai.APIStatusError):
            answered(self.server)
        budget = self.ctx.retry_budget_s
        gone = verdict == "refused" and refused_for(self.server) >= min(GONE_SECONDS, budget)
        if gone or verdict not in ("retry", "timeout", "refused"):
            raise ModelError(refusal(self.spec, self.ctx, verdict, exc, messages)) from None
        wait = retry_after(exc)
        if wait is None and verdict == "timeout":  # a timed-out attempt already waited: it retries at once
            wait = 0.0
        elif wait is None:  # capped exponential back-off, jittered so that callers spread out
            cap = REFUSED_WAIT if verdict == "refused" else BACKOFF_CAP
            wait = min(cap, 0.5 * 2 ** (attempt - 1)) * random.uniform(0.5, 1)
        spent = time.monotonic() - self.started
        detail = redact(f"{self.spec}: {type(exc).__name__}: {exc}")
        if spent + wait > budget:
            message = f"{detail} (after {attempt} attempt(s) in {spent:.0f}s; retry_budget_s is {budget:g})"
            raise CallFailed(message) from None
        storm.waiting(status_of(exc), f"{detail}; attempt {attempt}, waiting {wait:.1f}s")
        try:
            wait_any((), wait)  # cut short by Ctrl-C
        finally:
            storm.resumed()


_CONTEXT_WORDS = ("context length", "context_length", "maximum context", "context window", "too many tokens")
_RETRY_STATUS = {408, 409, 429}


def classify(exc: BaseException) -> Verdict:
    """What a failed attempt calls for: a retry, or the kind of permanent failure it is."""
    if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException | TimeoutError):
        return "timeout"
    refused = httpx2.ConnectError | ConnectionRefusedError  # a connection refused or unresolvable
    if isinstance(exc, openai.APIConnectionError | refused):  # a reset mid-answer too, which is retried
        return "refused" if any(isinstance(cause, refused) for cause in _causes(exc)) else "retry"
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return "key"
    if isinstance(exc, openai.NotFoundError):
        return "model"
    if isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError):
        return "context" if any(word in str(exc).lower() for word in _CONTEXT_WORDS) else "bad_request"
    if isinstance(exc, openai.APIStatusError):
        return "retry" if exc.status_code in _RETRY_STATUS or exc.status_code >= 500 else "fatal"
    # ValueError (JSONDecodeError among them): LangChain raises it for a reply without choices (a cut-off body)
    retried = openai.APIResponseValidationError | httpx2.TransportError | ConnectionError | ValueError
    return "retry" if isinstance(exc, retried) else "fatal"


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and those it was raised from (langchain-openai wraps the SDK's, which wraps httpx's)."""
    chain = [exc]
    while len(chain) < 8 and (chain[-1].__cause__ or chain[-1].__context__) is not None:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)  # type: ignore[arg-type]
    return chain


def server_name(ctx: Context) -> str:
    """The server a run's calls go to, as the user knows it."""
    return ctx.base_url or "the OpenAI API"


def refusal(
    spec: str, ctx: Context, verdict: str, exc: Exception, messages: Sequence[tuple[str, str]]
) -> str:
    """The one line of a permanent failure: what the server said and the setting to change."""
    said = f"{type(exc).__name__}: {str(exc).rstrip('.')}"
    where = f"{spec} at {server_name(ctx)}"
    if verdict == "refused":
        return f"Cannot reach the model server for {where}: {said}. Check --base-url and that the server is running."
    if verdict == "key":
        variable = "OPENAI_API_KEY" if is_openai(ctx.base_url) else SERVER_KEY_ENV
        return f"{where} refused the request ({said}). Check the key: set {variable} to one it accepts."
    if verdict == "model":
        return (
            f"{where} does not serve that model ({said}). Check the model name (--model or the role's model)."
        )
    if verdict == "context":
        tokens = count_tokens("\n".join(content for _, content in messages))
        return (
            f"{where} rejected a prompt of about {tokens} tokens as too long ({said}). context_window is "
            f"{ctx.context_window}: set it to the model's real window, or give shorter input."
        )
    return f"{where} rejected the request ({said})."


def status_of(exc: BaseException) -> str:
    """A short name of a failure for the storm line: the HTTP status, or the kind of transport failure."""
    if isinstance(exc, openai.APIStatusError):
        return str(exc.status_code)
    if isinstance(exc, EmptyAnswer):
        return "cut off" if "cut-off" in str(exc) else "empty"
    return {"timeout": "timeout", "refused": "refused"}.get(classify(exc), type(exc).__name__)


def retry_after(exc: BaseException) -> float | None:
    """Seconds a 429/503 answer asks to wait (its Retry-After header), when it says."""
    headers = getattr(getattr(exc, "response", None), "headers", {})
    try:
        return min(max(float(headers["retry-after"]), 0.0), RETRY_AFTER_CAP)
    except (KeyError, TypeError, ValueError):  # no header, or not a number of seconds
        return None


# since when each server has refused every connection: first and latest refusal, cleared by any answer
_refusing: dict[str, tuple[float, float]] = {}
_refusing_lock = threading.Lock()


def answered(server: str) -> None:
    """Note that a server answered (an HTTP error too): it is no longer refusing."""
    if server in _refusing:  # every answered call asks: no lock taken while nothing is refusing
        with _refusing_lock:
            _refusing.pop(server, None)


def refused_for(server: str) -> float:
    """Note a refused connection; seconds of refusals since the last answer (a minute's pause restarts)."""
    now = time.monotonic()
    with _refusing_lock:
        first, last = _refusing.get(server, (now, now))
        _refusing[server] = (now if now - last > 60 else first, now)
        return now - _refusing[server][0]


class _Storm:
    """Retries of the last minute and calls waiting to retry, summed up in one line now and then."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: deque[tuple[float, str]] = deque()
        self._waiting = 0
        self._last_line = 0.0

    def waiting(self, status: str, detail: str) -> None:
        """A call is about to wait for its retry."""
        log.info("retrying after %s", detail)
        now = time.monotonic()
        with self._lock:
            self._waiting += 1
            self._recent.append((now, status))
            while self._recent and self._recent[0][0] < now - 60:
                self._recent.popleft()
            if now - self._last_line < STORM_LINE_SECONDS:
                return
            self._last_line = now
            counts = Counter(status for _, status in self._recent)
            waiting = self._waiting
        kinds = ", ".join(f"{status} x {count}" for status, count in counts.most_common())
        log.warning("server busy: %d call(s) waiting to retry; %s in the last minute", waiting, kinds)

    def resumed(self) -> None:
        with self._lock:
            self._waiting -= 1


storm = _Storm()
