"""Header hygiene between two hops: what act sends the origin and relays back to the client.

Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, not the message, so they are dropped both
ways: the fixed list below and every header named in Connection. The request also loses what the gateway
sets itself (Host when the origin's is used, Content-Length, Expect: the client's 100-continue was already
answered here) and any x-clef-* a client sent; it gains X-Forwarded-For (appended), X-Forwarded-Proto,
X-Forwarded-Host, Forwarded (an element appended, RFC 7239 §4) and the decision headers.
"""

from __future__ import annotations

from typing import Iterable

from aiohttp import web
from multidict import CIMultiDict

from engine.fields import text_of
from gateway.annotate import Annotations, strip

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-authenticate",
        "proxy-authorization",
    }
)
SET_HERE = frozenset({"host", "content-length", "expect", "x-forwarded-proto", "x-forwarded-host"})

Items = list[tuple[str, str]]


def end_to_end(items: Iterable[tuple[str, str]]) -> Items:
    """The headers without the hop-by-hop ones, including those the Connection header names."""
    items = list(items)
    named = {
        token.strip().lower()
        for name, value in items
        if name.lower() == "connection"
        for token in value.split(",")
        if token.strip()
    }
    return [(k, v) for k, v in items if k.lower() not in HOP_BY_HOP and k.lower() not in named]


def request_headers(request: web.Request, preserve_host: bool, annotations: Annotations) -> CIMultiDict[str]:
    # text_of: UTF-8 values travel byte for byte; anything else as its Latin-1 characters, never refused
    sent = [(text_of(k), text_of(v)) for k, v in request.raw_headers]
    out: CIMultiDict[str] = CIMultiDict((k, v) for k, v in strip(end_to_end(sent)) if k.lower() not in SET_HERE)
    client = request.remote or "unknown"
    host = request.headers.get("Host", "")
    chain = [v for v in out.popall("X-Forwarded-For", []) if v.strip()]
    out["X-Forwarded-For"] = ", ".join([*chain, client])
    out["X-Forwarded-Proto"] = request.scheme
    if host:
        out["X-Forwarded-Host"] = host
    element = f"for={_node(client)};proto={request.scheme}" + (f';host="{_quoted(host)}"' if host else "")
    earlier = [v for v in out.popall("Forwarded", []) if v.strip()]
    out["Forwarded"] = ", ".join([*earlier, element])
    if preserve_host and host:
        out["Host"] = host
    if request.body_exists and request.content_length is not None:
        out["Content-Length"] = str(request.content_length)  # kept: the origin gets the same framing
    out.extend(annotations.upstream)
    return out


def response_headers(upstream: Iterable[tuple[bytes, bytes]], annotations: Annotations) -> CIMultiDict[str]:
    """The origin's headers, repeats (Set-Cookie) and order kept, Content-Length and encoding untouched.

    When the decision is echoed, an origin's own x-clef-* headers give way to it, so a client sees one set.
    """
    kept = end_to_end((text_of(k), text_of(v)) for k, v in upstream)
    out: CIMultiDict[str] = CIMultiDict(strip(kept) if annotations.client else kept)
    out.extend(annotations.client)
    return out


def _node(ip: str) -> str:
    # RFC 7239 §6: an IPv6 node is bracketed and the whole value quoted
    return f'"[{ip}]"' if ":" in ip else ip


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
