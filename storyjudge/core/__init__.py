"""Layer 1, the core: support code and the metrics the method computes. Imports nothing above it."""
