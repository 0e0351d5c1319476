"""Pure metric functions: trec_eval-compatible retrieval measures and claim-level metrics."""
