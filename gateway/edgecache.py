"""The edge response cache: stored origin responses for requests decided `cache`, bounded in bytes.

Input: a request's method, path, query and headers (to key it and to refuse credentialed ones), and
whole origin responses with the freshness Policy freshness.py worked out. Output: the stored Entry a
request may be served, and the Fill through which a miss's response is teed in while it streams to the
client. No I/O: act (through cached.py) asks the origin; this module only remembers.

- The key is the request's host, path, query (sorted, as sent or ignored) and the configured headers; the
  origin's Vary adds the values of the headers it names, so each variant is an entry of its own.
- Memory is bounded by `max_bytes` (least recently used out first); a response over `max_object_bytes`
  is given up on while it streams, never buffered whole.
- One Fill per key at a time: concurrent misses wait for it (`wait`) instead of asking the origin too.

Short-circuits: nothing itself; `refusal` says which requests must bypass the cache altogether.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Mapping

from gateway.config_cache import ResponseCacheConfig
from gateway.freshness import Policy

Key = tuple[str, tuple[str, ...]]  # (the request's key, the values of the headers its Vary names)
OVERHEAD = 256  # bytes counted per entry beyond its body and headers: the objects around them
CREDENTIALS = ("authorization", "proxy-authorization")


@dataclass(eq=False, slots=True)
class Entry:
    key: Key
    target: str  # path and normalised query, what a purge matches
    status: int
    reason: str
    headers: list[tuple[str, str]]  # the origin's end-to-end headers, without framing and Age
    body: bytes
    policy: Policy
    stored_at: float  # by the cache's clock
    size: int = 0

    def age(self, now: float) -> float:
        return self.policy.initial_age + max(0.0, now - self.stored_at)

    def fresh(self, now: float) -> bool:
        return not self.policy.revalidate and self.age(now) < self.policy.lifetime

    def may_stand_in(self, now: float) -> bool:
        """May it be served stale because the origin failed (stale-if-error)?"""
        return self.age(now) <= self.policy.lifetime + self.policy.stale_if_error


@dataclass
class Stats:
    hits: int = 0  # answered from a stored entry (HIT, REVALIDATED, STALE)
    misses: int = 0  # went to the origin for a full response (MISS, EXPIRED)
    evictions: int = 0  # entries pushed out to make room
    stored: int = 0  # entries stored
    served_bytes: int = 0  # body bytes answered from stored entries
    coalesced: int = 0  # misses that waited for another request's fill instead of asking the origin


class Fill:
    """One origin response on its way into the cache, fed chunk by chunk as it streams to the client."""

    def __init__(self, cache: "EdgeCache", key: str, limit: int):
        self.cache, self.key, self.limit = cache, key, limit
        self.buffer: bytearray | None = bytearray()
        self.generation = cache.generation  # a purge since it started means its response may be outdated
        self.done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def add(self, chunk: bytes) -> None:
        if self.buffer is None:
            return
        if len(self.buffer) + len(chunk) > self.limit:
            self.buffer = None  # too large to keep: stream the rest through and let the waiters go
            self.finish("uncacheable")
        else:
            self.buffer += chunk

    @property
    def storable(self) -> bool:
        """Still within the size limit, and no purge happened while it was on its way."""
        return self.buffer is not None and self.generation == self.cache.generation

    def finish(self, outcome: str) -> None:
        """Release the waiters: `stored`, `failed` (the origin failed; a stale copy may stand in) or
        `uncacheable` (they ask the origin themselves). Idempotent: the first outcome stands."""
        if not self.done.done():
            self.done.set_result(outcome)
        if self.cache._fills.get(self.key) is self:
            del self.cache._fills[self.key]


class EdgeCache:
    def __init__(self, config: ResponseCacheConfig, clock: Callable[[], float] | None = None):
        self.config = config
        self.clock = clock or time.monotonic
        self.stats = Stats()
        self.bytes = 0
        self.generation = 0  # counts purges
        self._entries: OrderedDict[Key, Entry] = OrderedDict()  # least recently used first
        self._vary: dict[str, tuple[str, ...]] = {}  # per key: the header names its latest Vary gave
        self._variants: dict[str, set[tuple[str, ...]]] = {}
        self._fills: dict[str, Fill] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def refusal(self, method: str, path: str, headers: Mapping[str, str], has_body: bool) -> str | None:
        """Why this request must not be answered from, nor fill, the cache; None when it may."""
        if method not in ("GET", "HEAD"):
            return "method"
        if has_body:
            return "body"
        if any(name in headers for name in CREDENTIALS):
            return "credentials"
        if "cookie" in headers and not self.ignores_cookies(path):
            return "credentials"
        if "range" in headers:
            return "range"
        if "no-store" in headers.get("cache-control", "").lower():
            return "no-store"
        return None

    def ignores_cookies(self, path: str) -> bool:
        return any(path.startswith(p) for p in self.config.ignore_cookies_under)

    def target(self, path: str, query: str) -> str:
        mode = self.config.key.query
        if mode == "ignored" or not query:
            return path
        if mode == "sorted":
            query = "&".join(sorted(p for p in query.split("&") if p))
        return f"{path}?{query}" if query else path

    def key(self, host: str, path: str, query: str, headers: Mapping[str, str]) -> str:
        k = self.config.key
        parts = [host.lower() if k.host else "", self.target(path, query)]
        parts += [f"{name}={_values(headers, name)}" for name in k.headers]
        return "\n".join(parts)  # a newline cannot occur in a host, a target or a header value

    def get(self, key: str, headers: Mapping[str, str]) -> Entry | None:
        names = self._vary.get(key)
        if names is None:
            return None
        entry = self._entries.get((key, tuple(_values(headers, n) for n in names)))
        if entry is not None:
            self._entries.move_to_end(entry.key)
        return entry

    def put(
        self, key: str, target: str, headers: Mapping[str, str], status: int, reason: str,
        items: list[tuple[str, str]], body: bytes, policy: Policy,
    ) -> Entry | None:  # fmt: skip
        """Store a response for the request with these headers; None when it cannot fit."""
        kept = [(k, v) for k, v in items if k.lower() not in ("content-length", "transfer-encoding", "age")]
        size = len(body) + sum(len(k) + len(v) + 4 for k, v in kept) + OVERHEAD
        if len(body) > self.config.max_object_bytes or size > self.config.max_bytes:
            return None
        if self._vary.get(key, policy.vary) != policy.vary:
            self.drop(key)  # the origin changed what it varies on: the old variants can no longer be found
        secondary = tuple(_values(headers, n) for n in policy.vary)
        if (old := self._entries.get((key, secondary))) is not None:
            self._remove(old)
        entry = Entry((key, secondary), target, status, reason, kept, body, policy, self.clock(), size)
        self._vary[key] = policy.vary
        self._variants.setdefault(key, set()).add(secondary)
        self._entries[entry.key] = entry
        self.bytes += size
        self.stats.stored += 1
        while self.bytes > self.config.max_bytes:
            self._remove(next(iter(self._entries.values())))
            self.stats.evictions += 1
        return entry

    def refresh(self, entry: Entry, items: list[tuple[str, str]], policy: Policy) -> None:
        """A 304 confirmed the entry: its headers updated, its age zero again (plus the 304's Age)."""
        entry.headers = [(k, v) for k, v in items if k.lower() not in ("content-length", "transfer-encoding", "age")]
        entry.policy = policy
        entry.stored_at = self.clock()

    def drop(self, key: str) -> int:
        """Forget every variant stored under `key`."""
        gone = [self._entries[(key, s)] for s in self._variants.get(key, ()) if (key, s) in self._entries]
        for entry in gone:
            self._remove(entry)
        return len(gone)

    def purge(self, url: str | None = None, prefix: str | None = None) -> int:
        """Remove the entries of one URL (path and query, matched after the key's query normalisation, on
        every host) or of every path under a prefix. Returns how many entries went."""
        if url is not None:
            path, _, query = url.partition("?")
            wanted = self.target(path, query)
            gone = [e for e in self._entries.values() if e.target == wanted]
        else:
            gone = [e for e in self._entries.values() if e.target.startswith(prefix or "")]
        for entry in gone:
            self._remove(entry)
        self.generation += 1
        return len(gone)

    def fill(self, key: str) -> Fill | None:
        """Start filling `key`; None when another request already is (then `wait` for it)."""
        if key in self._fills:
            return None
        self._fills[key] = fill = Fill(self, key, self.config.max_object_bytes)
        return fill

    async def wait(self, key: str) -> str:
        """The outcome of the fill in progress for `key` (see Fill.finish)."""
        fill = self._fills.get(key)
        if fill is None:
            return "stored"
        self.stats.coalesced += 1
        # shielded: a waiter that goes away must not cancel the outcome the others wait for
        return await asyncio.shield(fill.done)

    def waiting(self, key: str) -> bool:
        return key in self._fills

    def _remove(self, entry: Entry) -> None:
        if self._entries.pop(entry.key, None) is None:
            return
        self.bytes -= entry.size
        key, secondary = entry.key
        variants = self._variants.get(key)
        if variants is not None:
            variants.discard(secondary)
            if not variants:
                del self._variants[key]
                self._vary.pop(key, None)


def _values(headers: Mapping[str, str], name: str) -> str:
    """A request header's values as one normalised string: repeats joined, runs of spaces collapsed."""
    getall = getattr(headers, "getall", None)
    values = getall(name, []) if getall is not None else ([headers[name]] if name in headers else [])
    return ",".join(" ".join(v.split()) for v in values)
