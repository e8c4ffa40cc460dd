"""strict: what aiohttp's parsers let through that a gateway must not forward, and load shedding.

Input: a request whose head aiohttp parsed, its body unread. Output: the request (a copy in origin-form
when it came in absolute-form for this host), or a ClientError (400, 431) before anything is forwarded.

aiohttp 3.14 has two request parsers, llhttp in C (the default) and a pure-Python one
(AIOHTTP_NO_EXTENSIONS=1). Both reject, with a 400 before any handler runs: Content-Length with
Transfer-Encoding; repeated Content-Length, equal or not, lists and signs; invalid or overflowing chunk
sizes; obs-fold; bare CR or LF and NUL in headers; `chunked, identity`, `xchunked`, `gzip`; a repeated
Transfer-Encoding; whitespace before a header's colon; a missing Host on HTTP/1.1, a repeated Host;
non-HTTP bytes (a TLS hello, the HTTP/2 preface). They differ: llhttp takes HTTP/0.9 (`GET /`), the
Python one takes HTTP/1.2 and 3.0, lowercase methods (uppercased), raw non-ASCII bytes in the target,
`chunked, chunked`. Both take `identity, chunked`, `Chunked`, TE on HTTP/1.0, an absolute-form target
for any host, an empty or malformed Host, and an Upgrade request with a body (whose body aiohttp then
parses as the next request). Those are refused here, so both parsers end up refusing the same set.

Whitespace around a field value (`Transfer-Encoding:  chunked`, a tab) is optional whitespace that both
parsers strip (RFC 9110 §5.5): the value is `chunked`, unambiguously, and it is accepted; the origin never
sees the client's framing anyway, as act sends the body with framing of its own.

Short-circuits: every refusal; `admit()` sheds a request when limits.max_in_flight are already in flight.
"""

from __future__ import annotations

import re
from itertools import chain
from typing import Any

from aiohttp import web
from aiohttp.http import HttpVersion10, HttpVersion11
from yarl import URL

from gateway.config_limits import LimitsConfig
from gateway.errors import ClientError, HeadersTooLarge, Overloaded

VERSIONS = (HttpVersion11, HttpVersion10)
# RFC 9112 §3.2: origin-form, visible ASCII only; no '#' (a fragment is never part of a request target)
ORIGIN_FORM = re.compile(r"/[!\x22\x24-\x7e]*")
ABSOLUTE_FORM = re.compile(r"(?i:https?)://[!\x22\x24-\x2e\x30-\x7e]+(/[!\x22\x24-\x7e]*)?")
# RFC 9110 §7.2 / RFC 3986 §3.2.2: a DNS name or IPv4 address, or a bracketed IPv6 literal; then a port
HOST = re.compile(r"([A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")


def admit(holder: Any, limits: LimitsConfig) -> None:
    """Shed load at once, before reading a byte of the body, when more than max_in_flight are in flight
    (this request counted): queueing them would only make every one of them late."""
    if holder is not None and holder.in_flight > limits.max_in_flight:
        raise Overloaded(f"more than limits.max_in_flight ({limits.max_in_flight}) requests in flight",
                         retry_after=limits.retry_after_s)  # fmt: skip


def check(request: web.BaseRequest, limits: LimitsConfig) -> web.BaseRequest:
    version = request.version
    if version not in VERSIONS:
        raise ClientError(f"HTTP/{version.major}.{version.minor} is not supported (HTTP/1.0 and 1.1 only)")
    headers = request.headers
    raw = request.raw_headers
    if sum(map(len, chain.from_iterable(raw))) + 4 * len(raw) > limits.max_header_bytes:
        raise HeadersTooLarge(f"header lines over limits.max_header_bytes ({limits.max_header_bytes})")
    framing(headers, version)
    hosts = headers.getall("Host", ())
    if len(hosts) > 1:
        raise ClientError("more than one Host header")
    if not hosts and version == HttpVersion11:
        raise ClientError("no Host header in an HTTP/1.1 request")
    if hosts and not HOST.fullmatch(hosts[0]):
        raise ClientError("invalid Host header")
    target = request.raw_path
    if ORIGIN_FORM.fullmatch(target):
        return request
    return origin_form(request, target, hosts[0] if hosts else None)


def framing(headers: Any, version: Any) -> None:
    """RFC 9112 §6: one unambiguous way to find where the body ends, or a 400 and no forwarding."""
    te = headers.getall("Transfer-Encoding", ())
    lengths = headers.getall("Content-Length", ())
    if te:
        if version == HttpVersion10:  # §6.1: its framing is faulty; an HTTP/1.0 recipient would not dechunk
            raise ClientError("Transfer-Encoding in an HTTP/1.0 request")
        if te != ["chunked"]:  # only chunked is understood here; anything else cannot be framed safely
            raise ClientError("Transfer-Encoding other than exactly chunked")
        if lengths:
            raise ClientError("both Content-Length and Transfer-Encoding")
    if len(lengths) > 1:
        raise ClientError("more than one Content-Length")
    if "Upgrade" in headers and (te or (lengths and lengths[0].strip("0") != "")):
        # aiohttp stops parsing at an Upgrade and, once it is declined, reads the body as the next request
        raise ClientError("Upgrade with a request body")


def origin_form(request: web.BaseRequest, target: str, host: str | None) -> web.BaseRequest:
    """An absolute-form target (RFC 9112 §3.2.2) for this very host becomes origin-form, so that routes,
    the engine and the origin all see the same path; for any other host the gateway is not a proxy."""
    if not ABSOLUTE_FORM.fullmatch(target):
        raise ClientError("invalid request target (origin-form or absolute-form only)")
    url = URL(target, encoded=True)
    if host is None or url.raw_authority.lower() != host.lower():
        raise ClientError("absolute-form target for another host")
    return request.clone(rel_url=URL(url.raw_path_qs or "/", encoded=True))
