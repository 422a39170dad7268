"""Re-export of ``storyjudge.summary_stats`` (the statistics moved into the core package; nodes use them)."""

from storyjudge.summary_stats import summary_stats, trigrams, words

__all__ = ["summary_stats", "trigrams", "words"]
