"""``python -m storyjudge``."""

from storyjudge.cli import app

app()
