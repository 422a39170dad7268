"""One cheap look at the model server (``GET /models``) before a command starts, so a dead server is named at once.

A model not listed is asked for with an empty conversation (404: unknown); anything else unexpected goes on.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx2

from storyjudge.core.context import ConfigError, Context
from storyjudge.core.models import OPENAI_URL, SERVER_KEY_ENV, api_key, is_local, is_openai

TIMEOUT_SECONDS = 2.5


def _field(response: httpx2.Response, name: str) -> object:
    try:
        return response.json().get(name)
    except (ValueError, AttributeError):
        return None


def _said(response: httpx2.Response) -> str:
    error = _field(response, "error")
    message = error.get("message") if isinstance(error, dict) else error
    return f"{response.status_code} {str(message or response.reason_phrase)[:200]}"


def check_server(ctx: Context, specs: Iterable[str]) -> None:
    """Raise ``ConfigError`` (one line: the server, its answer, the setting to change) when it cannot work."""
    names = sorted(
        {spec.partition(":")[2] for spec in specs if not is_local(spec) and spec.startswith("openai:")}
    )
    if not names:
        return
    base = (ctx.base_url or OPENAI_URL).rstrip("/")
    key_variable = "OPENAI_API_KEY" if is_openai(ctx.base_url) else SERVER_KEY_ENV
    headers = {"Authorization": f"Bearer {api_key(ctx.base_url)}"}
    try:
        with httpx2.Client(timeout=TIMEOUT_SECONDS, headers=headers, follow_redirects=True) as client:
            listed = client.get(f"{base}/models")
            refused = listed if listed.status_code == 401 else None
            if listed.status_code == 403:  # a key may be denied the list alone (OpenAI's restricted keys)
                probe = client.post(f"{base}/chat/completions", json={"model": names[0], "messages": []})
                refused = probe if probe.status_code in (401, 403) else None
            if refused is not None:
                raise ConfigError(
                    f"The model server at {base} refused the key ({_said(refused)}); set {key_variable} to a "
                    "key it accepts."
                )
            data = _field(listed, "data") if listed.status_code == 200 else None
            items = data if isinstance(data, list) else []
            served = {str(item["id"]) for item in items if isinstance(item, dict) and "id" in item}
            for name in names:
                if served and name not in served:
                    probe = client.post(f"{base}/chat/completions", json={"model": name, "messages": []})
                    if probe.status_code == 404:
                        raise ConfigError(
                            f"The model server at {base} has no model {name!r} ({_said(probe)}); it lists "
                            f"{', '.join(sorted(served)[:20])}. Set --model (or the role's model) to one of them."
                        )
    except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.UnsupportedProtocol) as exc:
        reason = str(exc) or type(exc).__name__
        raise ConfigError(
            f"Cannot reach the model server at {base}: {reason}. Check --base-url (STORYJUDGE_BASE_URL) and that "
            "the server is running."
        ) from None
    except httpx2.HTTPError:  # slow, busy or odd: the run's own calls retry what is transient
        return
