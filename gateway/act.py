"""act: carry out the Action — answer a block at the edge, or forward to the origin and stream back.

Input: the Exchange with its features (holding the inspected body prefix), action and annotations.
Output: the response the client got; a forwarded one has been streamed in full when this returns.

Forwarding streams both ways: the origin receives the inspected prefix and then the rest of the client's
stream, with the client's Content-Length when it sent one (chunked otherwise); the origin's status,
headers and body come back as they are, never decompressed. Only this phase does I/O towards the origin.

A `cache` action goes to cached.serve (the edge response cache), which uses send, relay and release below
to reach the origin. Every answer says what the edge cache did in `x-clef-cache` (BYPASS unless cached).

Short-circuits: a `block` answers the route's block response without contacting the origin. Before the
response starts, an unreachable origin raises UpstreamError (502), a silent one UpstreamTimeout (504), an
origin marked down by its passive health (origin_health.py) UpstreamDown (502) without being tried, a
chunked body that runs past `limits.max_body_bytes` PayloadTooLarge (413), a client too slow with its body
RequestTimeout (408; the origin then sees a cut request, never a complete one). Once the first byte has
gone to the client a failure can only cut the connection: it is recorded on `ex.error` for the log.

Error messages name the failure, never the request: aiohttp's own messages can carry the URL and its query.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, AsyncIterator, Callable

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from gateway import cached, hops
from gateway.errors import (
    SERVER,
    ClientGone,
    GatewayError,
    PayloadTooLarge,
    UpstreamDown,
    UpstreamError,
    UpstreamTimeout,
)

if TYPE_CHECKING:
    from gateway.exchange import Exchange

# aiohttp's client would otherwise add headers the client never sent
SKIP_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
CACHE_STATUS = "x-clef-cache"  # HIT | MISS | EXPIRED | REVALIDATED | STALE | BYPASS


async def perform(ex: Exchange) -> web.StreamResponse:
    if ex.action.blocks:
        return block(ex)
    if ex.action.kind == "cache" and ex.edge is not None:
        return await cached.serve(ex)
    return await forward(ex)


def block(ex: Exchange) -> web.Response:
    answer = ex.action.block_response
    headers = CIMultiDict(ex.headers.client)
    headers["Content-Type"] = answer.content_type
    headers["Server"] = SERVER
    headers[CACHE_STATUS] = ex.cache_status
    return web.Response(status=answer.status, body=answer.body.encode("utf-8"), headers=headers)


def target(origin: str, request: web.Request) -> URL:
    """The origin URL's scheme, authority and path prefix, then the request's path and query as sent."""
    base = URL(origin)
    raw = request.raw_path if request.raw_path.startswith("/") else request.rel_url.raw_path_qs
    return URL(f"{base.scheme}://{base.raw_authority}{base.raw_path.rstrip('/')}{raw}", encoded=True)


async def forward(ex: Exchange) -> web.StreamResponse:
    upstream = await send(ex, outgoing(ex))
    try:
        return await relay(ex, upstream)
    finally:
        release(ex, upstream)


def outgoing(ex: Exchange) -> CIMultiDict[str]:
    """The headers for the origin: the client's, cleaned of hop-by-hop and x-clef-*, plus ours."""
    return hops.request_headers(ex.request, ex.config.origin.host == "preserve", ex.headers)


