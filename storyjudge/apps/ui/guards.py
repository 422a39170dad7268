"""The UI server's guards, as ASGI middleware around every route: Host, Origin, body size, security headers.

A server bound to loopback answers only requests addressed to it (no DNS rebinding); a write from a page of
another origin is refused; a body's size is checked before and while it is read; every answer is uncached, not
sniffed, sends no referrer and carries a Content-Security-Policy with ``frame-ancestors 'none'``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

API_CSP = "default-src 'none'; form-action 'none'; base-uri 'none'"
"""Every answer that sets no policy of its own (JSON, errors): nothing may load or run, should it be rendered."""
HEADER_ONLY_CSP = "; frame-ancestors 'none'"
"""What only a header can say (browsers ignore ``frame-ancestors`` in a meta tag): no page is framed."""


class TooLarge(Exception):
    """A request body went past the limit while it was read."""


def json_answer(value: Any, status: int = 200) -> JSONResponse:
    """A JSON answer, as every route and refusal of the UI gives it."""
    return JSONResponse(value, status_code=status, media_type="application/json; charset=utf-8")


class RequestGuard:
    """Refuses another host, a write from another origin, a bad or too large body; adds the security headers.

    ``allowed_hosts``: the accepted Host headers, which a write's ``Origin`` must name (None: any Host).
    """

    def __init__(
        self, app: ASGIApp, *, allowed_hosts: Callable[[], Collection[str] | None], max_body: int
    ) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request, or pass it on with its body read under the limit; the answer gets the headers."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Cache-Control"] = "no-store"
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "no-referrer"
                headers["Content-Security-Policy"] = (
                    headers.get("Content-Security-Policy") or API_CSP
                ) + HEADER_ONLY_CSP
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, with_headers)
        else:
            await self.app(scope, self._limited(receive), with_headers)

    def _refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        allowed = self.allowed_hosts()
        if allowed is not None and host not in allowed:
            return json_answer({"error": "Unexpected Host header."}, 403)
        origin = headers.get("origin")
        if scope["method"] not in ("GET", "HEAD") and origin is not None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or parts.netloc not in (allowed or {host}):
                return json_answer({"error": "Requests from another site are refused."}, 403)
        declared = headers.get("content-length")
        if declared is not None and not declared.isdigit():
            return json_answer({"error": "Content-Length must be a whole number of bytes."}, 400)
        if declared is not None and int(declared) > self.max_body:
            return json_answer({"error": self._too_large()}, 413)
        return None

    def _too_large(self) -> str:
        return f"The text is too large (over {self.max_body // (1024 * 1024)} MB)."

    def _limited(self, receive: Receive) -> Receive:
        read = 0

        async def limited() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.max_body:
                    raise TooLarge(self._too_large())
            return message

        return limited
