"""The gateway's few exceptions. Each knows the answer a client gets for it.

    GatewayError           has .response()
    ├── ConfigError        startup and reloads only
    ├── ClientError        400 (and the 4xx below: 401, 404, 408, 413, 422, 429, 431)
    ├── UpstreamError      502 / 504 (UpstreamDown: 502 at once while the origin is marked down)
    ├── ClientGone         499, for the log only
    ├── Overloaded         503 + Retry-After: more requests in flight than limits.max_in_flight
    └── EngineUnavailable  503, the admin API only

The engine's own EngineError is caught inside Decider.decide(): a client never sees it.

Every answer the gateway makes itself says so: `Server: clef-gateway` and `x-clef-error: <kind>`, so a
client (or an operator reading a capture) can tell our 502 from the origin's. Its body is one short line
and never echoes request data. An error whose request may still have unread or ambiguous bytes on the
connection (`closes`) also closes it, so those bytes can never be read as a next request; unless it
`lingers`, the connection closes as soon as the answer is written, without first reading and discarding
the rest of the body (pointless for a framing the gateway cannot trust or a client that stopped sending).
"""

from __future__ import annotations

import math
from typing import Iterable

from aiohttp import web
from multidict import CIMultiDict

SERVER = "clef-gateway"  # on the answers the gateway makes itself, instead of aiohttp's version banner


ERROR_HEADER = "x-clef-error"


class GatewayError(Exception):
    status = 500
    kind = "internal"
    closes = False  # close the client's connection after this answer
    lingers = True  # before closing, read and drop what the client still sends, so it sees the answer
    retry_after: float | None = None  # seconds, sent as Retry-After (503, 429)

    def __init__(self, message: str = "", status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.message = message or self.__class__.__name__
        if status is not None:
            self.status = status
        if retry_after is not None:
            self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        out = {"Server": SERVER, ERROR_HEADER: self.kind}
        if self.retry_after is not None:
            out["Retry-After"] = str(max(1, math.ceil(self.retry_after)))
        return out

    def response(self, extra: Iterable[tuple[str, str]] = ()) -> web.Response:
        """The short plain-text answer the proxy gives; the body never echoes request data. `extra`: the
        decision headers for the client, when there was a decision and they are echoed."""
        headers = CIMultiDict(extra)
        headers.update(self.headers())
        response = web.Response(status=self.status, text=f"{self.status} {self.reason}\n", headers=headers)
        if self.closes:
            response.force_close()
        return response

    def json_response(self) -> web.Response:
        """The admin API's answer: {"error": {"type", "message"}}."""
        response = web.json_response(
            {"error": {"type": self.kind, "message": self.message}}, status=self.status, headers=self.headers()
        )
        if self.closes:
            response.force_close()
        return response

    @property
    def reason(self) -> str:
        from http import HTTPStatus

        try:
            return HTTPStatus(self.status).phrase
        except ValueError:
            return "Error"


class ConfigError(GatewayError):
    """A bad config value; the message names the full key: `breaker.failures_to_open: must be > 0, got 0`."""

    kind = "config"


class ClientError(GatewayError):
    """The client's request is not acceptable (400 unless a subclass says otherwise)."""

    status = 400
    kind = "bad_request"
    closes = True  # its body may be unread, or its framing was the problem
    lingers = False


class Unauthorized(ClientError):
    """The admin API's bearer token is missing or wrong."""

    status = 401
    kind = "unauthorized"
    closes = False

    def headers(self) -> dict[str, str]:
        return {**super().headers(), "WWW-Authenticate": 'Bearer realm="clef-gateway admin"'}


class RequestTimeout(ClientError):
    """The client was too slow sending its request head or body (limits.*_timeout_s)."""

    status = 408
    kind = "request_timeout"


class PayloadTooLarge(ClientError):
    status = 413
    kind = "payload_too_large"
    lingers = True  # the client may still be uploading: let it see the 413 rather than a reset


class HeadersTooLarge(ClientError):
    status = 431
    kind = "headers_too_large"


class TooManyRequests(ClientError):
    """The admin decision API's rate limit (admin.decision_rate)."""

    status = 429
    kind = "rate_limited"
    closes = False


class NotFound(ClientError):
    """The admin API has no such thing (a journal entry); or the feature behind it is off."""

    status = 404
    kind = "not_found"
    closes = False


class Unprocessable(ClientError):
    """Well-formed JSON that is not a valid input (admin API)."""

    status = 422
    kind = "invalid_input"
    closes = False  # the body was read whole: the connection is clean


class UpstreamError(GatewayError):
    """The origin could not be reached or failed mid-exchange."""

    status = 502
    kind = "upstream_unreachable"


class UpstreamTimeout(UpstreamError):
    status = 504
    kind = "upstream_timeout"


class UpstreamDown(UpstreamError):
    """The origin failed origin.fail_threshold times in a row: answered at once for origin.down_for_s."""

    kind = "upstream_down"


class Overloaded(GatewayError):
    """More requests in flight than limits.max_in_flight: shed at once rather than queued."""

    status = 503
    kind = "overloaded"
    closes = True  # fewer open connections is the point; its body is never read
    lingers = False


class ClientGone(GatewayError):
    """The client closed its connection; nobody reads the answer, the log still records it (499)."""

    status = 499
    kind = "client_closed"


class EngineUnavailable(GatewayError):
    """No decider to ask (not started, shut down, or it failed unexpectedly)."""

    status = 503
    kind = "engine_unavailable"