async def send(ex: Exchange, headers: CIMultiDict[str]) -> aiohttp.ClientResponse:
    """The request to the origin, up to its response headers; the body is the client's, streamed."""
    request, origin = ex.request, ex.config.origin
    health = ex.origin
    if health is not None and health.down():
        raise UpstreamDown(f"origin marked down after {health.failures} failures in a row; "
                           f"trying again in {health.retry_in():.1f}s")  # fmt: skip
    sent = ex.clock()
    try:
        upstream = await ex.session.request(
            request.method,
            target(origin.url, request),
            headers=headers,
            data=body(ex) if request.body_exists else None,
            allow_redirects=False,
            skip_auto_headers=SKIP_AUTO_HEADERS,
        )
    except (asyncio.TimeoutError, aiohttp.ClientError) as err:
        if ex.body_error is not None:  # the client's body failed, inside aiohttp's writer: not the origin's fault
            raise ex.body_error from None
        limit = ex.config.limits.max_body_bytes
        if limit is not None and ex.bytes_in > limit:
            raise PayloadTooLarge(f"request body exceeds limits.max_body_bytes ({limit})") from None
        if isinstance(err, asyncio.TimeoutError):  # aiohttp's connect and read timeouts are TimeoutErrors too
            failed: UpstreamError = UpstreamTimeout(
                f"origin timed out (connect {origin.connect_timeout_s:g}s, silence {origin.timeout_s:g}s)"
            )
        else:
            failed = UpstreamError(f"origin unreachable: {describe(err)}")
        if health is not None:
            health.failure(failed.message)
        raise failed from None
    ex.upstream_s = ex.clock() - sent
    ex.upstream_status = upstream.status
    return upstream


def describe(err: BaseException) -> str:
    """What went wrong, without the URL: str() of aiohttp's response errors includes it, query and all."""
    if isinstance(err, aiohttp.ClientResponseError):
        return f"{type(err).__name__}: {err.message}"
    if isinstance(err, aiohttp.InvalidURL):
        return type(err).__name__
    return f"{type(err).__name__}: {err}"[:200]


def release(ex: Exchange, upstream: aiohttp.ClientResponse) -> None:
    if ex.error or not upstream.content.at_eof():  # never hand a half-read connection back to the pool
        upstream.close()
    else:
        upstream.release()
        if ex.origin is not None:  # a whole answer: only now is the origin known to be well (not at its headers)
            ex.origin.success()


async def body(ex: Exchange) -> AsyncIterator[bytes]:
    """The inspected prefix, then the rest of the client's stream, counted against the body limit and
    read within the body's time limits. What stops it is raised inside aiohttp's writer, which wraps it
    and cuts the request to the origin; send() finds the cause on `ex.body_error`."""
    limit = ex.config.limits.max_body_bytes
    head = ex.features.body
    ex.bytes_in = len(head)
    if head:
        yield head
    stream, deadline = ex.request.content, ex.deadline
    try:
        while chunk := await (deadline.read(stream) if deadline is not None else stream.readany()):
            ex.bytes_in += len(chunk)
            if limit is not None and ex.bytes_in > limit:
                raise PayloadTooLarge(f"request body exceeds limits.max_body_bytes ({limit})")
            yield chunk
    except GatewayError as err:
        ex.body_error = err
        raise


async def relay(
    ex: Exchange, upstream: aiohttp.ClientResponse, tee: Callable[[bytes], None] | None = None
) -> web.StreamResponse:
    """Stream the origin's response to the client; `tee` sees every chunk too (the edge cache's fill)."""
    headers = hops.response_headers(upstream.raw_headers, ex.headers)
    headers[CACHE_STATUS] = ex.cache_status  # replaces any the origin sent: the status is ours to say
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    try:
        await response.prepare(ex.request)
    except ConnectionError:
        ex.error = ClientGone("client closed the connection before the response")
        return response
    while True:
        try:
            chunk = await upstream.content.readany()
        except asyncio.TimeoutError:
            ex.error = UpstreamTimeout("origin went silent mid-response")
            return cut(ex, response)
        except aiohttp.ClientError as err:
            ex.error = UpstreamError(f"origin failed mid-response: {describe(err)}")
            if ex.origin is not None:
                ex.origin.failure(ex.error.message)
            return cut(ex, response)
        if not chunk:
            break
        if tee is not None:
            tee(chunk)
        try:
            await response.write(chunk)
        except ConnectionError:
            ex.error = ClientGone("client closed the connection mid-response")
            return response
        ex.bytes_out += len(chunk)
    await response.write_eof()
    return response


def cut(ex: Exchange, response: web.StreamResponse) -> web.StreamResponse:
    """Close the client's connection without ending the body, so the client sees a truncated response
    (no final chunk, or fewer bytes than Content-Length) rather than a complete-looking one."""
    if ex.request.transport is not None:
        ex.request.transport.close()
    return response
