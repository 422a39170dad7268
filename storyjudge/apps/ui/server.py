"""The UI's HTTP server: the standard library's threading server, a JSON API and one page of our own.

Why the standard library: the demo needs a page, a few JSON endpoints and a background thread, which
``http.server`` does without a new dependency, a template CDN, web fonts or analytics; nothing here can make
an outbound call. It binds 127.0.0.1 by default, answers only requests addressed to the host it is bound to
(DNS-rebinding guard), and takes POST bodies only as JSON (a cross-site form cannot send that without a CORS
preflight, which it never answers).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import socket
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from storyjudge.apps.report import CSP as REPORT_CSP
from storyjudge.apps.report import ckg_html, environment, inline_asset, iteration_html
from storyjudge.apps.ui.examples import Example, list_examples
from storyjudge.apps.ui.jobs import Busy, JobRunner
from storyjudge.apps.ui.messages import for_ui
from storyjudge.apps.ui.session import RunNotFound, RunSession, RunStore, clean_settings
from storyjudge.apps.ui.steps import StepRefused, refinable
from storyjudge.core.context import ConfigError
from storyjudge.core.coverage import card_reliable, judge_failure
from storyjudge.core.models import LOCAL_NOTE, describe_models
from storyjudge.core.rundir import RunDirMismatch
from storyjudge.core.usage import totals

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 60 * 1024 * 1024
PAGE_CSP = (
    "default-src 'none'; connect-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; form-action 'none'; base-uri 'none'"
)
"""The page's policy, in its meta tag and in the header it is served with."""
HEADER_ONLY_CSP = "; frame-ancestors 'none'"
"""What only a header can say (browsers ignore ``frame-ancestors`` in a meta tag): no page is framed."""
REPORT_PAGE_CSP = REPORT_CSP + "; form-action 'none'; base-uri 'none'"
API_CSP = "default-src 'none'; form-action 'none'; base-uri 'none'"
"""Every other answer (JSON, errors): nothing may load or run, should a browser ever render one."""
_RUN = r"(?P<run>[a-z0-9][a-z0-9-]{0,80})"
ROUTES = {
    "run": re.compile(rf"^/api/runs/{_RUN}$"),
    "job": re.compile(rf"^/api/runs/{_RUN}/job$"),
    "step": re.compile(rf"^/api/runs/{_RUN}/steps/(?P<step>[a-z]+)$"),
    "report": re.compile(rf"^/runs/{_RUN}/report\.html$"),
}
DOWNLOAD = re.compile(rf"^/runs/{_RUN}/download/(?P<file>summary\.txt|result\.json|report\.html)$")
DOWNLOAD_TYPES = {
    "summary.txt": "text/plain; charset=utf-8",
    "result.json": "application/json; charset=utf-8",
    "report.html": "text/html; charset=utf-8",
}


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


@dataclass
class Settings:
    """Server-wide defaults for new runs (from the command line)."""

    model: str = ""
    base_url: str = ""
    ckg_samples: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The defaults in the settings' shape, leaving unset ones out."""
        values: dict[str, Any] = {"model": self.model, "base_url": self.base_url}
        if self.ckg_samples is not None:
            values["ckg_samples"] = self.ckg_samples
        return values


