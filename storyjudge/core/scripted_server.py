"""A scripted, fault-injecting OpenAI-compatible chat server on 127.0.0.1, for tests and benchmarks.

A ``responder`` maps each request body to the answer text (or a dict with ``content``/``finish_reason``, or
``status``/``error``); latency, serving slots and faults (``FAULT_KINDS``) reproduce real endpoints. Every request
is logged (``requests``, ``log``).
"""

from __future__ import annotations

import hashlib
import json
import random
import socket
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], "str | dict[str, Any]"]
FAULT_KINDS = ("rate_limit", "server_error", "hang", "malformed_json", "truncated", "empty")


@dataclass
class FaultPlan:
    """Which requests fail, and how: drawn from a hash of ``seed``, the body and its repeats, so reproducible.

    ``script`` gives the first requests' faults in order; ``applies`` limits faults to the requests it accepts.
    """

    rates: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    hang_seconds: float = 5.0
    retry_after: float = 0.05
    script: list[str | None] = field(default_factory=list)
    applies: Callable[[dict[str, Any]], bool] | None = None

    def __post_init__(self) -> None:
        unknown = (set(self.rates) | {kind for kind in self.script if kind}) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {FAULT_KINDS}")
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._scripted = 0

    def draw(self, body: dict[str, Any] | None = None) -> str | None:
        """The fault for this request, or None."""
        if not (self.rates or self.script) or (body is not None and self.applies and not self.applies(body)):
            return None
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self._lock:
            if self._scripted < len(self.script):
                self._scripted += 1
                return self.script[self._scripted - 1]
            occurrence = self._seen.get(digest, 0)
            self._seen[digest] = occurrence + 1
        roll = random.Random(f"{self.seed}:{digest}:{occurrence}").random()
        edge = 0.0
        for kind in FAULT_KINDS:  # each kind owns the next stretch of [0, 1) as wide as its rate
            edge += self.rates.get(kind, 0.0)
            if roll < edge:
                return kind
        return None


def mixed(rate: float) -> dict[str, float]:
    """Rates with every fault kind equally likely and ``rate`` the chance that a request faults at all."""
    return {kind: rate / len(FAULT_KINDS) for kind in FAULT_KINDS}


@dataclass
class LoggedRequest:
    """One request as the server saw it: arrival and answer times, schema name, fault, Authorization."""

    arrived: float
    schema: str
    fault: str | None = None
    answered: float | None = None
    status: int | None = None
    authorization: str = ""


def _error(message: str, kind: str = "") -> bytes:
    return json.dumps({"error": {"message": message, **({"type": kind} if kind else {})}}).encode()


