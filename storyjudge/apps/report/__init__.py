"""The self-contained run report: ``report.html`` in every run directory, readable offline in any browser.

The page loads nothing: styles and scripts are inlined, the graph is laid out here (seeded, so a report is
reproducible), a Content-Security-Policy forbids every fetch, and Jinja's autoescaping keeps story text text.
The web UI draws its graph and rounds with the same functions, so the two never drift apart.
"""

from storyjudge.apps.report.page import write_report

__all__ = ["write_report"]
