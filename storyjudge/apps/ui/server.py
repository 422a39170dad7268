"""The UI's HTTP server: Starlette routes under uvicorn, a JSON API and one page of our own.

Nothing here makes an outbound call; it binds 127.0.0.1 by default, and the guards (``guards.py``) wrap every
route. Routes that touch the disk or render run in Starlette's thread pool; steps run in the job runner's thread.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from storyjudge.apps.report.assets import CSP as REPORT_CSP
from storyjudge.apps.report.assets import environment, fragment, inline_asset
from storyjudge.apps.report.ckg import graph_view
from storyjudge.apps.report.page import headline, render_report
from storyjudge.apps.report.rounds import FACT_COUNTS, round_views
from storyjudge.apps.ui.examples import Example, list_examples
from storyjudge.apps.ui.guards import RequestGuard, TooLarge, json_answer
from storyjudge.apps.ui.jobs import Busy, JobRunner
from storyjudge.apps.ui.messages import for_ui
from storyjudge.apps.ui.session import RunNotFound, RunSession, RunStore, clean_settings
from storyjudge.apps.ui.steps import StepRefused, correct_verdict, refinable
from storyjudge.core.context import ConfigError
from storyjudge.core.corrections import MAX_REASON_CHARS
from storyjudge.core.coverage import describe_card
from storyjudge.core.keptruns import RUN_ID, RunRef, load_summary, runs_folder, story_runs
from storyjudge.core.models import LOCAL_NOTE, describe_models
from storyjudge.core.passages import scene_texts
from storyjudge.core.rundir import RunDir, RunDirMismatch
from storyjudge.core.usage import cost_text, totals

MAX_BODY_BYTES = 60 * 1024 * 1024
PAGE_CSP = (
    "default-src 'none'; connect-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; form-action 'none'; base-uri 'none'"
)
"""The page's policy, in its meta tag and in the header it is served with."""
REPORT_PAGE_CSP = REPORT_CSP + "; form-action 'none'; base-uri 'none'"
RUN = "{run:str}"
DOWNLOADS = {
    "summary.txt": ("text/plain", "No summary yet: generate or give the initial summary first."),
    "result.json": ("application/json", "No result.json yet: it is written when the refinement loop stops."),
    "report.html": ("text/html", "No report yet: compute the factuality score first."),
}
"""A run's files: their type, and why one is not there yet (what makes it)."""
ROUND_FIELDS = (
    "iteration",
    "score",
    "coverage",
    "interval",
    "reliable",
    "delta",
    "accepted",
    "corrections",
    "note",
)
"""What the page's score panel lists of each round's view."""
SHUTDOWN_SECONDS = 2
MAX_ROUND = 10_000
"""The highest round number a request may name (a run has a handful)."""


