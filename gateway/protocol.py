"""The listeners' connections: aiohttp's RequestHandler with the limits and refusals a gateway needs.

Input: bytes from client connections. Output: parsed requests for the app's handler; or, for what never
becomes a request, a short answer of ours (errors.GatewayError: `x-clef-error`, no request data echoed),
then `on_refusal(error, client)`, which writes the access-log line and counts it:

- a connection beyond limits.max_connections: 503 with Retry-After, closed before anything is read;
- a request head aiohttp's parser rejects (the smuggling patterns, garbage, the line and header limits):
  400 (431 for too many headers), closed. aiohttp's own answer would echo the offending bytes, and its
  log line would carry them (a Cookie header, say); ours names the kind of error only;
- a request head still incomplete limits.header_timeout_s after its first byte (or after the connection
  opened), however slowly it trickles (slowloris): 408, closed;
- a kept-alive connection with no request: closed after limits.idle_timeout_s (aiohttp's keep-alive timer).

Shutdown (SIGTERM): the runner stops listening and waits up to shutdown.grace_s for requests in flight.
aiohttp stops reading every connection at once, which would starve an upload in progress; here a
connection whose request is in flight keeps reading that request's body until it is done.

Short-circuits: every refusal above, before the app sees a request.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any, Callable

from aiohttp import web
from aiohttp.http_exceptions import BadStatusLine, HttpProcessingError, InvalidHeader, InvalidURLError, LineTooLong
from aiohttp.web_protocol import RequestHandler, RequestPayloadError, _ErrInfo

from gateway.config_limits import LimitsConfig
from gateway.errors import ClientError, GatewayError, HeadersTooLarge, Overloaded, RequestTimeout

log = logging.getLogger("clef.gateway")

Refused = Callable[[GatewayError, str], None]


def parse_error(exc: BaseException | None) -> GatewayError:
    """aiohttp's parse error as ours, with a message that cannot carry request bytes: aiohttp's own
    messages quote the offending line (`Invalid HTTP header: b'Cookie: …'`), so only their fixed prefix is
    kept, and for the kinds that quote nothing but request data a fixed description stands in."""
    if isinstance(exc, LineTooLong):
        return ClientError("request line or header longer than the limits")
    if isinstance(exc, BadStatusLine):  # BadHttpMethod too
        return ClientError("not an HTTP/1.x request line")
    if isinstance(exc, InvalidURLError):
        return ClientError("invalid request target")
    if isinstance(exc, InvalidHeader):
        return ClientError("invalid header")
    text = exc.message if isinstance(exc, HttpProcessingError) else ""
    first = str(text).split("\n", 1)[0]
    for quote in (": b'", ': b"', " b'", ' b"'):
        first = first.split(quote, 1)[0]
    first = first.rstrip(": .")[:120] or "malformed request head"
    if first.startswith("Too many headers"):
        return HeadersTooLarge(first)
    return ClientError(first)


def raw_answer(err: GatewayError) -> bytes:
    """The whole answer as bytes, for a connection no response object can be written to (no request)."""
    body = f"{err.status} {err.reason}\n".encode()
    lines = [f"HTTP/1.1 {err.status} {err.reason}", "Content-Type: text/plain; charset=utf-8",
             f"Content-Length: {len(body)}", "Connection: close"]  # fmt: skip
    lines += [f"{k}: {v}" for k, v in err.headers().items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class GatewayProtocol(RequestHandler):
    def __init__(self, manager: GatewayServer, **kwargs: Any):
        super().__init__(manager, **kwargs)
        self.server = manager
        self.draining = False  # set by the server at shutdown
        self.head_timer: asyncio.TimerHandle | None = None
        self.seen_bytes = False  # any byte on this connection yet (an idle preconnect is not worth a log line)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        server = self.server
        if server.open >= server.limits.max_connections:
            err = Overloaded(f"more than limits.max_connections ({server.limits.max_connections}) open",
                             retry_after=server.limits.retry_after_s)  # fmt: skip
            transport.write(raw_answer(err))  # type: ignore[attr-defined]
            transport.close()
            self._manager = None  # never registered: connection_lost has nothing to undo
            server.refuse(err, _peer(transport))
            return
        server.open += 1
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._manager is not None:
            self.server.open -= 1
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.seen_bytes = True
        if self.draining and self._request_in_progress and (self._close or self._force_close):
            # aiohttp stops reading at shutdown; the request in flight still needs the rest of its body
            closing = self._close, self._force_close
            self._close = self._force_close = False
            try:
                super().data_received(data)
            finally:
                self._close, self._force_close = closing
            return
        super().data_received(data)
        if not self._messages:
            if self.head_timer is None and not self._request_in_progress:
                self._arm()  # part of a new head: header_timeout_s to be whole (a whole one costs no timer)
        else:
            self._disarm()  # a whole head arrived
            if self._request_in_progress and isinstance(self._messages[-1][0], _ErrInfo) and self._current_request:
                # The parser failed inside the body of the request being handled (the pure-Python parser
                # does not always tell the body): fail it, rather than let it wait for bytes never parsed.
                self._current_request.content.set_exception(RequestPayloadError("malformed request body"))

    async def _handle_request(self, request: Any, start_time: Any, request_handler: Any) -> Any:
        # A head is complete once its request is handled; a timer armed by body bytes that came before the
        # handler started must not fire on the idle connection afterwards (that is the keep-alive timer's).
        self._disarm()
        try:
            return await super()._handle_request(request, start_time, request_handler)
        finally:
            self._disarm()

    def close_when_answered(self) -> None:
        """Close as soon as the answer is written, without reading and discarding the rest of the body."""
        self._lingering_time = 0.0

    def _arm(self) -> None:
        self._disarm()
        self.head_timer = self._loop.call_later(self.server.limits.header_timeout_s, self._head_timeout)

    def _disarm(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timeout(self) -> None:
        self.head_timer = None
        transport = self.transport
        if transport is None or self._request_in_progress or self._messages:
            return  # the timer was for body bytes after all: a request is being handled
        if self.seen_bytes:
            limit = self.server.limits.header_timeout_s
            err = RequestTimeout(f"request head not complete within limits.header_timeout_s ({limit:g}s)")
            transport.write(raw_answer(err))
            self.server.refuse(err, _peer(transport))
        self.force_close()  # closes the transport after what was written has gone

    def handle_error(
        self, request: Any, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        """aiohttp's answer to what its parser rejected (400) or a handler let escape (500, 504): ours."""
        if status == 400:
            err = parse_error(exc)
        else:
            err = GatewayError(f"unhandled {type(exc).__name__ if exc else 'error'}", status=status)
            if exc is not None:  # our bug: the frames say where; the message might quote the request, so not it
                frames = "".join(traceback.format_tb(exc.__traceback__))
                log.error("unhandled %s in a handler:\n%s", type(exc).__name__, frames)
        self.server.refuse(err, request.remote or "")
        if request.writer.output_size > 0:  # a response had started: all that is left is to cut it
            raise ConnectionError("response already started")
        response = err.response()
        response.force_close()
        return response


