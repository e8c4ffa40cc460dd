"""The proxy's one handler: every request goes parse → decide → map action → annotate → act → observe.

handle() only calls the phases in order and keeps their outputs on the Exchange; each phase is a module
of its own. Before them, two gates: `strict.admit` sheds the request (503 + Retry-After) when too many are
in flight, and `strict.check` refuses what HTTP/1.1 framing rules forbid (400, 431) before a byte is read
or forwarded. A GatewayError from any phase becomes its short answer (400, 408, 413, 502, 503, 504); an
unexpected exception becomes a 500 of ours whose log line has the traceback's frames but not its message
(it could quote the request). observe writes the access-log line in every case, including a client that
went away (499).
"""

from __future__ import annotations

import logging
import traceback

from aiohttp import web

from gateway import act, actions, annotate, observe, parse, strict
from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.protocol import close_when_answered

log = logging.getLogger("clef.gateway")


async def handle(request: web.Request) -> web.StreamResponse:
    ex = Exchange.begin(request)
    observe.begin(ex)
    try:
        strict.admit(ex.holder, ex.config.limits)
        if (checked := strict.check(request, ex.config.limits)) is not request:
            ex.retarget(request := checked)
        ex.deadline = parse.Deadline(ex.config.limits)
        ex.features = await parse.features(request, ex.config, ex.deadline)
        ex.verdict = await ex.decider.decide(ex.features)
        ex.action = actions.resolve(ex.verdict, ex.route)
        ex.headers = annotate.headers(ex.action, ex.verdict, echo=ex.config.headers.echo)
        ex.response = await act.perform(ex)
        return ex.response
    except GatewayError as err:
        ex.error = err
        if err.closes and not err.lingers:
            close_when_answered(request)
        return err.response(ex.headers.client if ex.headers is not None else ())
    except Exception as err:  # a bug: the client still gets an answer of ours, and the log the frames
        frames = "".join(traceback.format_tb(err.__traceback__))
        log.error("unhandled %s in the pipeline:\n%s", type(err).__name__, frames)
        ex.error = GatewayError(f"internal error ({type(err).__name__})")
        if request.writer.output_size > 0 and request.transport is not None:
            request.transport.close()  # a response had started: cut it rather than let it look complete
        return ex.error.response()
    finally:
        ex.finish()
        observe.record(ex)
