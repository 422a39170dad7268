"""The self-contained run report: ``report.html`` in every run directory, readable offline in any browser.

Everything a reader needs to trust (or doubt) a score is on one page: the character knowledge graph drawn
as an interactive SVG, each iteration's summary with the sentences that carry unsupported facts highlighted
(feedback on hover), the per-fact table with the judge's rationale and the evidence it saw, the score curve
across iterations, and usage and cost. The page loads nothing: styles and scripts ship in
``storyjudge/apps/assets`` and are inlined, the graph's layout is computed here (networkx, seeded, so a report is
reproducible), and a Content-Security-Policy forbids every network fetch. All narrative text goes through
Jinja's autoescaping, so a story containing ``<script>`` stays text.

One module per view: ``assets`` (templates and filters), ``ckg`` (the graph), ``verdicts`` (highlighted
sentences and fact rows with their evidence), ``rounds`` (one round's panel), ``curve`` (the score chart) and
``page`` (the headline and the whole page). The web UI renders its graph and iteration panels with the same
functions (:func:`ckg_html`, :func:`iteration_html`), so the two never drift apart.
"""

from storyjudge.apps.report.assets import CSP, asset_text, environment, inline_asset
from storyjudge.apps.report.ckg import ckg_graph, ckg_html, graph_view
from storyjudge.apps.report.page import headline, headline_html, render_report, write_report
from storyjudge.apps.report.rounds import OPEN_WORDS, iteration_html, open_rounds, round_html, round_views
from storyjudge.apps.report.verdicts import summary_pieces

__all__ = [
    "CSP",
    "OPEN_WORDS",
    "asset_text",
    "ckg_graph",
    "ckg_html",
    "environment",
    "graph_view",
    "headline",
    "headline_html",
    "inline_asset",
    "iteration_html",
    "open_rounds",
    "render_report",
    "round_html",
    "round_views",
    "summary_pieces",
    "write_report",
]
