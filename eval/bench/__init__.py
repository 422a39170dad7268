"""Benchmarks that measure storyjudge's cost and speed against local test servers; rerunnable offline."""
