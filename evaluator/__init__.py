"""ragtrace evaluator: sampling, labelling, metrics, statistics and reports."""