class UIServer(ThreadingHTTPServer):
    """The server and everything its handlers share."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        runs_dir: Path,
        defaults: Settings | None = None,
        squality: Path | None = None,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)
        self.store = RunStore(runs_dir)
        self.runner = JobRunner()
        self.defaults = defaults or Settings()
        self.examples: dict[str, Example] = {e.id: e for e in list_examples(squality)}
        self.page = render_page(self)

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


def render_page(server: UIServer) -> str:
    """The single page of the UI, with its styles and scripts inlined."""
    groups: dict[str, list[Example]] = {}
    for example in server.examples.values():
        groups.setdefault(example.group, []).append(example)
    settings = clean_settings(server.defaults.as_dict())
    return (
        environment()
        .get_template("ui.html.j2")
        .render(
            csp=PAGE_CSP,
            css=inline_asset("report.css") + inline_asset("ui.css"),
            js=inline_asset("report.js") + inline_asset("ui.js"),
            groups=sorted(groups.items(), key=lambda kv: kv[0] != "Bundled (public domain)"),
            settings=settings,
        )
    )


def run_view(session: RunSession, runner: JobRunner) -> dict[str, Any]:
    """Everything the page shows for a run; HTML fragments come from the report's escaping renderer."""
    from nodes.loop import best_of

    with session.lock:
        state = dict(session.state)
        ckg = session.ckg()
    iterations = sorted(state.get("iterations") or [], key=lambda it: it["iteration"])
    best = best_of(iterations)
    shown = []
    previous: float | None = None
    for n, it in enumerate(iterations):
        card = it["factscore"]
        score = card.get("score")
        shown.append(
            {
                "iteration": it["iteration"],
                "score": score,
                "coverage": card.get("coverage"),
                "reliable": card_reliable(card),
                "judge": judge_failure(card),  # what the planted facts say when they make it not count
                "delta": None if score is None or previous is None else score - previous,
                "facts": card.get("facts", 0),
                "supported": card.get("supported", 0),
                "unsupported": card.get("unsupported", 0),
                "unjudged": card.get("unjudged", 0),
                "accepted": bool(it.get("accepted", True)),
                "note": str(it.get("note", "")),
                "html": iteration_html(
                    it,
                    previous_score=previous,
                    best=best is not None and best["iteration"] == it["iteration"],
                    open_facts=n == len(iterations) - 1,
                    prefix="ui",
                ),
            }
        )
        previous = score if score is not None else previous
    job = runner.job_of(session.name)
    try:
        models = [{"role": r, "spec": s, "note": n} for r, s, n in describe_models(session.context())]
    except ConfigError:
        models = []
    summary = state.get("summary") or None
    embedded = sorted({m["role"] for m in models if m["note"] == LOCAL_NOTE})
    return {
        "name": session.name,
        "title": state.get("title", ""),
        "source": state.get("source", ""),
        "settings": state.get("settings") or {},
        "models": models,
        "embedded_roles": embedded,
        "segmentation": state.get("segmentation", ""),
        "scenes": [
            {"id": s["id"], "title": s.get("title", ""), "text": s.get("text", "")}
            for s in state.get("scenes") or []
        ],
        "ckg": {"stats": state.get("ckg_stats") or {}, "html": ckg_html(ckg)} if ckg is not None else None,
        "summary": {
            "text": summary["text"],
            "events": len(summary.get("events") or []),
            "given": summary.get("strategy") == "given",
        }
        if summary
        else None,
        "iterations": shown,
        "best_iteration": best["iteration"] if best else None,
        "refinable": refinable(state),
        "stop_reason": state.get("stop_reason") or "",
        "usage": totals(state.get("usage")),
        "report": session.rd.report.is_file(),
        "result": session.rd.result.is_file(),
        "job": job.view() if job else state.get("last_job"),
    }


def current_summary(session: RunSession) -> str:
    """The summary to take away: the best round's (``nodes.loop.fallback_of``), else the initial summary."""
    from nodes.loop import fallback_of

    with session.lock:
        state = dict(session.state)
    chosen = fallback_of(list(state.get("iterations") or []))
    if chosen is not None:
        return str(chosen.get("summary") or "").strip() + "\n"
    text = str((state.get("summary") or {}).get("text") or "").strip()
    return text + "\n" if text else ""


