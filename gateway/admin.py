"""The admin listener: health, metrics, models, the decision API and cache purges, on an address of its own.

    GET  /health          200 {"status": "ok", "model": {name, version, sha256, ...}, "breaker": ...} or 503 with the
                          reason; the model named only (engine.decide.brief): /v1/models has its whole record
    GET  /metrics         the Prometheus text exposition (gateway/metrics.py)
    GET  /v1/models       {"models": [{name, version, labels, features, ...}]}
    POST /v1/decision     {"input": ..., "max_tokens": n} → {"decision": {...}} or {"decisions": [...]}
    POST /v1/cache/purge  {"url": "/exact/path?q"} or {"prefix": "/static/"} → {"purged": n}
    GET  /v1/journal, POST /v1/journal/{id}/label   the decision journal (gateway/admin_journal.py)

Errors are JSON {"error": {"type", "message"}}: 400 bad JSON or types, 401 a missing or wrong token,
413 body over `admin.max_body_bytes`, 422 an invalid input, 429 over the decision rate (with Retry-After),
503 no engine. The app holds no engine of its own; it asks the proxy app's, through `decider()`, so both
listeners decide alike; and it reads its settings through `config()`, so a reload (a new token) applies.

Protection: the listener is on loopback unless configured otherwise. With `admin.token` set (or
CLEF_ADMIN_TOKEN), every path but /health needs `Authorization: Bearer <token>`, compared in constant
time. /v1/decision runs the engine for anyone who can reach it, so it is rate limited: a token bucket of
`admin.decision_burst` inputs refilled at `admin.decision_rate` a second (a batch costs one per input).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Any, Callable

from aiohttp import web

from engine.fields import inflate
from gateway.config import Config
from gateway.errors import (
    ClientError,
    EngineUnavailable,
    GatewayError,
    PayloadTooLarge,
    TooManyRequests,
    Unauthorized,
    Unprocessable,
)
from gateway.inputs import decision_request
from gateway.parse import prefix

log = logging.getLogger("clef.gateway")

DECIDER_OF: web.AppKey[Callable[[], Any]] = web.AppKey("clef_decider_of", object)
CONFIG_OF: web.AppKey[Callable[[], Config]] = web.AppKey("clef_admin_config_of", object)
METRICS: web.AppKey[Any] = web.AppKey("clef_admin_metrics", object)
EDGE: web.AppKey[Any] = web.AppKey("clef_admin_edge", object)
ORIGIN: web.AppKey[Any] = web.AppKey("clef_admin_origin", object)
BUCKET: web.AppKey[Any] = web.AppKey("clef_admin_bucket", object)
OPEN = frozenset({"/health"})  # what a load balancer's probe may ask without the token


class TokenBucket:
    """`burst` tokens, refilled at `rate` a second by the injected clock; rate 0 never runs out."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] | None = None):
        self.clock = clock or time.monotonic
        self.rate, self.burst = rate, float(burst)
        self.tokens, self.stamp = float(burst), self.clock()

    def take(self, n: int = 1) -> float:
        """0.0 when `n` tokens were taken; else the seconds until they will be there (nothing taken)."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= n:
            self.tokens -= n
            return 0.0
        return (n - self.tokens) / self.rate


def build(
    config: Config | Callable[[], Config], decider: Callable[[], Any], metrics: Any = None, edge: Any = None,
    origin: Any = None, clock: Callable[[], float] | None = None,
) -> web.Application:  # fmt: skip
    """`config` is the config, or a function returning the current one (the proxy's Holder after reloads)."""
    app = web.Application(middlewares=[json_errors, authorized])
    app[CONFIG_OF] = config if callable(config) else (lambda: config)
    app[DECIDER_OF] = decider
    app[METRICS] = metrics
    app[EDGE] = edge
    app[ORIGIN] = origin
    first = app[CONFIG_OF]().admin
    app[BUCKET] = TokenBucket(first.decision_rate, first.decision_burst, clock)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics_text)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/decision", decision)
    app.router.add_post("/v1/cache/purge", purge)
    from gateway import admin_journal  # it reads this module's keys: imported once both exist

    admin_journal.add_routes(app)
    return app


@web.middleware
async def json_errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    try:
        return await handler(request)
    except GatewayError as err:
        return err.json_response()
    except web.HTTPException as exc:  # aiohttp's own 404 and 405, in our JSON shape
        if exc.status < 400:
            raise
        kind = exc.reason.lower().replace(" ", "_")
        return web.json_response({"error": {"type": kind, "message": exc.reason}}, status=exc.status)


