"""Requests per minute per client, held across every instance of the function.

A client is its network, not its exact address: an IPv6 host usually has a
whole /64 to itself (``ANCHORED_RATE_LIMIT_IPV6_PREFIX``, 64 by default; 56 or
48 for providers that hand out more), so limiting single IPv6 addresses limits
nothing. IPv4 clients (and IPv4-mapped IPv6 addresses) count by address.

Two layers:

- :class:`RateLimiter`, a token bucket in this process's memory. Alone it is
  the limit of ``anchored serve``; in front of the shared counter it is the
  cheap pre-check that keeps a flooding client from costing a store call per
  request.
- :class:`SharedRateLimiter`, a fixed one-minute window per client counted in
  the shared store (:mod:`anchored_query.guard.shared_state`): one conditional
  increment per request, refused once the window holds the limit, whichever
  instance asks. A client refused in a window is remembered locally until the
  window ends, so a refused client costs at most one store call per instance
  and window. If the store fails, the local bucket alone decides (logged):
  a rate limit fails open, the spend cap does not.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from anchored_query.guard.shared_state import Counters, StateUnavailable

log = logging.getLogger("anchored.query")

WINDOW_S = 60
# Kept in the store a little past the window's end (TTL deletes items lazily anyway).
WINDOW_TTL_S = 120


def client_key(host: str, *, ipv6_prefix: int = 64) -> str:
    """What one client is for the limits: an IPv4 address or an IPv6 network.

    >>> client_key("2001:db8:1:2:aaaa::1")
    '2001:db8:1:2::/64'
    >>> client_key("::ffff:192.0.2.7")
    '192.0.2.7'
    """
    try:
        address = ipaddress.ip_address(host.strip().split("%", 1)[0])
    except ValueError:
        return host  # not an address ("testclient", a unix socket): as given
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        network = ipaddress.IPv6Network((address, ipv6_prefix), strict=False)
        return f"{network.network_address}/{ipv6_prefix}"
    return str(address)


class RateLimiter:
    """Per-client token bucket (requests per minute) in memory; memory bounded."""

    def __init__(self, per_minute: int, max_clients: int = 10_000) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(max(per_minute, 1))
        self.max_clients = max_clients
        self.buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self.lock = threading.Lock()

    def check(self, client: str) -> float:
        """0 when allowed, else seconds to wait."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self.lock:
            tokens, last = self.buckets.pop(client, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
            if not wait:
                tokens -= 1
            self.buckets[client] = (tokens, now)
            while len(self.buckets) > self.max_clients:
                self.buckets.popitem(last=False)
        return wait


class SharedRateLimiter:
    """At most ``per_minute`` requests per client per clock minute, across instances."""

    def __init__(
        self,
        per_minute: int,
        counters: Counters,
        *,
        local: RateLimiter | None = None,
        clock: Callable[[], float] = time.time,
        max_clients: int = 10_000,
    ) -> None:
        self.per_minute = per_minute
        self.counters = counters
        self.local = local if local is not None else RateLimiter(per_minute, max_clients)
        self.clock = clock
        self.max_clients = max_clients
        self._refused: OrderedDict[str, float] = OrderedDict()  # client -> window end
        self._lock = threading.Lock()
        self._failing_since = 0.0
        self.store_calls = 0

    def check(self, client: str) -> float:
        """0 when allowed, else seconds to wait."""
        if self.per_minute <= 0:
            return 0.0
        now = self.clock()
        with self._lock:
            until = self._refused.get(client, 0.0)
            if until > now:
                return until - now
            self._refused.pop(client, None)
        wait = self.local.check(client)
        if wait:
            return wait
        window = math.floor(now / WINDOW_S)
        end = (window + 1) * WINDOW_S
        try:
            self.store_calls += 1
            counted = self.counters.add(
                f"rate#{client}#{window}",
                {"n": 1},
                limits={"n": self.per_minute},
                expires_at=end + WINDOW_TTL_S,
            )
        except StateUnavailable as exc:
            self._store_failed(exc)
            return 0.0
        if self._failing_since:
            log.warning("rate limits: the shared store answers again")
            self._failing_since = 0.0
        if counted is not None:
            return 0.0
        with self._lock:
            self._refused[client] = end
            while len(self._refused) > self.max_clients:
                self._refused.popitem(last=False)
        return max(end - now, 0.001)

    def _store_failed(self, exc: StateUnavailable) -> None:
        # Once per outage, not once per request.
        if not self._failing_since:
            self._failing_since = self.clock()
            log.warning(
                "rate limits: the shared store failed (%s); limiting per instance until it answers",
                exc,
            )
