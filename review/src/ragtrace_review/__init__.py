"""Human review: queues of flagged traces, the review web UI and the labeller's calibration record.

`enqueue` fills a queue (the audit's ``--queue`` calls it); `web.mount` adds the ``/review`` pages
to the collector app; `agreement` holds the statistics. The web module is imported on demand, so
the CLI and the audit do not load FastAPI.
"""

from ragtrace_review.errors import ReviewError
from ragtrace_review.queues import EnqueueResult, check_enqueue_options, enqueue

__all__ = ["EnqueueResult", "ReviewError", "check_enqueue_options", "enqueue"]
