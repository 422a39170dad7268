"""Re-export of ``storyjudge.core.summary_stats`` (the statistics moved into the core package; nodes use them)."""

from storyjudge.core.summary_stats import summary_stats, trigrams, words

__all__ = ["summary_stats", "trigrams", "words"]