@web.middleware
async def authorized(request: web.Request, handler: Callable) -> web.StreamResponse:
    token = request.app[CONFIG_OF]().admin.token
    if token and request.path not in OPEN:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise Unauthorized("a bearer token is required (admin.token)")
    return await handler(request)


def _decider(request: web.Request) -> Any:
    decider = request.app[DECIDER_OF]()
    if decider is None:
        raise EngineUnavailable("the engine is not running")
    return decider


async def health(request: web.Request) -> web.Response:
    try:
        report = _decider(request).health()
    except EngineUnavailable as err:
        report = {"status": "unavailable", "reason": err.message}
    origin = request.app[ORIGIN]
    if origin is not None:  # reported, not a 503: every replica shares the origin, so none would be better
        report["origin"] = origin.report()
    return web.json_response(report, status=200 if report.get("status") == "ok" else 503)


async def metrics_text(request: web.Request) -> web.Response:
    from gateway.metrics import CONTENT_TYPE

    metrics = request.app[METRICS]
    if metrics is None:
        raise EngineUnavailable("no metrics: the admin app was built without a proxy")
    return web.Response(body=metrics.scrape(), headers={"Content-Type": CONTENT_TYPE})


async def purge(request: web.Request) -> web.Response:
    """Forget stored responses: one URL (path and query, every host and variant) or a path prefix."""
    doc = await _json(request)
    wanted = {k: v for k, v in doc.items() if k in ("url", "prefix")}
    if set(doc) - set(wanted) or len(wanted) != 1:
        raise Unprocessable('expected exactly one of "url" or "prefix"')
    (name, value), = wanted.items()
    if not isinstance(value, str) or not value.startswith("/"):
        raise Unprocessable(f"{name} must be a path starting with /, got {value!r}")
    edge = request.app[EDGE]
    purged = 0 if edge is None else edge.purge(**{name: value})
    log.info("edge cache purge by %s: %d entries", name, purged)  # the URL may carry a query: not logged
    return web.json_response({"purged": purged})


async def _json(request: web.Request) -> dict:
    raw = await _body(request)
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ClientError(f"body is not valid JSON: {err}") from None
    if not isinstance(doc, dict):
        raise ClientError("body must be a JSON object")
    return doc


async def _body(request: web.Request) -> bytes:
    limit = request.app[CONFIG_OF]().admin.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"body of {request.content_length} bytes exceeds admin.max_body_bytes ({limit})")
    raw = await prefix(request.content, limit + 1)
    if len(raw) > limit:
        raise PayloadTooLarge(f"body exceeds admin.max_body_bytes ({limit})")
    coding = request.headers.get("Content-Encoding", "")
    if coding.strip():  # request bodies reach handlers as sent (GatewayRunner); `identity` leaves them so
        inflated = inflate(raw, coding, limit + 1)
        if inflated is None:
            raise ClientError(f"body: Content-Encoding {coding!r} is not gzip or deflate, or does not inflate")
        if len(inflated) > limit:
            raise PayloadTooLarge(f"body exceeds admin.max_body_bytes ({limit}) once inflated")
        raw = inflated
    return raw


async def models(request: web.Request) -> web.Response:
    return web.json_response({"models": _decider(request).models()})


async def decision(request: web.Request) -> web.Response:
    raw = await _body(request)
    settings = request.app[CONFIG_OF]().admin
    wanted = decision_request(raw, settings.max_batch)
    bucket = request.app[BUCKET]
    if (bucket.rate, bucket.burst) != (settings.decision_rate, settings.decision_burst):  # changed by a reload
        bucket.rate, bucket.burst = settings.decision_rate, float(settings.decision_burst)
    if wait := bucket.take(len(wanted.items)):
        raise TooManyRequests(f"over admin.decision_rate ({settings.decision_rate:g} inputs/s)", retry_after=wait)
    decider = _decider(request)
    # max_tokens is checked but not applied: the engine's token budget is set per model at startup
    # (model.max_tokens) and Decider.decide() takes no per-request budget.
    try:
        verdicts = await asyncio.gather(*(decider.decide(f) for f in wanted.items))
    except Exception as err:  # the decider answers every request by design; this is a bug or a shutdown
        log.exception("decision API: the engine failed")
        raise EngineUnavailable(f"the engine failed: {err}") from None
    if wanted.batch:
        return web.json_response({"decisions": [v.to_json() for v in verdicts]})
    return web.json_response({"decision": verdicts[0].to_json()})
