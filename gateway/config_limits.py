"""Config of what one client may cost the gateway, `limits`, and how it stops, `shutdown`.

Kept apart from config.py, as the caches' keys are (config_cache.py, config_redis.py), so that module
stays one screenful. The defaults follow nginx's where it has one (client_max_body_size,
large_client_header_buffers, client_header_timeout, client_body_timeout, keepalive_timeout), tighter
where a slow client costs an asyncio gateway more than it costs nginx. The checks raise schema.Bad, which
build() turns into a ConfigError naming the full key (`limits.max_in_flight: must be > 0, got 0`).

Where each is enforced: the request line, header count and one header's size by aiohttp's parser (400);
the header total, the timeouts and the connection count by gateway/protocol.py and gateway/strict.py;
the body size and body timeouts while reading it (parse.py, act.py); in-flight requests in pipeline.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.schema import check

MiB = 1 << 20


@dataclass(frozen=True)
class LimitsConfig:
    max_body_bytes: int | None = 64 * MiB  # larger request bodies answer 413; null = no limit
    max_line_bytes: int = 8190  # the request line (method, target, version); longer answers 400
    max_field_bytes: int = 8190  # one header
    max_headers: int = 128
    max_header_bytes: int = 32768  # all header lines together; more answers 431 (nginx: 4 buffers of 8k)
    header_timeout_s: float = 20.0  # the whole request head must arrive within this, trickled or not: 408
    body_idle_timeout_s: float = 30.0  # longest silence while the body arrives: 408
    body_timeout_s: float | None = 300.0  # the whole body; null = no limit (very slow uploads of large files)
    idle_timeout_s: float = 75.0  # a kept-alive connection with no request in it is closed after this
    max_connections: int = 2048  # open client connections; one more is answered 503 and closed
    max_in_flight: int = 512  # requests being handled; one more answers 503 with Retry-After at once
    retry_after_s: float = 1.0  # the Retry-After of those 503s

    def __post_init__(self) -> None:
        m = self.max_body_bytes
        check(m is None or m >= 0, "max_body_bytes", "must be >= 0", m)
        for name in ("max_line_bytes", "max_field_bytes", "max_headers", "max_header_bytes", "max_connections",
                     "max_in_flight"):  # fmt: skip
            check(getattr(self, name) > 0, name, "must be > 0", getattr(self, name))
        for name in ("header_timeout_s", "body_idle_timeout_s", "idle_timeout_s", "retry_after_s"):
            check(getattr(self, name) > 0, name, "must be > 0", getattr(self, name))
        t = self.body_timeout_s
        check(t is None or t > 0, "body_timeout_s", "must be > 0", t)


@dataclass(frozen=True)
class ShutdownConfig:
    # SIGTERM: stop accepting, let requests in flight finish for up to this long, then exit 0. Below
    # Kubernetes' default terminationGracePeriodSeconds (30), so the pod exits before it is killed.
    grace_s: float = 25.0

    def __post_init__(self) -> None:
        check(self.grace_s >= 0, "grace_s", "must be >= 0", self.grace_s)
