"""storyjudge: support code (models, embeddings, storage, text, CLI) for the graphs in ``graphs/``."""

__version__ = "0.1.0"
