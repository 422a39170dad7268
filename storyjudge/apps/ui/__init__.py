"""The web UI (``storyjudge ui``): pick a narrative, build and see its CKG, summarize, score, refine."""
