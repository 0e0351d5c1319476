"""The trace explorer and the dashboard: the team's pages beside ``/review``.

- `traces`: ``/traces`` (the filtered, paged list) and ``/traces/{trace_id}`` (one trace in full,
  with the button that puts it into a review queue), over `trace_list` and `trace_page`;
- `dashboard`: ``/dashboard``, rates per release over time from `series`, drawn by `svgplot`;
- `filters`: the form fields both pages share (time window, manifest).

Same login, tenant and Content-Security-Policy as ``/review``: the routes take the session from
`ragtrace_review.deps`, and `ragtrace_review.web.mount` adds them to the app.
"""
