"""Config of the edge response cache, `cache.responses`: frozen dataclasses checked at start.

Kept apart from config.py so that module stays one screenful of the gateway's other keys; config.py
nests ResponseCacheConfig under `cache` beside the decision cache's keys. The checks raise schema.Bad,
which build() turns into a ConfigError naming the full key (`cache.responses.max_bytes: must be >= 0`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.schema import check

MiB = 1 << 20
QUERY_MODES = ("sorted", "as_sent", "ignored")
# RFC 9111 §4.2.2: the statuses a cache may store without explicit freshness from the origin
HEURISTIC_STATUSES = (200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501)
TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP field name (RFC 9110 §5.1)


@dataclass(frozen=True)
class CacheKeyConfig:
    host: bool = True  # the Host header is part of the key (one gateway in front of several sites)
    query: str = "sorted"  # sorted: ?b=2&a=1 and ?a=1&b=2 share an entry | as_sent | ignored
    headers: tuple[str, ...] = ()  # request headers whose values are part of the key, e.g. [accept-language]

    def __post_init__(self) -> None:
        check(self.query in QUERY_MODES, "query", f"must be one of {', '.join(QUERY_MODES)}", self.query)
        for i, name in enumerate(self.headers):
            check(bool(TOKEN.match(name)), f"headers[{i}]", "must be an HTTP header name", name)
        object.__setattr__(self, "headers", tuple(h.lower() for h in self.headers))


@dataclass(frozen=True)
class ResponseCacheConfig:
    max_bytes: int = 256 * MiB  # memory for stored responses (bodies and headers), least recently used out first; 0: off
    max_object_bytes: int = 8 * MiB  # a larger response streams through without being stored
    default_ttl_s: float = 300.0  # freshness when the origin gives none (no max-age, s-maxage or Expires)
    stale_if_error_s: float = 0.0  # serve a stale copy this long past expiry when the origin fails
    statuses: tuple[int, ...] = HEURISTIC_STATUSES  # the statuses that may be stored
    ignore_cookies_under: tuple[str, ...] = ()  # path prefixes where a Cookie does not make a request private
    key: CacheKeyConfig = CacheKeyConfig()

    def __post_init__(self) -> None:
        check(self.max_bytes >= 0, "max_bytes", "must be >= 0", self.max_bytes)
        check(self.max_object_bytes > 0, "max_object_bytes", "must be > 0", self.max_object_bytes)
        if self.max_bytes:
            check(
                self.max_object_bytes <= self.max_bytes, "max_object_bytes", "must be <= max_bytes", self.max_object_bytes
            )
        check(self.default_ttl_s >= 0, "default_ttl_s", "must be >= 0", self.default_ttl_s)
        check(self.stale_if_error_s >= 0, "stale_if_error_s", "must be >= 0", self.stale_if_error_s)
        for i, status in enumerate(self.statuses):
            check(200 <= status <= 599 and status != 206, f"statuses[{i}]", "must be a 2xx-5xx status but 206", status)
        for i, prefix in enumerate(self.ignore_cookies_under):
            check(prefix.startswith("/"), f"ignore_cookies_under[{i}]", "must start with /", prefix)

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0
