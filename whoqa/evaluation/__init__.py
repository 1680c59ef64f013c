"""Evaluation: the Who table, unseen books, the routed full task, benchmarks and reproductions kept as data."""
