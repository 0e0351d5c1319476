"""How often one client may fail to log in.

Reviewer tokens are long and random, so guessing one is hopeless; the limit is there so a client
that keeps trying is told to stop (429 with ``Retry-After``) instead of being answered at full speed,
and so a leaked token prefix or a short token from an older version cannot be brute-forced. A client
is its TCP peer address: behind a reverse proxy every user shares the proxy's address, so the
limit then counts failures of all of them together.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

#: failed logins a client may make within `WINDOW_SECONDS`
MAX_FAILURES = 10
WINDOW_SECONDS = 300.0
#: clients remembered at once (the least recently failing are forgotten first), so a flood of
#: addresses cannot grow memory without bound
MAX_CLIENTS = 10_000


class LoginLimiter:
    """Failed logins per client in a sliding window. ``clock`` returns seconds (monotonic)."""

    def __init__(self, *, max_failures: int = MAX_FAILURES, window: float = WINDOW_SECONDS,
                 max_clients: int = MAX_CLIENTS, clock: Callable[[], float] = time.monotonic) -> None:
        if max_failures < 1 or window <= 0 or max_clients < 1:
            raise ValueError("max_failures and max_clients must be >= 1 and window > 0 seconds")
        self.max_failures = max_failures
        self.window = window
        self.max_clients = max_clients
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()  # login runs in the event loop, but keep it safe for threads

    def retry_after(self, client: str) -> int:
        """Seconds ``client`` must wait before its next attempt counts (0: it may try now)."""
        with self._lock:
            times = self._recent(client)
            if times is None or len(times) < self.max_failures:
                return 0
            return max(1, math.ceil(times[0] + self.window - self.clock()))

    def failed(self, client: str) -> None:
        """Record a failed attempt of ``client``."""
        with self._lock:
            times = self._recent(client)
            if times is None:
                times = self._failures[client] = deque(maxlen=self.max_failures)
            times.append(self.clock())
            self._failures.move_to_end(client)
            while len(self._failures) > self.max_clients:
                self._failures.popitem(last=False)

    def _recent(self, client: str) -> deque[float] | None:
        times = self._failures.get(client)
        if times is None:
            return None
        horizon = self.clock() - self.window
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[client]
            return None
        return times
