"""storyjudge: support code (models, embeddings, storage, text, CLI) for the graphs in ``graphs/``."""

__version__ = "0.1.0"

from storyjudge.core.runrecord import load_run  # noqa: E402  (the one reader of result.json)

__all__ = ["__version__", "load_run"]
