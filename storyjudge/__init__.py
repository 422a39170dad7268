"""storyjudge: support code (models, embeddings, storage, text, CLI) for the graphs in ``graphs/``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["__version__", "load_run"]

if TYPE_CHECKING:
    from storyjudge.core.runrecord import load_run


def __getattr__(name: str) -> Any:
    """``storyjudge.load_run``, result.json's one reader, imported on first use: ``import storyjudge`` stays light."""
    if name == "load_run":
        from storyjudge.core.runrecord import load_run

        return load_run
    raise AttributeError(f"module 'storyjudge' has no attribute {name!r}")
