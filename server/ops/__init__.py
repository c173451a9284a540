"""Operator tools: load generation and benchmarks run against a real server."""
