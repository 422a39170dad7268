"""The web UI of the seed-001 demo: pick a narrative, build and see its CKG, summarize, score, refine.

``storyjudge ui`` serves it; :func:`make_server` gives a bound server for tests and scripts.
"""

from __future__ import annotations

from storyjudge.apps.ui.server import Settings, UIServer, make_server

__all__ = ["Settings", "UIServer", "make_server"]
