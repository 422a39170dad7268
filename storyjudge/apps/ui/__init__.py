"""The web UI of the seed-001 demo: pick a narrative, build and see its CKG, summarize, score, refine.

``storyjudge ui`` serves it; ``server.make_server`` gives a bound server for tests and scripts.
"""
