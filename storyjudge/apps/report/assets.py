"""Assets and templates: the shipped CSS, JS and Jinja templates, and the filters every view formats with."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from storyjudge.core.coverage import UNRELIABLE, check_verdict, describe
from storyjudge.core.rundir import write_atomic
from storyjudge.core.usage import cost_text, price_known

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def asset_text(name: str) -> str:
    """A file shipped in ``storyjudge/apps/assets`` (works from a wheel as well as from a checkout)."""
    return resources.files("storyjudge.apps").joinpath("assets", name).read_text(encoding="utf-8")


def inline_asset(name: str) -> Markup:
    """An asset (our own CSS or JS) to paste into a ``<style>``/``<script>`` element unescaped."""
    text = asset_text(name)
    lowered = text.lower()
    if "</script" in lowered or "</style" in lowered:
        raise ValueError(f"asset {name} contains a closing tag that would end its inline element early")
    return Markup(text)


@cache
def environment() -> jinja2.Environment:
    """Jinja environment over the shipped templates; autoescape on for every template."""
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(asset_text),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["score"] = lambda value: "n/a" if value is None else f"{value:.3f}"  # None: nothing judged
    env.filters["delta"] = lambda value: "" if value is None else f"{value:+.3f}"  # a change, with its sign
    env.filters["thousands"] = lambda n: f"{int(n or 0):,}"
    env.filters["cost_of"] = lambda u, spec: (
        f"${u.get('cost_usd') or 0:.4f}" if price_known(spec) else "price unknown"
    )
    env.filters["cost"] = cost_text
    # the words for a card come from core.coverage, never from a template
    env.filters["verdict"] = lambda score: describe(score, None, False)  # a score that does not count
    env.filters["check_verdict"] = check_verdict
    env.globals["unreliable"] = UNRELIABLE
    return env


def fragment(macro: str, *args: Any) -> str:
    """An HTML fragment drawn by a macro of ``parts.html.j2`` (the report's and the web UI's shared parts)."""
    return str(getattr(environment().get_template("parts.html.j2").module, macro)(*args))


def write_page(path: Path, html: str) -> Path:
    """Write a page atomically (``core.rundir.write_atomic``): a reader never sees half a page."""
    write_atomic(path, html.encode("utf-8"))
    return path