def last_user_text(body: dict[str, Any]) -> str:
    """Text of the last user message of a chat request."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content", "")
            if isinstance(content, list):
                return "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content)
    return ""


def schema_name(body: dict[str, Any]) -> str:
    """The JSON-schema name of a structured request ('' for text requests)."""
    fmt = body.get("response_format") or {}
    return str((fmt.get("json_schema") or {}).get("name", ""))


def all_text(body: dict[str, Any]) -> str:
    """All message text of a request, joined."""
    contents = [message.get("content", "") for message in body.get("messages", [])]
    return "\n".join(content if isinstance(content, str) else json.dumps(content) for content in contents)


class _BurstServer(ThreadingHTTPServer):
    """A threading HTTP server with a backlog of 128 (the default 5 resets a burst of connections)."""

    request_queue_size = 128
    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve a connection in a thread of its own, remembered until it closes."""
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def close_request(self, request: Any) -> None:
        """Forget a closed connection."""
        with self._connections_lock:
            self._connections.discard(request)
        super().close_request(request)

    def close_connections(self) -> None:
        """End every open kept-alive connection, so the threads serving them end with the server."""
        with self._connections_lock:
            open_now = list(self._connections)
        for connection in open_now:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class OpenAIServer:
    """Start with ``with OpenAIServer(responder) as server: ChatOpenAI(base_url=server.base_url)``."""

    def __init__(
        self,
        responder: Responder,
        *,
        latency: float = 0.0,
        slots: int | None = None,
        faults: FaultPlan | None = None,
        model: str = "scripted",
        strict_model: bool = False,
        api_key: str = "",
    ) -> None:
        self.responder = responder
        self.latency = latency
        self.faults = faults or FaultPlan()
        self.model = model
        self.strict_model = strict_model  # a request for another model gets 404, as vLLM's does
        self.api_key = api_key  # when set, a request without it gets 401
        self.requests: list[dict[str, Any]] = []
        self.log: list[LoggedRequest] = []
        self.faulted: list[str] = []
        self._slots = threading.BoundedSemaphore(slots) if slots else None
        self._lock = threading.Lock()
        self._in_flight = 0
        self.max_in_flight = 0
        self._server = _BurstServer(("127.0.0.1", 0), self._handler())
        # a short poll interval lets stop() return at once instead of after up to half a second
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The ``/v1`` URL to give to an OpenAI client."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def completions(self) -> list[dict[str, Any]]:
        """Chat-completion request bodies received (faulted ones included)."""
        return [r for r in self.requests if "messages" in r]

    def start(self) -> OpenAIServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Shut down, end its open connections (and the threads serving them) and free the port."""
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _answer(self, body: dict[str, Any], entry: LoggedRequest) -> tuple[int, dict[str, str], bytes]:
        entry.fault = fault = self.faults.draw(body)
        if fault:
            with self._lock:
                self.faulted.append(fault)
        if fault == "rate_limit":
            retry_after = str(self.faults.retry_after)
            return 429, {"Retry-After": retry_after}, _error("rate limited", "rate_limit_error")
        if fault == "server_error":
            return 500, {}, _error("internal error", "server_error")
        if fault == "hang":
            time.sleep(self.faults.hang_seconds)
        reply = self.responder(body)
        reply = {"content": reply} if isinstance(reply, str) else reply
        if reply.get("status", 200) != 200:  # a scripted HTTP error
            error = _error(reply.get("error", "scripted error"), "invalid_request_error")
            return int(reply["status"]), {}, error
        content, finish = reply.get("content", ""), reply.get("finish_reason", "stop")
        if fault == "truncated":
            content, finish = content[: max(1, len(content) // 3)], "length"
        if fault == "empty":
            content = ""
        prompt_tokens, completion_tokens = max(1, len(all_text(body)) // 4), max(1, len(content) // 4)
        payload = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        data = json.dumps(payload).encode()
        if fault == "malformed_json":
            data = data[: len(data) // 2]
        return 200, {}, data

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall

            def log_message(self, *args: object) -> None:
                return

            def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
                with suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    sent = {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}
                    for key, value in sent.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)

            def _refused(self, body: dict[str, Any] | None = None) -> bool:
                """Refuse as a real server does: a wrong key, an unknown model, no messages."""
                if server.api_key and self.headers.get("Authorization", "") != f"Bearer {server.api_key}":
                    status, message = 401, "invalid api key"
                elif body is not None and server.strict_model and body.get("model") != server.model:
                    status, message = 404, f"The model `{body.get('model')}` does not exist."
                elif body is not None and not body.get("messages"):
                    status, message = 400, "messages: at least one message is required"
                else:
                    return False
                self._send(status, {}, _error(message))
                return True

            def do_GET(self) -> None:  # noqa: N802
                if self._refused():
                    return
                models = {"object": "list", "data": [{"id": server.model, "object": "model"}]}
                self._send(200, {}, json.dumps(models).encode())

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self._refused(body):
                    return
                entry = LoggedRequest(
                    arrived=time.monotonic(),
                    schema=schema_name(body),
                    authorization=self.headers.get("Authorization", ""),
                )
                with server._lock:
                    server.requests.append(body)
                    server.log.append(entry)
                with server._slots or nullcontext():
                    with server._lock:
                        server._in_flight += 1
                        server.max_in_flight = max(server.max_in_flight, server._in_flight)
                    try:
                        time.sleep(server.latency)
                        status, headers, data = server._answer(body, entry)
                        entry.status = status
                    finally:
                        entry.answered = time.monotonic()
                        with server._lock:
                            server._in_flight -= 1
                self._send(status, headers, data)

        return Handler
