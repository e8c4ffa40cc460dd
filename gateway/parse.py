"""parse: a live aiohttp request → engine Features.

Input: the request, with its body still unread. Output: Features with the raw request line, the headers
as the client sent them (order and repeats kept), and the first `model.inspect_bytes` of the body, read
into memory so the engine can decide on it. Those bytes are consumed from the stream here and act sends
them first, then the rest of the stream: the origin still receives every byte.

Short-circuits: a declared Content-Length above `limits.max_body_bytes` raises PayloadTooLarge (413)
before a byte of the body is read.
"""

from __future__ import annotations

from aiohttp import StreamReader, web

from engine.features import Features
from gateway.config import Config
from gateway.errors import PayloadTooLarge


async def features(request: web.Request, config: Config) -> Features:
    declared = request.content_length
    limit = config.limits.max_body_bytes
    if limit is not None and declared is not None and declared > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes exceeds limits.max_body_bytes ({limit})")
    body = b""
    size = declared
    if request.body_exists:
        body = await prefix(request.content, config.model.inspect_bytes)
        if size is None:
            # Chunked: the size is known only when the whole body fit. Otherwise say "more than we saw":
            # the engine only needs to know that it saw part of the body.
            size = len(body) if request.content.at_eof() else len(body) + 1
        if limit is not None and len(body) > limit:
            raise PayloadTooLarge(f"request body exceeds limits.max_body_bytes ({limit})")
    path, _, query = request.raw_path.partition("?")
    return Features.build(
        method=request.method,
        path=path,
        query=query,
        headers=raw_headers(request),
        body=body,
        body_size=size,
        client=request.remote or "",
    )


async def prefix(stream: StreamReader, limit: int) -> bytes:
    """Up to `limit` bytes from the start of the stream (fewer only at its end)."""
    buf = bytearray()
    while len(buf) < limit:
        chunk = await stream.read(limit - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def raw_headers(request: web.Request) -> list[tuple[str, str]]:
    """Headers exactly as sent. Latin-1 maps every byte to one character, so nothing is lost or refused."""
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers]
