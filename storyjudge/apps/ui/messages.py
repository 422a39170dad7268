"""Error messages in the UI's words: the core's messages name CLI options, the page has fields.

An option the page has no field for becomes its setting's ``STORYJUDGE_<FIELD>`` environment variable.
"""

from __future__ import annotations

import re

PHRASES: tuple[tuple[str, str], ...] = (
    ("needs OPENAI_API_KEY: export it,", "needs OPENAI_API_KEY: export it before starting the UI,"),
    (
        "point --base-url at an OpenAI-compatible server",
        "enter an OpenAI-compatible server's address as Base URL",
    ),
    ("use --model local:smollm2", "enter local:smollm2 as Model spec (the embedded model)"),
    ("Check --base-url", "Check the Base URL field"),
    ("via --base-url", "via the Base URL field"),
    ("choose a different --run-dir or remove it", "remove that run directory, or open the narrative again"),
)
FIELDS = {
    "--model": "the Model spec field",
    "--base-url": "the Base URL field",
    "--ckg-samples": "the CKG extraction samples field",
}
OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def _setting(match: re.Match[str]) -> str:
    option = match.group(0)
    if option in FIELDS:
        return FIELDS[option]
    field = match.group(1).replace("-", "_")
    return f"the {field} setting (STORYJUDGE_{field.upper()} when starting the UI)"


def for_ui(message: str) -> str:
    """The message with CLI options replaced by the page's fields or the settings' environment variables."""
    for cli, ui in PHRASES:
        message = message.replace(cli, ui)
    if "pip install" in message:  # an install command's options are not settings
        return message
    return OPTION.sub(_setting, message)
