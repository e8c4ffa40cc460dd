"""authz: the nginx `auth_request` / Envoy `ext_authz` endpoint: a check request in, a decision out.

Input: a check request on the `authz.listen` listener, describing a request that a proxy in front of the
application received:

- nginx `auth_request`: a subrequest carrying the original method and target in X-Original-Method and
  X-Original-URI (`proxy_set_header`), the original headers, and no body (`proxy_pass_request_body off`);
- Envoy `ext_authz` (HTTP service): the original method, the original path and query behind
  `authz.path_prefix` (Envoy's `path_prefix`), the headers `allowed_headers` lets through, and the
  buffered body when `with_request_body` is set (`x-envoy-auth-partial-body: true` when it is only part).

Output: 200 with the x-clef-* decision headers (for nginx's `auth_request_set $clef_decision
$upstream_http_x_clef_decision;`, for Envoy's `allowed_upstream_headers`), or 403 with them and the route's
block body when the action is `block` (403, whatever `block_response.status` says: nginx's auth_request
takes only 2xx, 401 and 403). The action map, routes and detect mode apply as on the proxy listener: a
block on a detect route answers 200 with `x-clef-mode: detect`. One access-log line and the metrics, as
for a proxied request, with the original method and path.

The engine sees the original method, path, query and headers, less what the proxy added for the check
(x-original-*, x-envoy-*, x-real-ip and the hop-by-hop headers), and the body when there is one. The
client address (for operator overrides by network) is X-Real-IP, else the last X-Forwarded-For entry,
else the peer: only the fronting proxy should reach this listener, so what it says is believed.

Short-circuits: load shedding past limits.max_in_flight (503), a body over limits.max_body_bytes (413), a
method or target that is not one (400). nginx answers its client 500 for any of those (auth_request takes
only 2xx, 401, 403); Envoy denies with them.

The proxy app answers both listeners: `Dispatch` sends requests that came in on the authz port here, so
both share one engine, one drain at shutdown and the same connection limits.
"""

from __future__ import annotations

import logging
import re
import traceback
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from engine.features import Features
from gateway import actions, annotate, observe, parse, strict
from gateway.errors import ClientError, GatewayError, PayloadTooLarge
from gateway.exchange import Exchange
from gateway.hops import end_to_end
from gateway.protocol import close_when_answered

log = logging.getLogger("clef.gateway")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 §5.6.2: what a method may be
ADDED = ("x-original-", "x-envoy-")  # what the fronting proxy adds to a check: not the client's request
ADDED_NAMES = frozenset({"x-real-ip"})
ENTRY: web.AppKey[Any] = web.AppKey("clef_entry", object)  # the proxy app's handler: handle or Dispatch.handle
DISPATCH: web.AppKey[Any] = web.AppKey("clef_authz_dispatch", object)  # the Dispatch, when the listener is on


class Dispatch:
    """The proxy app's handler when the authz listener is on: requests that arrived on its port are
    checks, the rest go to the proxy pipeline. server.running adds the port once the listener is bound."""

    def __init__(self, proxy: Handler):
        self.proxy = proxy
        self.ports: set[int] = set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        transport = request.transport
        if transport is not None and transport.get_extra_info("sockname")[1] in self.ports:
            return await check(request)
        return await self.proxy(request)


@dataclass(frozen=True)
class Original:
    """The request the fronting proxy asks about, as it describes it."""

    method: str
    target: str  # origin-form: path and query
    headers: tuple[tuple[str, str], ...]
    client: str
    partial_body: bool  # Envoy buffered only part of the body (x-envoy-auth-partial-body: true)

    @classmethod
    def of(cls, request: web.BaseRequest, path_prefix: str) -> "Original":
        # Latin-1 maps every byte to one character, as parse.raw_headers does: nothing lost or refused
        sent = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers]
        given = {k.lower(): v for k, v in sent}
        method = given.get("x-original-method", request.method).strip().upper()
        if not TOKEN.fullmatch(method):
            raise ClientError("the original method is not an HTTP method token")
        if "x-original-uri" in given:  # nginx
            target = given["x-original-uri"].strip()
        else:  # Envoy: the check request's path is path_prefix + the original path and query
            target = request.raw_path
            if path_prefix:
                if not target.startswith(path_prefix + "/"):
                    raise ClientError("the check request's path does not start with authz.path_prefix")
                target = target[len(path_prefix) :]
        return cls(method, origin_form(target), _kept(sent), _client(given, request.remote), _partial(given))