class ApiError(Exception):
    """An error answered as ``{"error": message}`` with an HTTP status."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def is_loopback(host: str) -> bool:
    """Whether a bind address is only reachable from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class UIServer:
    """The server and everything its routes share: a bound socket, the Starlette app and its uvicorn server.

    Made bound, not yet serving (port 0 picks a free port).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        runs_dir: Path = Path("runs"),
        defaults: dict[str, Any] | None = None,
        squality: Path | None = None,
    ) -> None:
        self.store = RunStore(runs_dir)
        self.runner = JobRunner()
        self.defaults = defaults or {}  # the settings of new runs given on the command line (model, ...)
        self.examples: dict[str, Example] = {e.id: e for e in list_examples(squality)}
        template = environment().get_template("ui.html.j2")  # the single page, its styles and scripts inlined
        groups = groupby(self.examples.values(), attrgetter("group"))  # as ``list_examples`` orders them
        self.page = template.render(
            csp=PAGE_CSP,
            css=inline_asset("report.css") + inline_asset("ui.css"),
            js=inline_asset("report.js") + inline_asset("ui.js"),
            groups=[(name, list(examples)) for name, examples in groups],
            settings=clean_settings(self.defaults),
        )
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=64)  # closed if it fails
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        self.app = build_app(self)
        self._uvicorn: Any = None
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        """Where the page is served."""
        host, port = str(self.server_address[0]), int(self.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def allowed_hosts(self) -> set[str] | None:
        """Host headers accepted (None: any, when bound to a non-loopback address on purpose)."""
        host, port = str(self.server_address[0]), int(self.server_address[1])
        if not is_loopback(host):
            return None
        return {f"{name}:{port}" for name in (host, "localhost", "127.0.0.1", "[::1]")}

    def serve_forever(self) -> None:
        """Serve until ``shutdown`` (or Ctrl-C, in the main thread)."""
        import uvicorn

        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        )
        self._uvicorn = uvicorn.Server(config)
        try:
            self._uvicorn.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serving and wait until the server has stopped."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
            self._stopped.wait(SHUTDOWN_SECONDS + 5)

    def server_close(self) -> None:
        """Close the listening socket."""
        self.socket.close()


def run_view(session: RunSession, runner: JobRunner) -> dict[str, Any]:
    """Everything the page shows for a run; HTML fragments come from the report's escaping renderer."""
    from nodes.assess import best_of

    with session.lock:
        state = dict(session.state)
        ckg = session.ckg()
    iterations = sorted(state.get("iterations") or [], key=lambda it: it["iteration"])
    chosen = best_of(iterations)
    best = chosen["iteration"] if chosen else None
    views = round_views(
        iterations,
        passages=scene_texts(state.get("scenes") or []),  # what the verdicts' evidence names
        best=best,
        order=[it["iteration"] for it in reversed(iterations)],  # the newest first
        prefix="ui",
    )
    shown = [
        {
            **{name: getattr(view, name) for name in ROUND_FIELDS},
            **{k: view.counts[k] for k in FACT_COUNTS},
            "headline": describe_card(it["factscore"]),  # the card in words (``core.coverage``)
            "html": fragment("iteration_view", view),
        }
        for it, view in zip(iterations, views, strict=True)
    ]
    try:
        models = [{"role": r, "spec": s, "note": n} for r, s, n in describe_models(session.context())]
    except ConfigError:
        models = []
    summary = state.get("summary") or None
    top = headline(
        iterations, best, state.get("stop_reason") or ("not refined yet" if refinable(state) else "")
    )
    return {
        "name": session.name,
        "title": state.get("title", ""),
        "source": state.get("source", ""),
        "settings": state.get("settings") or {},
        "models": models,
        "embedded_roles": sorted({m["role"] for m in models if m["note"] == LOCAL_NOTE}),
        "segmentation": state.get("segmentation", ""),
        "scenes": [
            {"id": s["id"], "title": s.get("title", ""), "text": s.get("text", "")}
            for s in state.get("scenes") or []
        ],
        "ckg": {"stats": state.get("ckg_stats") or {}, "html": fragment("ckg_view", graph_view(ckg))}
        if ckg is not None
        else None,
        "summary": {
            "text": summary["text"],
            "events": len(summary.get("events") or []),
            "given": summary.get("strategy") == "given",
        }
        if summary
        else None,
        "iterations": shown,
        "best_iteration": best,
        "refinable": refinable(state),
        "stop_reason": state.get("stop_reason") or "",
        "headline": "" if top is None else fragment("headline_view", top, "ui"),  # "" before any score
        "usage": totals(state.get("usage")) | {"cost": cost_text(state.get("usage"))},
        "report": session.rd.report.is_file(),
        "result": session.rd.result.is_file(),
        "job": runner.job_view(session),
        "run_id": state.get("run_id"),
        "runs": story_runs(session.rd.root),
    }


def compared(server: UIServer, request: Request) -> dict[str, Any]:
    """The comparison of a story's kept runs named in the query (``runs=ID`` or ``runs=ID#N``, twice or more)."""
    from storyjudge.apps.compare import compare

    session = _session(server, request.path_params["run"])
    refs = []
    for name in parse_qs(request.url.query).get("runs") or []:
        ref = RunRef.parse(name)
        if not RUN_ID.match(str(ref.path)):
            raise ApiError(HTTPStatus.BAD_REQUEST, f"No run named {name!r}.")
        refs.append(RunRef(runs_folder(session.rd.root) / ref.path, ref.round))
    return compare(refs)  # a ValueError is answered 400 with its message, as every route's


