"""parse: a live aiohttp request → engine Features.

Input: the request, with its body still unread. Output: Features with the raw request line, the headers
as the client sent them (order and repeats kept), and the first `model.inspect_bytes` of the body, read
into memory so the engine can decide on it. Those bytes are consumed from the stream here and act sends
them first, then the rest of the stream: the origin still receives every byte.

Short-circuits: a declared Content-Length above `limits.max_body_bytes` raises PayloadTooLarge (413)
before a byte of the body is read; a client that sends its body too slowly (limits.body_idle_timeout_s
of silence, or all of it not within limits.body_timeout_s) raises RequestTimeout (408).

Any target and header bytes the strict checks let through are taken as they are: Latin-1 maps every
byte to one character and the engine's canonical text copes with invalid UTF-8 and percent-escapes.
"""

from __future__ import annotations

import asyncio

from aiohttp import StreamReader, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from engine.features import Features
from gateway.config import Config
from gateway.config_limits import LimitsConfig
from gateway.errors import ClientError, ClientGone, PayloadTooLarge, RequestTimeout


class Deadline:
    """The body's time limits: at most `idle_s` of silence between bytes, and the whole of it by `until`
    (the loop's clock), counted from the first read. Shared by parse and act, which read the same body."""

    def __init__(self, limits: LimitsConfig):
        self.loop = asyncio.get_running_loop()
        self.idle_s = limits.body_idle_timeout_s
        self.total_s = limits.body_timeout_s
        self.until = None if self.total_s is None else self.loop.time() + self.total_s

    async def read(self, stream: StreamReader, n: int = -1) -> bytes:
        """Up to `n` bytes (whatever is there when n is -1); b"" at the end of the body."""
        wait = self.idle_s if self.until is None else min(self.idle_s, self.until - self.loop.time())
        try:
            async with asyncio.timeout(max(wait, 0.0)):
                return await (stream.read(n) if n > 0 else stream.readany())
        except TimeoutError:
            if self.until is not None and self.loop.time() >= self.until:
                raise RequestTimeout(
                    f"request body not complete within limits.body_timeout_s ({self.total_s:g}s)"
                ) from None
            raise RequestTimeout(f"no request body bytes for limits.body_idle_timeout_s ({self.idle_s:g}s)") from None
        except ConnectionError:
            raise ClientGone("client closed the connection while sending its body") from None
        except (RequestPayloadError, HttpProcessingError):  # the body's own framing (a bad chunk) was broken
            raise ClientError("malformed request body (chunked framing)") from None


async def features(request: web.Request, config: Config, deadline: Deadline | None = None) -> Features:
    declared = request.content_length
    limit = config.limits.max_body_bytes
    if limit is not None and declared is not None and declared > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes exceeds limits.max_body_bytes ({limit})")
    body = b""
    size = declared
    if request.body_exists:
        body = await prefix(request.content, config.model.inspect_bytes, deadline)
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


async def prefix(stream: StreamReader, limit: int, deadline: Deadline | None = None) -> bytes:
    """Up to `limit` bytes from the start of the stream (fewer only at its end)."""
    buf = bytearray()
    while len(buf) < limit:
        chunk = await (stream.read(limit - len(buf)) if deadline is None else deadline.read(stream, limit - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def raw_headers(request: web.Request) -> list[tuple[str, str]]:
    """Headers exactly as sent. Latin-1 maps every byte to one character, so nothing is lost or refused."""
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers]
