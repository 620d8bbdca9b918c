"""Synthetic corpora and reference releases for the example, tests and benchmarks."""
