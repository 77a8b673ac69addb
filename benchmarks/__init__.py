"""Performance benchmarks of capmatrix: synthetic matrices, baselines, runners and the report writer.

Run everything with ``make bench`` (or ``python -m benchmarks``); the report lands in docs/benchmarks.md.
"""
