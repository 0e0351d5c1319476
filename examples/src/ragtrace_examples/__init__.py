"""Example RAG services instrumented with ragtrace, a corpus generator with ground truth, and the demo."""