def close_when_answered(request: web.BaseRequest) -> None:
    protocol = request.protocol
    if isinstance(protocol, GatewayProtocol):  # under aiohttp's own RequestHandler it lingers, as before
        protocol.close_when_answered()


def _peer(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


class GatewayServer(web.Server):
    """aiohttp's Server making GatewayProtocols, counting them, and marking them draining at shutdown."""

    def __init__(self, *args: Any, limits: LimitsConfig, on_refusal: Refused | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.on_refusal = on_refusal
        self.open = 0

    def __call__(self) -> GatewayProtocol:
        return GatewayProtocol(self, loop=self._loop, **self._kwargs)

    def refuse(self, err: GatewayError, client: str) -> None:
        if self.on_refusal is not None:
            try:
                self.on_refusal(err, client)
            except Exception:  # a refusal must happen even when it cannot be recorded
                log.exception("could not record a refused request")

    def pre_shutdown(self) -> None:
        for conn in self.connections:
            if isinstance(conn, GatewayProtocol):
                conn.draining = True
        super().pre_shutdown()


class GatewayRunner(web.AppRunner):
    """An AppRunner whose server is a GatewayServer; `shutdown_timeout` is shutdown.grace_s."""

    def __init__(self, app: web.Application, limits: LimitsConfig, on_refusal: Refused | None = None, **kwargs: Any):
        # a request body passes through as sent: aiohttp would inflate a gzip body and the origin would get the
        # inflated bytes under the client's Content-Encoding (the engine inflates its own copy: engine.fields.inflated)
        super().__init__(app, **{"auto_decompress": False, **kwargs})
        self.limits = limits
        self.on_refusal = on_refusal

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()  # the app started, its handler and request factory set
        return GatewayServer(
            made.request_handler, request_factory=made.request_factory, handler_cancellation=made.handler_cancellation,
            loop=asyncio.get_running_loop(), limits=self.limits, on_refusal=self.on_refusal, **made._kwargs,
        )  # fmt: skip
