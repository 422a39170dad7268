"""``python -m storyjudge``."""

from storyjudge.apps.cli import app

app()