class Handler(BaseHTTPRequestHandler):
    """Routes requests to the store, the job runner and the page."""

    server: UIServer
    protocol_version = "HTTP/1.1"
    server_version = "storyjudge-ui"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Request lines go to the debug log, not stderr."""
        log.debug("%s - %s", self.address_string(), format % args)

    # --- plumbing ----------------------------------------------------------------------------------------
    def _send(
        self, status: HTTPStatus, body: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        headers = {"Content-Security-Policy": API_CSP, **(extra or {})}
        headers["Content-Security-Policy"] += HEADER_ONLY_CSP
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: HTTPStatus, value: Any) -> None:
        self._send(
            status, json.dumps(value, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8"
        )

    def _body(self) -> dict[str, Any]:
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            raise ApiError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "Send the request body as application/json.")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "The text is too large (over 60 MB).")
        try:
            value = json.loads(self.rfile.read(length) or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ApiError(HTTPStatus.BAD_REQUEST, "The request body is not valid JSON.") from None
        if not isinstance(value, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "The request body must be a JSON object.")
        return value

    def _host_ok(self) -> bool:
        allowed = self.server.allowed_hosts()
        return allowed is None or (self.headers.get("Host") or "") in allowed

    def _session(self, name: str) -> RunSession:
        try:
            return self.server.store.open(name)
        except RunNotFound:
            raise ApiError(HTTPStatus.NOT_FOUND, f"No run named {name!r}.") from None

    def _dispatch(self, method: str) -> None:
        if not self._host_ok():
            self._json(HTTPStatus.FORBIDDEN, {"error": "Unexpected Host header."})
            return
        path = urlsplit(self.path).path
        try:
            if method == "GET" and (download := DOWNLOAD.match(path)):
                self._download(download["run"], download["file"])
            elif method == "GET":
                self._get(path)
            else:
                self._post(path)
        except ApiError as exc:
            self._json(exc.status, {"error": str(exc)})
        except (ConfigError, RunDirMismatch, StepRefused, ValueError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": for_ui(str(exc))})
        except Busy as exc:
            self._json(HTTPStatus.CONFLICT, {"error": str(exc)})
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        """Serve the page, the API's reads and the run reports."""
        self._dispatch("GET")

    def do_HEAD(self) -> None:  # noqa: N802 - the base class's name
        """Like GET, without the body."""
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        """The API's writes."""
        self._dispatch("POST")

    # --- routes ------------------------------------------------------------------------------------------
    def _download(self, run: str, name: str) -> None:
        """A run's summary (the best one, else the initial one), result.json or report.html, as a file."""
        session = self._session(run)
        if name == "summary.txt":
            body = current_summary(session).encode("utf-8")
            if not body:
                raise ApiError(
                    HTTPStatus.NOT_FOUND, "No summary yet: generate or give the initial summary first."
                )
        else:
            file = session.rd.result if name == "result.json" else session.rd.report
            if not file.is_file():
                raise ApiError(
                    HTTPStatus.NOT_FOUND,
                    "No result.json yet: it is written when the refinement loop stops."
                    if name == "result.json"
                    else "No report yet: compute the factuality score first.",
                )
            body = file.read_bytes()
        disposition = f'attachment; filename="{session.name}-{name}"'  # the run name is [a-z0-9-]
        self._send(HTTPStatus.OK, body, DOWNLOAD_TYPES[name], {"Content-Disposition": disposition})

    def _get(self, path: str) -> None:
        server = self.server
        if path in ("/", "/index.html"):
            self._send(
                HTTPStatus.OK,
                server.page.encode("utf-8"),
                "text/html; charset=utf-8",
                {"Content-Security-Policy": PAGE_CSP},
            )
            return
        if path == "/api/examples":
            self._json(
                HTTPStatus.OK,
                [{"id": e.id, "label": e.label, "group": e.group} for e in server.examples.values()],
            )
            return
        if path == "/api/runs":
            self._json(HTTPStatus.OK, server.store.list())
            return
        if match := ROUTES["run"].match(path):
            self._json(HTTPStatus.OK, run_view(self._session(match["run"]), server.runner))
            return
        if match := ROUTES["job"].match(path):
            session = self._session(match["run"])
            job = server.runner.job_of(session.name)
            self._json(HTTPStatus.OK, {"job": job.view() if job else session.state.get("last_job")})
            return
        if match := ROUTES["report"].match(path):
            report = self._session(match["run"]).rd.report
            if not report.is_file():
                raise ApiError(HTTPStatus.NOT_FOUND, "No report yet: compute the factuality score first.")
            self._send(
                HTTPStatus.OK,
                report.read_bytes(),
                "text/html; charset=utf-8",
                {"Content-Security-Policy": REPORT_PAGE_CSP},
            )
            return
        raise ApiError(HTTPStatus.NOT_FOUND, f"Nothing at {path}.")

    def _post(self, path: str) -> None:
        server = self.server
        if path == "/api/runs":
            body = self._body()
            settings = clean_settings(body.get("settings"), server.defaults.as_dict())
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
            self._json(HTTPStatus.CREATED, run_view(session, server.runner))
            return
        if match := ROUTES["step"].match(path):
            session = self._session(match["run"])
            body = self._body()
            if "settings" in body:
                settings = clean_settings(body.get("settings"), session.state.get("settings"))
                session.update(settings=settings)
            job = server.runner.start(session, match["step"], str(body.get("summary") or "").strip())
            self._json(HTTPStatus.ACCEPTED, {"job": job.view()})
            return
        raise ApiError(HTTPStatus.NOT_FOUND, f"Nothing at {path}.")


def make_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    runs_dir: Path = Path("runs"),
    defaults: Settings | None = None,
    squality: Path | None = None,
) -> UIServer:
    """A bound, not yet serving, UI server (port 0 picks a free port)."""
    return UIServer((host, port), runs_dir=runs_dir, defaults=defaults, squality=squality)