def origin_form(target: str) -> str:
    """The target as a path and query: absolute-form (a client may send one to a proxy) loses its
    scheme and authority; anything that is neither is refused."""
    if target.startswith("/"):
        return target
    if re.match(r"(?i)https?://", target):
        try:
            url = URL(target, encoded=True)
        except ValueError:
            raise ClientError("the original target is not a URL") from None
        return url.raw_path_qs or "/"
    raise ClientError("the original target is not a path")


def _kept(sent: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (k, v) for k, v in end_to_end(sent) if not k.lower().startswith(ADDED) and k.lower() not in ADDED_NAMES
    )


def _client(given: dict[str, str], peer: str | None) -> str:
    if real := given.get("x-real-ip", "").strip():
        return real
    chain = [hop.strip() for hop in given.get("x-forwarded-for", "").split(",") if hop.strip()]
    return chain[-1] if chain else (peer or "")


def _partial(given: dict[str, str]) -> bool:
    return given.get("x-envoy-auth-partial-body", "").strip().lower() == "true"


async def check(request: web.Request) -> web.StreamResponse:
    ex = Exchange.begin(request)
    observe.begin(ex)
    try:
        strict.admit(ex.holder, ex.config.limits)
        original = Original.of(request, ex.config.authz.path_prefix)
        ex.retarget(_as_sent(request, original))  # the log line and the route: the original request's
        ex.deadline = parse.Deadline(ex.config.limits)
        ex.features = await features(request, original, ex.config.limits.max_body_bytes,
                                     ex.config.model.inspect_bytes, ex.deadline)  # fmt: skip
        ex.verdict = await ex.decider.decide(ex.features)
        ex.action = actions.resolve(ex.verdict, ex.route)
        ex.headers = annotate.headers(ex.action, ex.verdict, echo=True)
        ex.response = answer(ex)
        return ex.response
    except GatewayError as err:
        ex.error = err
        if err.closes and not err.lingers:
            close_when_answered(request)
        return err.response(ex.headers.client if ex.headers is not None else ())
    except Exception as err:  # a bug: an answer of ours all the same, and the frames in the log
        frames = "".join(traceback.format_tb(err.__traceback__))
        log.error("unhandled %s in the authz check:\n%s", type(err).__name__, frames)
        ex.error = GatewayError(f"internal error ({type(err).__name__})")
        return ex.error.response()
    finally:
        ex.finish()
        observe.record(ex)


def _as_sent(request: web.Request, original: Original) -> web.Request:
    try:
        url = URL(original.target, encoded=True)
    except ValueError:
        raise ClientError("the original target is not a path") from None
    return request.clone(method=original.method, rel_url=url, remote=original.client)


async def features(
    request: web.Request, original: Original, limit: int | None, inspect_bytes: int, deadline: parse.Deadline
) -> Features:
    declared = request.content_length
    if limit is not None and declared is not None and declared > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes exceeds limits.max_body_bytes ({limit})")
    body, size = b"", 0
    if request.body_exists:
        body = await parse.prefix(request.content, inspect_bytes, deadline)
        whole = request.content.at_eof()
        size = len(body) if whole else (declared if declared is not None else len(body) + 1)
    if original.partial_body:
        size = max(size, len(body) + 1)  # Envoy cut it: the engine must know it saw only part
    path, _, query = original.target.partition("?")
    return Features.build(method=original.method, path=path, query=query, headers=original.headers, body=body,
                          body_size=size, client=original.client)  # fmt: skip


def answer(ex: Exchange) -> web.Response:
    headers: CIMultiDict[str] = CIMultiDict(ex.headers.upstream)
    if ex.action.blocks:
        block = ex.action.block_response
        headers["Content-Type"] = block.content_type
        return web.Response(status=403, body=block.body.encode("utf-8"), headers=headers)
    return web.Response(status=200, headers=headers)
