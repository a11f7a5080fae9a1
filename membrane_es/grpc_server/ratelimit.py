"""Per-client token buckets (spec §8.5).

Each client identity (the peer address, so in effect each connection) has a bucket holding
up to ``rate`` tokens, refilled at ``rate`` tokens a second and starting full; a call takes
one token or is refused. Buckets idle for five minutes are dropped (swept at most every
150 s), and past 4096 buckets the least recently seen goes first, so a flood of new
connections cannot grow memory without bound.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

IDLE_SECONDS = 300.0
SWEEP_SECONDS = 150.0
MAX_BUCKETS = 4096


class _Bucket:
    __slots__ = ("tokens", "seen")

    def __init__(self, tokens: float, seen: float) -> None:
        self.tokens = tokens
        self.seen = seen


class TokenBuckets:
    """``allow(identity)`` is True while that identity has a token to spend."""

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_buckets: int = MAX_BUCKETS,
    ) -> None:
        if rate < 0:
            raise ValueError("rate_limit_per_second must be >= 0")
        self._rate = float(rate)
        self._clock = clock
        self._max = max_buckets
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()
        self._last_sweep = clock()

    @property
    def enabled(self) -> bool:
        return self._rate > 0

    def __len__(self) -> int:
        return len(self._buckets)

    def allow(self, identity: str) -> bool:
        if not self.enabled:
            return True
        now = self._clock()
        with self._lock:
            self._sweep(now)
            bucket = self._buckets.get(identity)
            if bucket is None:
                if len(self._buckets) >= self._max:
                    self._buckets.popitem(last=False)  # the least recently seen
                bucket = self._buckets[identity] = _Bucket(self._rate, now)
            else:
                bucket.tokens = min(self._rate, bucket.tokens + (now - bucket.seen) * self._rate)
                bucket.seen = now
                self._buckets.move_to_end(identity)
            if bucket.tokens < 1.0:
                return False
            bucket.tokens -= 1.0
            return True

    def _sweep(self, now: float) -> None:
        if now - self._last_sweep < SWEEP_SECONDS:
            return
        self._last_sweep = now
        # the order is least recently seen first: stop at the first bucket still in use
        while self._buckets:
            identity, bucket = next(iter(self._buckets.items()))
            if now - bucket.seen <= IDLE_SECONDS:
                break
            del self._buckets[identity]
