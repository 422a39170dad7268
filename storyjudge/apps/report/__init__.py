"""The self-contained run report: ``report.html`` in every run directory, readable offline in any browser.

The page loads nothing: styles and scripts are inlined, the graph is laid out here (seeded, so a report is
reproducible), a Content-Security-Policy forbids every fetch, and Jinja's autoescaping keeps story text text.
The web UI draws its graph and rounds with the same functions, so the two never drift apart.
"""

from storyjudge.apps.report.assets import CSP, asset_text, environment, fragment, inline_asset, write_page
from storyjudge.apps.report.ckg import ckg_graph, graph_view
from storyjudge.apps.report.page import headline, render_report, write_report
from storyjudge.apps.report.rounds import OPEN_WORDS, round_views
from storyjudge.apps.report.verdicts import summary_pieces

__all__ = [
    "CSP",
    "OPEN_WORDS",
    "asset_text",
    "ckg_graph",
    "environment",
    "fragment",
    "graph_view",
    "headline",
    "inline_asset",
    "render_report",
    "round_views",
    "summary_pieces",
    "write_page",
    "write_report",
]