def run_file(session: RunSession, name: str) -> bytes:
    """A run's ``result.json``, ``report.html`` or ``summary.txt``; 404 saying what makes it.

    The summary to take away is the best round's (``nodes.assess.fallback_of``), else the initial summary.
    """
    from nodes.assess import fallback_of

    if name == "summary.txt":
        with session.lock:
            state = dict(session.state)
        chosen = fallback_of(list(state.get("iterations") or []))
        text = str(chosen["summary"] if chosen else (state.get("summary") or {}).get("text") or "").strip()
        body = f"{text}\n".encode() if text else b""
    else:
        file = session.rd.result if name == "result.json" else session.rd.report
        body = file.read_bytes() if file.is_file() else b""
    if not body:
        raise ApiError(HTTPStatus.NOT_FOUND, DOWNLOADS[name][1])
    return body


def _session(server: UIServer, name: str) -> RunSession:
    try:
        return server.store.open(name)
    except RunNotFound:
        raise ApiError(HTTPStatus.NOT_FOUND, f"No run named {name!r}.") from None


def _html(body: str | bytes, csp: str) -> Response:
    return Response(body, media_type="text/html; charset=utf-8", headers={"Content-Security-Policy": csp})


def _round_number(value: Any) -> int:
    """A round's number as JSON gives it: a whole number in range (not 1.5, "1e999", true or 10**30)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ROUND:
        raise ApiError(
            HTTPStatus.BAD_REQUEST, f"Say which round: iteration is a whole number, 0 to {MAX_ROUND}."
        )
    return value


async def _body(request: Request) -> dict[str, Any]:
    if not (request.headers.get("content-type") or "").startswith("application/json"):
        raise ApiError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "Send the request body as application/json.")
    try:
        raw = await request.body()
    except ClientDisconnect:  # the client left mid-body: nobody to answer, nothing to log
        raise ApiError(HTTPStatus.BAD_REQUEST, "The request body did not arrive whole.") from None
    try:
        value = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(HTTPStatus.BAD_REQUEST, "The request body is not valid JSON.") from None
    if not isinstance(value, dict):
        raise ApiError(HTTPStatus.BAD_REQUEST, "The request body must be a JSON object.")
    return value


def build_app(server: UIServer) -> Starlette:
    """The routes, the guards around them, and errors answered as ``{"error": message}``."""

    def page(request: Request) -> Response:
        return _html(server.page, PAGE_CSP)

    def examples(request: Request) -> Response:
        return json_answer(
            [{"id": e.id, "label": e.label, "group": e.group} for e in server.examples.values()]
        )

    def runs(request: Request) -> Response:
        return json_answer(server.store.list())

    def posted(work: Callable[..., Response]) -> Callable[[Request], Awaitable[Response]]:
        """A POST route: the JSON body read here, then ``work(body, **path parameters)`` in the thread pool."""

        async def route(request: Request) -> Response:
            body = await _body(request)
            return await run_in_threadpool(work, body, **request.path_params)

        return route

    def create_run(body: dict[str, Any]) -> Response:
        settings = clean_settings(body.get("settings"), server.defaults)
        if body.get("example"):
            example = server.examples.get(str(body["example"]))
            if example is None:
                raise ApiError(HTTPStatus.NOT_FOUND, f"No example {body['example']!r}.")
            title, text, source = example.title, example.text(), f"example:{example.id}"
        else:
            text = str(body.get("text") or "")
            title = str(body.get("title") or "").strip() or "pasted text"
            source = "pasted text"
        session = server.store.create(title, text, source, settings)
        return json_answer(run_view(session, server.runner), HTTPStatus.CREATED)

    def run(request: Request) -> Response:
        return json_answer(run_view(_session(server, request.path_params["run"]), server.runner))

    def job(request: Request) -> Response:
        return json_answer({"job": server.runner.job_view(_session(server, request.path_params["run"]))})

    def step(body: dict[str, Any], run: str, step: str) -> Response:
        session = _session(server, run)
        if "settings" in body:
            session.update(settings=clean_settings(body.get("settings"), session.state.get("settings")))
        started = server.runner.start(session, step, str(body.get("summary") or "").strip())
        return json_answer({"job": started.view()}, HTTPStatus.ACCEPTED)

    def correction(body: dict[str, Any], run: str) -> Response:
        session = _session(server, run)
        iteration = _round_number(body.get("iteration"))
        reason = str(body.get("reason") or "")
        if len(reason) > MAX_REASON_CHARS:  # before the run is touched: the round may not even exist
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                f"The reason is too long; keep it under {MAX_REASON_CHARS:,} characters.",
            )
        with server.runner.idle():
            correct_verdict(
                session, iteration, str(body.get("fact_id") or ""), str(body.get("verdict") or ""), reason
            )
        return json_answer(run_view(session, server.runner))

    def report(request: Request) -> Response:
        return _html(run_file(_session(server, request.path_params["run"]), "report.html"), REPORT_PAGE_CSP)

    def kept_report(request: Request) -> Response:
        session = _session(server, request.path_params["run"])
        kept = request.path_params["kept"]
        folder = runs_folder(session.rd.root) / kept
        if not (RUN_ID.match(kept) and RunDir(folder).result.is_file()):
            raise ApiError(HTTPStatus.NOT_FOUND, f"No run {kept!r} of this story.")
        try:
            found = load_summary(RunRef(folder))
        except ValueError as exc:  # there, but not a record of a run's shape: say which field
            raise ApiError(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc)) from None
        return _html(render_report(found.record, session.ckg()), REPORT_PAGE_CSP)

    def compare_page(request: Request) -> Response:
        from storyjudge.apps.compare import render_html

        return _html(render_html(compared(server, request)), REPORT_PAGE_CSP)

    def compare_api(request: Request) -> Response:
        return json_answer(compared(server, request))

    def download(request: Request) -> Response:
        """A run's summary (the best one, else the initial one), result.json or report.html, as a file."""
        session = _session(server, request.path_params["run"])
        name = request.path_params["file"]
        if name not in DOWNLOADS:
            raise ApiError(HTTPStatus.NOT_FOUND, f"Nothing at {request.url.path}.")
        body = run_file(session, name)
        headers = {"Content-Disposition": f'attachment; filename="{session.name}-{name}"'}  # names: [a-z0-9-]
        return Response(body, media_type=f"{DOWNLOADS[name][0]}; charset=utf-8", headers=headers)

    def answer(status: int, words: Callable[[str], str] = str) -> Callable[..., Any]:
        """An exception handler: ``{"error": message}`` with ``status`` (an ApiError's own, when it has one)."""

        async def handler(request: Request, exc: Exception) -> Response:
            return json_answer({"error": words(str(exc))}, getattr(exc, "status", status))

        return handler

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", HTTPStatus.NOT_FOUND)
        message = f"Nothing at {request.url.path}." if status == HTTPStatus.NOT_FOUND else str(exc)
        return json_answer({"error": message}, status)

    routes = [
        Route("/", page),
        Route("/index.html", page),
        Route("/api/examples", examples),
        Route("/api/runs", runs),
        Route("/api/runs", posted(create_run), methods=["POST"]),
        Route(f"/api/runs/{RUN}", run),
        Route(f"/api/runs/{RUN}/job", job),
        Route(f"/api/runs/{RUN}/steps/{{step:str}}", posted(step), methods=["POST"]),
        Route(f"/api/runs/{RUN}/compare", compare_api),
        Route(f"/api/runs/{RUN}/corrections", posted(correction), methods=["POST"]),
        Route(f"/runs/{RUN}/report.html", report),
        Route(f"/runs/{RUN}/runs/{{kept:str}}/report.html", kept_report),
        Route(f"/runs/{RUN}/compare.html", compare_page),
        Route(f"/runs/{RUN}/download/{{file:str}}", download),
    ]
    handlers: dict[Any, Any] = {
        ApiError: answer(HTTPStatus.BAD_REQUEST),
        **dict.fromkeys(
            (ConfigError, RunDirMismatch, StepRefused, ValueError), answer(HTTPStatus.BAD_REQUEST, for_ui)
        ),
        Busy: answer(HTTPStatus.CONFLICT),
        TooLarge: answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
        HTTPException: http_error,
    }
    return Starlette(
        routes=routes,
        middleware=[Middleware(RequestGuard, allowed_hosts=server.allowed_hosts, max_body=MAX_BODY_BYTES)],
        exception_handlers=handlers,
    )


make_server = UIServer  # the name the command line and the tests start a server by
