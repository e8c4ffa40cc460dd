"""RFC 9111 for a shared cache: may a response be stored, how long is it fresh, may it be served stale.

Input: plain values, the response's status and end-to-end headers (name, value pairs) and the request's
method. Output: a Policy (or the reason it may not be stored), with the freshness lifetime worked out at
the moment the response arrived. Pure functions, no clock of their own: the edge cache measures age with
the gateway's injected clock, and only the origin's own Date/Expires pair is compared here.

Short-circuits: nothing; no I/O.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Iterable, Mapping

from gateway.schema import digits

Items = Iterable[tuple[str, str]]
SERVER_ERRORS = frozenset({500, 502, 503, 504})  # the origin failed: a stale copy may stand in (RFC 5861)


def directives(values: Iterable[str]) -> dict[str, str | None]:
    """Cache-Control values → {directive: argument or None}; names lower-cased, quotes removed.
    A directive repeated keeps its first value, as RFC 9111 §4.2.1 asks of conflicting duplicates."""
    out: dict[str, str | None] = {}
    for value in values:
        for part in value.split(","):
            name, eq, arg = part.strip().partition("=")
            name = name.strip().lower()
            if name and name not in out:
                out[name] = arg.strip().strip('"') if eq else None
    return out


def seconds(value: str | None) -> float | None:
    """A delta-seconds argument; an invalid one counts as absent (max-age=abc gives no freshness)."""
    if value is None or not digits(value.strip()):
        return None
    return float(value.strip())


def when(value: str | None) -> float | None:
    """An HTTP date as a Unix time, or None when missing or malformed."""
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def first(items: Items, name: str) -> str | None:
    for k, v in items:
        if k.lower() == name:
            return v
    return None


def every(items: Items, name: str) -> list[str]:
    return [v for k, v in items if k.lower() == name]


def field_names(values: Iterable[str]) -> tuple[str, ...]:
    """A list-valued header (Vary, Connection) → its lower-cased names, in order, without repeats."""
    seen: dict[str, None] = {}
    for value in values:
        for name in value.split(","):
            if name.strip():
                seen[name.strip().lower()] = None
    return tuple(seen)


@dataclass(frozen=True, slots=True)
class Policy:
    """How a stored response may be used, fixed when it arrives (and again when a 304 refreshes it)."""

    lifetime: float  # seconds it is fresh for, from its age zero
    initial_age: float  # the origin's (or a cache upstream's) Age header
    revalidate: bool  # no-cache: never served without asking the origin first
    stale_if_error: float  # seconds past its lifetime it may stand in for a failed origin
    vary: tuple[str, ...]  # request headers that select this variant
    etag: str | None
    last_modified: str | None

    @property
    def validators(self) -> bool:
        return self.etag is not None or self.last_modified is not None


def refusal(method: str, status: int, items: list[tuple[str, str]], statuses: Iterable[int]) -> str | None:
    """Why this response may not be stored by a shared cache, or None when it may be."""
    if method != "GET":
        return "method"
    if status not in statuses:
        return "status"
    cc = directives(every(items, "cache-control"))
    if "no-store" in cc:
        return "no-store"
    if "private" in cc:
        return "private"
    if "*" in field_names(every(items, "vary")):
        return "vary-star"
    if first(items, "set-cookie") is not None:
        return "set-cookie"  # one client's cookie must never reach another
    if first(items, "content-range") is not None:
        return "partial"
    return None


def policy(items: list[tuple[str, str]], default_ttl_s: float, stale_if_error_s: float, now: float | None = None) -> Policy:
    """The Policy of a storable response's headers. `now` (Unix time, for Expires without Date) defaults
    to the wall clock: it is only ever compared with the origin's own dates."""
    cc = directives(every(items, "cache-control"))
    lifetime = seconds(cc.get("s-maxage"))  # a shared cache's own max-age wins (RFC 9111 §5.2.2.10)
    if lifetime is None:
        lifetime = seconds(cc.get("max-age"))
    if lifetime is None and (expires := first(items, "expires")) is not None:
        date = when(first(items, "date"))
        at = when(expires)
        lifetime = 0.0 if at is None else max(0.0, at - (date if date is not None else (now or time.time())))
    if lifetime is None:
        lifetime = default_ttl_s
    # must-revalidate and proxy-revalidate (and s-maxage, which implies the latter) forbid serving a stale
    # copy, unless the origin explicitly allowed it on errors with its own stale-if-error
    strict = {"must-revalidate", "proxy-revalidate", "s-maxage"} & cc.keys()
    own = seconds(cc.get("stale-if-error"))
    stale = own if own is not None else (0.0 if strict else stale_if_error_s)
    age = seconds(first(items, "age"))
    return Policy(
        lifetime=lifetime,
        initial_age=age or 0.0,
        revalidate="no-cache" in cc,
        stale_if_error=stale,
        vary=field_names(every(items, "vary")),
        etag=first(items, "etag"),
        last_modified=first(items, "last-modified"),
    )


def refreshed(stored: list[tuple[str, str]], fresh: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A stored response's headers updated by a 304 (RFC 9111 §4.3.4): each header the 304 carries
    replaces the stored one of that name; the framing headers of the stored body stay."""
    keep = {"content-length", "content-encoding", "transfer-encoding", "content-range"}
    updated = {k.lower() for k, _ in fresh} - keep
    return [(k, v) for k, v in stored if k.lower() not in updated] + [(k, v) for k, v in fresh if k.lower() in updated]


def not_modified(request: Mapping[str, str], etag: str | None, last_modified: str | None) -> bool:
    """Does the client's own conditional GET match what is stored (RFC 9110 §13.1.2, §13.1.3)?
    If-None-Match wins when both are sent; it compares weakly, as GET and HEAD allow."""
    inm = request.get("if-none-match")
    if inm is not None:
        if etag is None:
            return False
        tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
        return "*" in tags or etag.removeprefix("W/") in tags
    ims = when(request.get("if-modified-since"))
    lm = when(last_modified)
    return ims is not None and lm is not None and lm <= ims
