"""The UI server's guards over real HTTP: Origin, Host, bad and oversized bodies, headers on every answer."""

from __future__ import annotations

import socket
import time

import pytest

from storyjudge.apps.ui.server import UIServer
from tests.integration.test_browser import _request


def _raw(server: UIServer, request: bytes, timeout: float = 10) -> bytes:
    """Send bytes as they are; the answer, or b"" when the server closed without one."""
    with socket.create_connection(server.server_address[:2], timeout=timeout) as conn:
        conn.sendall(request)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = conn.recv(65536)
            except TimeoutError:
                raise AssertionError(f"no answer within {timeout}s to {request[:60]!r}") from None
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks) and b"connection: close" in b"".join(chunks).lower():
                return b"".join(chunks)


def test_a_write_from_another_origin_is_refused(ui: UIServer) -> None:
    body = {"text": "A story of three words and more.", "title": "t", "settings": {}}
    status, answer = _request(ui, "POST", "/api/runs", body, headers={"Origin": "http://evil.example"})
    assert status == 403 and "another site" in answer["error"]
    assert not (ui.store.root).exists() or not any(ui.store.root.iterdir())  # nothing was created
    status, _ = _request(ui, "POST", "/api/runs", body, headers={"Origin": ui.url.rstrip("/")})
    assert status == 201  # the page's own origin
    status, _ = _request(ui, "POST", "/api/runs", body)  # no Origin: not a browser's cross-site request
    assert status == 201
    assert _request(ui, "GET", "/api/runs", headers={"Origin": "http://evil.example"})[0] == 200  # a read


def test_bad_and_oversized_bodies_are_answered_at_once(ui: UIServer) -> None:
    host = f"127.0.0.1:{ui.server_address[1]}".encode()
    head = b"POST /api/runs HTTP/1.1\r\nHost: " + host + b"\r\nContent-Type: application/json\r\n"
    negative = _raw(ui, head + b"Content-Length: -1\r\nConnection: close\r\n\r\n")
    assert negative.startswith(b"HTTP/1.1 400")
    huge = _raw(ui, head + b"Content-Length: 999999999999\r\nConnection: close\r\n\r\n")
    assert huge.startswith(b"HTTP/1.1 413") and b"too large" in huge


def test_every_answer_carries_the_security_headers(ui: UIServer) -> None:
    host = f"127.0.0.1:{ui.server_address[1]}".encode()
    for path in (b"/api/runs", b"/api/nothing", b"/api/runs/no-such-run"):
        answer = _raw(ui, b"GET " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
        headers = answer.split(b"\r\n\r\n")[0].lower()
        assert (
            b"content-security-policy: default-src 'none'" in headers and b"frame-ancestors 'none'" in headers
        )
        assert b"x-content-type-options: nosniff" in headers and b"cache-control: no-store" in headers
    wrong_host = _raw(ui, b"GET / HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n")
    assert wrong_host.startswith(b"HTTP/1.1 403") and b"content-security-policy" in wrong_host.lower()


def test_forty_creates_at_once_all_succeed(ui: UIServer) -> None:
    """Concurrent creates of one story write its meta.json at once: each writer has its own temporary file."""
    from concurrent.futures import ThreadPoolExecutor

    body = {"text": "A story of three words and more.", "title": "t", "settings": {}}
    with ThreadPoolExecutor(max_workers=40) as pool:
        answers = list(pool.map(lambda _: _request(ui, "POST", "/api/runs", body), range(40)))
    assert sorted({status for status, _ in answers}) == [201]
    assert len({answer["name"] for _, answer in answers}) == 1


def test_correction_fields_out_of_range_are_a_json_400(ui: UIServer) -> None:
    body = {"text": "A story of three words and more.", "title": "t", "settings": {}}
    _, view = _request(ui, "POST", "/api/runs", body)
    url = f"/api/runs/{view['name']}/corrections"
    fact = {"fact_id": "f1", "verdict": "unsupported", "reason": "wrong"}
    host = f"127.0.0.1:{ui.server_address[1]}".encode()
    raw = b'{"iteration": 1e999, "fact_id": "f1", "verdict": "unsupported", "reason": "r"}'
    answer = _raw(
        ui,
        b"POST " + url.encode() + b" HTTP/1.1\r\nHost: " + host + b"\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(raw)).encode() + b"\r\nConnection: close\r\n\r\n" + raw,
    )
    assert answer.startswith(b"HTTP/1.1 400") and b"whole number" in answer
    for iteration in (1.5, True, 10**30, -1, "x"):
        status, answer = _request(ui, "POST", url, {**fact, "iteration": iteration})
        assert status == 400 and "whole number" in answer["error"], (iteration, answer)
    status, answer = _request(ui, "POST", url, {**fact, "iteration": 0, "reason": "x" * 5_000_000})
    assert status == 400 and "too long" in answer["error"]
    status, answer = _request(ui, "POST", url, {**fact, "iteration": 0})
    assert status == 400 and "No scored round 0" in answer["error"]  # a sound request reaches the run


def test_a_client_that_leaves_mid_body_leaves_no_traceback(
    ui: UIServer, capfd: pytest.CaptureFixture[str]
) -> None:
    """uvicorn logs to the process's stderr (its own handler): nothing lands there when a client leaves."""
    host = f"127.0.0.1:{ui.server_address[1]}".encode()
    for path in (b"/api/runs", b"/api/runs/x/corrections", b"/api/runs/x/steps/graph"):
        head = b"POST " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\nContent-Type: application/json\r\n"
        with socket.create_connection(ui.server_address[:2], timeout=10) as conn:
            conn.sendall(head + b"Content-Length: 1000\r\n\r\n" + b'{"text": "A sto')
    time.sleep(1)  # the server reads the closed connections on its own loop
    status, _ = _request(ui, "GET", "/api/runs")  # the server still answers
    assert status == 200
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ClientDisconnect" not in err, err[-2000:]
