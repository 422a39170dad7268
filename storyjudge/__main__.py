"""``python -m storyjudge``."""

from storyjudge.apps.cli import entry

entry()
