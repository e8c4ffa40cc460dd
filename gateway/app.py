"""Wiring: build_app(config) for the proxy listener, build_admin_app(config, proxy) for the admin one.

The long-lived objects are made once, in cleanup_ctx, and closed on shutdown: one HTTP client session
towards the origin, the decision journal's writer (when journal.path is set: one thread, restart-only) and
one Decider (its model, cache, breaker and shadow model inside), kept in a Holder (holder.py) with the
config it was built from, so that `reload()` can swap both whole. The edge response cache, the
origin's passive health and the metrics hold no connections or threads, so they are made with the app
itself. The admin app owns nothing: it reads the proxy app's Holder, metrics, edge cache and origin
health, so both listeners see the same state, and nothing on the admin listener is reachable through the
proxy's (every path there goes to the origin).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator, Callable

import aiohttp
from aiohttp import web

from gateway import admin, authz, holder, observe
from gateway.config import Config
from gateway.edgecache import EdgeCache
from gateway.errors import ConfigError, GatewayError
from gateway.exchange import CLOCK, CONFIG, EDGE, HOLDER, JOURNAL, METRICS, ORIGIN, SESSION
from gateway.holder import Holder
from gateway.metrics import Metrics
from gateway.origin_health import OriginHealth
from gateway.pipeline import handle

log = logging.getLogger("clef.gateway")

ORIGIN_HEADER_LIMIT = 65536  # origins send large Set-Cookie and CSP headers; relay them rather than 502


def build_app(config: Config, clock: Callable[[], float] | None = None, model: Any = None) -> web.Application:
    """The proxy. `clock` drives the engine's cache and breaker, the edge cache's ages, the origin's
    passive health and the admin rate limit (tests advance a fake one); `model` replaces the bundle's
    model (tests use it to reach faults)."""
    config.require_origin()
    app = web.Application(handler_args=handler_args(config), middlewares=[every_target])
    app[CONFIG] = config
    app[CLOCK] = time.perf_counter
    app[HOLDER] = Holder(config, clock=clock)
    responses = config.cache.responses
    app[EDGE] = EdgeCache(responses, clock=clock) if responses.enabled else None
    app[ORIGIN] = OriginHealth(config.origin.fail_threshold, config.origin.down_for_s, clock=clock)
    app[METRICS] = Metrics(config, lambda: app[HOLDER].decider, app[EDGE], app[ORIGIN])
    app.cleanup_ctx.append(_client_session)
    app.cleanup_ctx.append(_journal)  # before the engine: closed after it, once the shadow's last rows are in
    app.cleanup_ctx.append(lambda app: _decider(app, clock, model))
    # With an authz listener, the same app answers it (one engine, one drain): Dispatch tells them apart
    app[authz.DISPATCH] = None if config.authz.listen is None else authz.Dispatch(handle)
    app[authz.ENTRY] = handle if app[authz.DISPATCH] is None else app[authz.DISPATCH].handle
    app.router.add_route("*", "/{tail:.*}", app[authz.ENTRY])
    return app


def handler_args(config: Config) -> dict[str, Any]:
    """aiohttp's parser limits and keep-alive timer, for either listener."""
    limits = config.limits
    return {
        "max_line_size": limits.max_line_bytes,
        "max_field_size": limits.max_field_bytes,
        "max_headers": limits.max_headers,
        "keepalive_timeout": limits.idle_timeout_s,
    }


@web.middleware
async def every_target(request: web.Request, handler: Any) -> web.StreamResponse:
    """The router answers what it cannot match (CONNECT's authority-form, OPTIONS *) with a 404 of its own;
    those too must go through handle(), to be refused and logged like any other request."""
    if request.match_info.http_exception is not None:
        return await request.app[authz.ENTRY](request)
    return await handler(request)


def build_admin_app(config: Config, proxy: web.Application) -> web.Application:
    state = proxy[HOLDER]
    return admin.build(lambda: state.config, lambda: state.decider, metrics=proxy[METRICS], edge=proxy[EDGE],
                       origin=proxy[ORIGIN], clock=state.clock)  # fmt: skip


def refusals(app: web.Application) -> Callable[[GatewayError, str], None]:
    """What protocol.py calls for a request it refused before the pipeline: the log line and the counts."""
    return lambda err, client: observe.refused(app[HOLDER].config, app[METRICS], err, client)


async def reload(app: web.Application, config: Config, model: Any = None) -> bool:
    """SIGHUP: the new config's engine built, checked and warmed, then swapped in (holder.reload)."""
    state: Holder = app[HOLDER]
    before = state.config.origin.url
    if not await holder.reload(state, config, lambda c: create_decider(c, state.clock, model)):
        return False
    app[ORIGIN].configure(config.origin.fail_threshold, config.origin.down_for_s, config.origin.url != before)
    app[METRICS].configured(config, state.current.number)
    return True


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


async def _journal(app: web.Application) -> AsyncIterator[None]:
    """The decision journal's writer thread (journal.path), when set; a file that cannot be opened stops
    the start like any other config error."""
    from engine.journal import JournalError
    from engine.journal_writer import JournalWriter

    settings = app[CONFIG].journal
    writer = None
    if settings.enabled:
        try:
            writer = await asyncio.to_thread(JournalWriter, settings.settings())
        except JournalError as err:
            raise ConfigError(f"journal.path: {err}") from None
    app[JOURNAL] = app[METRICS].journal = writer
    yield
    if writer is not None:
        await asyncio.to_thread(writer.close)  # what is queued is written first


async def _decider(app: web.Application, clock: Callable[[], float] | None, model: Any) -> AsyncIterator[None]:
    config = app[CONFIG]
    # Loading the bundle reads and warms a model: off the event loop
    decider = await asyncio.to_thread(create_decider, config, clock, model)
    state: Holder = app[HOLDER]
    state.current.decider = decider
    await decider.start()  # a Redis shared cache, if set, is checked once (it never stops the start)
    health = decider.health()
    if health["status"] != "ok":
        log.error("engine: %s", health.get("reason", "unavailable"))
    yield
    await state.close()  # this decider, and a retired one whose last requests were cut by the shutdown


def create_decider(config: Config, clock: Callable[[], float] | None = None, model: Any = None) -> Any:
    """The engine, or ConfigError when the ruleset is broken: the rules are the last line of defence,
    so the gateway does not start without them (a broken model only degrades it to the rules)."""
    from engine.decide import Decider
    from rules.engine import RuleError

    try:
        return Decider.create(config.engine_settings(), clock=clock, model=model)
    except RuleError as err:
        raise ConfigError(f"rules: {err}") from None
