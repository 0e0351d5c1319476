"""The routes of ``/review`` and ``/api/reviewers``, one module per area (each a module-level ``router``):

- `login`: the login page, logging in and out;
- `queues`: the queue pages, a queue's next item, an item and its decision;
- `api`: the JSON API for scripts (progress, agreement, enqueue, gold export and storage);
- `reviewers`: reviewer administration for a tenant's operators.

They take everything through `ragtrace_review.deps`; `ragtrace_review.web.mount` adds them to an app.
"""
