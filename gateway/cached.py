"""act, for `cache` actions: answer from the edge response cache, or fill it from the origin.

Input: the Exchange of a request decided `cache`. Output: the response the client got, and on the
Exchange what the cache did (`cache_status`, also sent as `x-clef-cache`):

    HIT          a fresh stored response (Age says how old); a matching conditional request gets a 304
    MISS         nothing stored: asked the origin, streamed its answer and stored it if RFC 9111 allows
    EXPIRED      stored but stale, without validators or the origin sent a new version: replaced
    REVALIDATED  stored but stale (or no-cache): the origin's 304 confirmed it, served from the store
    STALE        the origin failed (unreachable, timeout, 5xx) and the stale copy is within stale-if-error
    BYPASS       not a cacheable request (method, body, credentials, Range, no-store): forwarded as is

Concurrent misses for one key make one origin request: the first fills, the others wait and are served
from what it stored; if it stored nothing they ask the origin themselves. A fill asks the origin for a
whole, unconditional response (the client's own conditionals and Range are not forwarded) and answers
the client's conditional from the store afterwards. HEAD is served from a stored GET, never stored. A
client's own `Cache-Control: no-store` bypasses the cache; its no-cache and max-age are not honoured, so
clients cannot make the edge send their traffic to the origin (purge instead).

Short-circuits: a hit never contacts the origin; a stale copy can replace an origin error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from engine.fields import text_of
from gateway import act, freshness, hops
from gateway.annotate import strip
from gateway.errors import UpstreamError

if TYPE_CHECKING:
    from gateway.edgecache import EdgeCache, Entry, Fill
    from gateway.exchange import Exchange

CONDITIONALS = ("If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range")
NOT_MODIFIED_HEADERS = ("cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified")
SERVED = frozenset({"HIT", "REVALIDATED", "STALE"})


async def serve(ex: Exchange) -> web.StreamResponse:
    edge: EdgeCache = ex.edge
    request = ex.request
    path, _, query = request.raw_path.partition("?")
    if edge.refusal(request.method, path, request.headers, request.body_exists):
        return await act.forward(ex)
    key = edge.key(request.host, path, query, request.headers)
    entry = edge.get(key, request.headers)
    if entry is not None and entry.fresh(edge.clock()):
        return answer(ex, entry, "HIT")
    if request.method == "HEAD":  # a HEAD brings no body to store: pass it on
        return await uncached(ex, "MISS" if entry is None else "EXPIRED")
    fill = edge.fill(key)
    if fill is None:
        return await after_wait(ex, key, await edge.wait(key))
    try:
        return await refill(ex, key, fill, entry)
    finally:
        fill.finish("uncacheable")  # whatever path was taken, nobody waits past this request


async def after_wait(ex: Exchange, key: str, outcome: str) -> web.StreamResponse:
    """Another request asked the origin for this key: use what it stored, or ask the origin ourselves."""
    edge: EdgeCache = ex.edge
    entry = edge.get(key, ex.request.headers)  # its Vary may select another variant than ours
    now = edge.clock()
    if entry is not None and entry.fresh(now):
        return answer(ex, entry, "HIT")
    if outcome == "failed" and entry is not None and entry.may_stand_in(now):
        return answer(ex, entry, "STALE")
    return await uncached(ex, "MISS")


async def uncached(ex: Exchange, status: str) -> web.StreamResponse:
    ex.cache_status = status
    _count(ex.edge, status, 0)
    return await act.forward(ex)


async def refill(ex: Exchange, key: str, fill: Fill, entry: Entry | None) -> web.StreamResponse:
    """Ask the origin: conditionally when a stale entry has validators, for a whole response otherwise."""
    edge: EdgeCache = ex.edge
    headers = act.outgoing(ex)
    for name in CONDITIONALS:
        headers.popall(name, None)
    if edge.ignores_cookies(ex.request.path):
        headers.popall("Cookie", None)  # ignored for the key, so the origin must not personalise on it
    if entry is not None:
        if entry.policy.etag is not None:
            headers["If-None-Match"] = entry.policy.etag
        if entry.policy.last_modified is not None:
            headers["If-Modified-Since"] = entry.policy.last_modified
    try:
        upstream = await act.send(ex, headers)
    except UpstreamError:
        if entry is not None and entry.may_stand_in(edge.clock()):
            fill.finish("failed")
            return answer(ex, entry, "STALE")
        raise
    try:
        return await received(ex, key, fill, entry, upstream)
    finally:
        act.release(ex, upstream)


async def received(
    ex: Exchange, key: str, fill: Fill, entry: Entry | None, upstream: aiohttp.ClientResponse
) -> web.StreamResponse:
    edge: EdgeCache = ex.edge
    cfg = edge.config
    now = edge.clock()
    if entry is not None and upstream.status in freshness.SERVER_ERRORS and entry.may_stand_in(now):
        fill.finish("failed")
        return answer(ex, entry, "STALE")
    items = hops.end_to_end((text_of(k), text_of(v)) for k, v in upstream.raw_headers)
    if entry is not None and upstream.status == 304:
        merged = freshness.refreshed(entry.headers, items)
        edge.refresh(entry, merged, freshness.policy(merged, cfg.default_ttl_s, cfg.stale_if_error_s))
        fill.finish("stored")
        return answer(ex, entry, "REVALIDATED")
    ex.cache_status = "MISS" if entry is None else "EXPIRED"
    _count(edge, ex.cache_status, 0)
    if freshness.refusal("GET", upstream.status, items, cfg.statuses) is not None:
        if entry is not None:
            edge.drop(key)  # the origin no longer lets this be stored: the old copy must not be served
        fill.finish("uncacheable")
        return await act.relay(ex, upstream)
    response = await act.relay(ex, upstream, tee=fill.add)
    if ex.error is None and fill.storable:
        path, _, query = ex.request.raw_path.partition("?")
        stored = edge.put(
            key, edge.target(path, query), ex.request.headers, upstream.status, upstream.reason or "", items,
            bytes(fill.buffer), freshness.policy(items, cfg.default_ttl_s, cfg.stale_if_error_s),
        )  # fmt: skip
        fill.finish("stored" if stored is not None else "uncacheable")
    return response


def answer(ex: Exchange, entry: Entry, status: str) -> web.Response:
    """A stored response, with its Age; a 304 when the client's own conditional request matches it."""
    edge: EdgeCache = ex.edge
    request = ex.request
    ex.cache_status = status
    headers: CIMultiDict[str] = CIMultiDict(strip(entry.headers) if ex.headers.client else entry.headers)
    headers.extend(ex.headers.client)
    headers["Age"] = str(int(entry.age(edge.clock())))
    headers[act.CACHE_STATUS] = status
    if entry.status == 200 and freshness.not_modified(request.headers, entry.policy.etag, entry.policy.last_modified):
        _count(edge, status, 0)
        return web.Response(status=304, headers=CIMultiDict((k, v) for k, v in headers.items() if _validating(k)))
    ex.bytes_out = len(entry.body) if request.method == "GET" else 0
    _count(edge, status, ex.bytes_out)
    # aiohttp answers a HEAD with this body's Content-Length and no body
    return web.Response(status=entry.status, reason=entry.reason or None, headers=headers, body=entry.body)


def _validating(name: str) -> bool:
    """The headers a 304 carries (RFC 9110 §15.4.5), plus our own."""
    name = name.lower()
    return name in NOT_MODIFIED_HEADERS or name == "age" or name.startswith("x-clef-")


def _count(edge: EdgeCache, status: str, served: int) -> None:
    stats = edge.stats
    if status in SERVED:
        stats.hits += 1
        stats.served_bytes += served
    else:
        stats.misses += 1
