"""The proxy's one handler: every request goes parse → decide → map action → annotate → act → observe.

handle() only calls the phases in order and keeps their outputs on the Exchange; each phase is a module
of its own. A GatewayError from any phase becomes its short answer (413, 502, 504); observe writes the
log line in every case, including a client that went away (499).
"""

from __future__ import annotations

from aiohttp import web

from gateway import act, actions, annotate, observe, parse
from gateway.errors import GatewayError
from gateway.exchange import Exchange


async def handle(request: web.Request) -> web.StreamResponse:
    ex = Exchange.begin(request)
    observe.begin(ex)
    try:
        ex.features = await parse.features(request, ex.config)
        ex.verdict = await ex.decider.decide(ex.features)
        ex.action = actions.resolve(ex.verdict, ex.route)
        ex.headers = annotate.headers(ex.action, ex.verdict, echo=ex.config.headers.echo)
        ex.response = await act.perform(ex)
        return ex.response
    except GatewayError as err:
        ex.error = err
        return err.response()
    finally:
        observe.record(ex)
