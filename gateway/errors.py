"""The gateway's few exceptions. Each knows the answer a client gets for it.

    GatewayError           has .response()
    ├── ConfigError        startup only
    ├── ClientError        400 (and the 4xx below)
    ├── UpstreamError      502 / 504
    ├── ClientGone         499, for the log only
    └── EngineUnavailable  503, the admin API only

The engine's own EngineError is caught inside Decider.decide(): a client never sees it.
"""

from __future__ import annotations

from aiohttp import web

SERVER = "clef-gateway"  # on the answers the gateway makes itself, instead of aiohttp's version banner


class GatewayError(Exception):
    status = 500
    kind = "internal"

    def __init__(self, message: str = "", status: int | None = None):
        super().__init__(message)
        self.message = message or self.__class__.__name__
        if status is not None:
            self.status = status

    def response(self) -> web.Response:
        """The short plain-text answer the proxy gives; the body never echoes request data."""
        return web.Response(
            status=self.status,
            text=f"{self.status} {self.reason}\n",
            content_type="text/plain",
            headers={"Server": SERVER},
        )

    def json_response(self) -> web.Response:
        """The admin API's answer: {"error": {"type", "message"}}."""
        return web.json_response({"error": {"type": self.kind, "message": self.message}}, status=self.status)

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


class PayloadTooLarge(ClientError):
    status = 413
    kind = "payload_too_large"


class Unprocessable(ClientError):
    """Well-formed JSON that is not a valid input (admin API)."""

    status = 422
    kind = "invalid_input"


class UpstreamError(GatewayError):
    """The origin could not be reached or failed mid-exchange."""

    status = 502
    kind = "upstream_unreachable"


class UpstreamTimeout(UpstreamError):
    status = 504
    kind = "upstream_timeout"


class ClientGone(GatewayError):
    """The client closed its connection; nobody reads the answer, the log still records it (499)."""

    status = 499
    kind = "client_closed"


class EngineUnavailable(GatewayError):
    """No decider to ask (not started, shut down, or it failed unexpectedly)."""

    status = 503
    kind = "engine_unavailable"
