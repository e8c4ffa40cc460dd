"""Wiring: build_app(config) for the proxy listener, build_admin_app(config, proxy) for the admin one.

The long-lived objects are made once, in cleanup_ctx, and closed on shutdown: one HTTP client session
towards the origin and one Decider (its model, cache and breaker inside). The edge response cache and the
metrics hold no connections or threads, so they are made with the app itself. The admin app owns nothing:
it reads the proxy app's Decider, metrics and edge cache, so both listeners see the same state, and nothing
on the admin listener is reachable through the proxy's (every path there goes to the origin).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator, Callable

import aiohttp
from aiohttp import web

from gateway import admin
from gateway.config import Config
from gateway.edgecache import EdgeCache
from gateway.errors import ConfigError
from gateway.exchange import CLOCK, CONFIG, DECIDER, EDGE, METRICS, SESSION
from gateway.metrics import Metrics
from gateway.pipeline import handle

log = logging.getLogger("clef.gateway")

ORIGIN_HEADER_LIMIT = 65536  # origins send large Set-Cookie and CSP headers; relay them rather than 502


def build_app(config: Config, clock: Callable[[], float] | None = None, model: Any = None) -> web.Application:
    """The proxy. `clock` drives the engine's cache and breaker and the edge cache's ages (tests advance a
    fake one); `model` replaces the bundle's model (tests use it to reach faults)."""
    config.require_origin()
    limits = config.limits
    app = web.Application(
        handler_args={
            "max_line_size": limits.max_line_bytes,
            "max_field_size": limits.max_field_bytes,
            "max_headers": limits.max_headers,
        }
    )
    app[CONFIG] = config
    app[CLOCK] = time.perf_counter
    responses = config.cache.responses
    app[EDGE] = EdgeCache(responses, clock=clock) if responses.enabled else None
    app[METRICS] = Metrics(config, lambda: app.get(DECIDER), app[EDGE])
    app.cleanup_ctx.append(_client_session)
    app.cleanup_ctx.append(lambda app: _decider(app, clock, model))
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def build_admin_app(config: Config, proxy: web.Application) -> web.Application:
    return admin.build(config, lambda: proxy.get(DECIDER), metrics=proxy[METRICS], edge=proxy[EDGE])


async def _client_session(app: web.Application) -> AsyncIterator[None]:
    origin = app[CONFIG].origin
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=origin.max_connections),
        timeout=aiohttp.ClientTimeout(
            total=None,  # a long download is fine as long as bytes keep coming
            connect=origin.connect_timeout_s,
            sock_connect=origin.connect_timeout_s,
            sock_read=origin.timeout_s,
        ),
        auto_decompress=False,  # Content-Encoding passes through untouched
        cookie_jar=aiohttp.DummyCookieJar(),  # one client's Set-Cookie must never reach another's request
        trust_env=False,  # proxy variables in the environment must not reroute origin traffic
        max_line_size=ORIGIN_HEADER_LIMIT,
        max_field_size=ORIGIN_HEADER_LIMIT,
    )
    app[SESSION] = session
    yield
    await session.close()


async def _decider(app: web.Application, clock: Callable[[], float] | None, model: Any) -> AsyncIterator[None]:
    config = app[CONFIG]
    # Loading the bundle reads and warms a model: off the event loop
    decider = await asyncio.to_thread(create_decider, config, clock, model)
    app[DECIDER] = decider
    await decider.start()  # a Redis shared cache, if set, is checked once (it never stops the start)
    health = decider.health()
    if health["status"] != "ok":
        log.error("engine: %s", health.get("reason", "unavailable"))
    yield
    await decider.close()


def create_decider(config: Config, clock: Callable[[], float] | None = None, model: Any = None) -> Any:
    """The engine, or ConfigError when the ruleset is broken: the rules are the last line of defence,
    so the gateway does not start without them (a broken model only degrades it to the rules)."""
    from engine.decide import Decider
    from rules.engine import RuleError

    try:
        return Decider.create(config.engine_settings(), clock=clock, model=model)
    except RuleError as err:
        raise ConfigError(f"rules: {err}") from None
