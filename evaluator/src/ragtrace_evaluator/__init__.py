"""ragtrace evaluator: sampling, labelling, metrics, statistics and reports (reads and writes the store only)."""
