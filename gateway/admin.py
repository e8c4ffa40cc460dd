"""The admin listener: health, models and the decision API, on an address of its own.

    GET  /health        200 {"status": "ok", "model": {...}, "breaker": ...} or 503 with the reason
    GET  /v1/models     {"models": [{name, version, labels, features, ...}]}
    POST /v1/decision   {"input": ..., "max_tokens": n} → {"decision": {...}} or {"decisions": [...]}

Errors are JSON {"error": {"type", "message"}}: 400 bad JSON or types, 413 body over
`admin.max_body_bytes`, 422 an invalid input, 503 no engine. The app holds no engine of its own; it asks
the proxy app's, through `decider()`, so both listeners decide alike.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from aiohttp import web

from gateway.config import Config
from gateway.errors import EngineUnavailable, GatewayError, PayloadTooLarge
from gateway.inputs import decision_request
from gateway.parse import prefix

log = logging.getLogger("clef.gateway")

DECIDER_OF: web.AppKey[Callable[[], Any]] = web.AppKey("clef_decider_of", object)
CONFIG: web.AppKey[Config] = web.AppKey("clef_admin_config", Config)


def build(config: Config, decider: Callable[[], Any]) -> web.Application:
    app = web.Application(middlewares=[json_errors])
    app[CONFIG] = config
    app[DECIDER_OF] = decider
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/decision", decision)
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
    return web.json_response(report, status=200 if report.get("status") == "ok" else 503)


async def models(request: web.Request) -> web.Response:
    return web.json_response({"models": _decider(request).models()})


async def decision(request: web.Request) -> web.Response:
    limits = request.app[CONFIG].admin
    if request.content_length is not None and request.content_length > limits.max_body_bytes:
        raise PayloadTooLarge(
            f"body of {request.content_length} bytes exceeds admin.max_body_bytes ({limits.max_body_bytes})"
        )
    raw = await prefix(request.content, limits.max_body_bytes + 1)
    if len(raw) > limits.max_body_bytes:
        raise PayloadTooLarge(f"body exceeds admin.max_body_bytes ({limits.max_body_bytes})")
    wanted = decision_request(raw, limits.max_batch)
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
