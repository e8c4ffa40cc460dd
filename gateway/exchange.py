"""Exchange: the state of one request on its way through the phases.

handle() fills it in order: features, verdict, action, headers, response (or error). Each of those is
stamped with the clock when it is set, so observe can say how long deciding took without the phases
timing themselves. act adds what only it knows: when and how the origin answered, what the edge cache did
and how many bytes went by.

The config and decider come from the app's Holder, once, at begin(): a reload while the request is in
flight does not change them under it, and `finish()` tells the Holder the request is done.

Each request gets an `id`, unique across processes and restarts (a random prefix per process, then a
counter): the access-log line and the decision journal carry it, so a logged request's journal entry can
be found.
"""

from __future__ import annotations

import itertools
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from aiohttp import ClientSession, web

from gateway.config import Config, Route

if TYPE_CHECKING:
    from engine.features import Features
    from engine.verdict import Verdict
    from gateway.actions import Action
    from gateway.annotate import Annotations
    from gateway.errors import GatewayError

CONFIG: web.AppKey[Config] = web.AppKey("clef_config", Config)  # the config the app was built with
HOLDER: web.AppKey[Any] = web.AppKey("clef_holder", object)  # gateway.holder.Holder: the current config and decider
ORIGIN: web.AppKey[Any] = web.AppKey("clef_origin_health", object)  # gateway.origin_health.OriginHealth
SESSION: web.AppKey[ClientSession] = web.AppKey("clef_session", ClientSession)
CLOCK: web.AppKey[Callable[[], float]] = web.AppKey("clef_clock", object)
EDGE: web.AppKey[Any] = web.AppKey("clef_edge_cache", object)  # gateway.edgecache.EdgeCache, or None when off
METRICS: web.AppKey[Any] = web.AppKey("clef_metrics", object)  # gateway.metrics.Metrics
JOURNAL: web.AppKey[Any] = web.AppKey("clef_journal", object)  # engine.journal_writer.JournalWriter, or None when off

STAMPED = frozenset({"features", "verdict", "action", "headers", "response"})


class _Ids:
    """Request ids: 12 random hex digits per process, then a hex counter. A forked child draws its own."""

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self.prefix, self.count = secrets.token_hex(6), itertools.count(1)

    def __call__(self) -> str:
        return f"{self.prefix}{next(self.count):x}"


request_id = _Ids()


@dataclass(eq=False, init=False)
class Exchange:
    request: web.Request
    config: Config
    decider: Any
    session: ClientSession | None
    clock: Callable[[], float] = time.perf_counter
    edge: Any = None  # the edge response cache, for `cache` actions
    metrics: Any = None
    origin: Any = None  # the origin's passive health, asked before and told after each attempt
    holder: Any = None
    journal: Any = None  # the decision journal's writer, when journal.path is set
    id: str = ""  # this request's id: in the access log and the journal
    generation: Any = None  # the Holder's Generation this request entered with
    deadline: Any = None  # parse.Deadline: the body's time limits, from its first byte to its last
    stamps: dict[str, float] = field(default_factory=dict)  # set by __init__, before any stamped field
    started: float = 0.0
    route: Route | None = None
    features: Features | None = None
    verdict: Verdict | None = None
    action: Action | None = None
    headers: Annotations | None = None
    response: web.StreamResponse | None = None
    error: GatewayError | None = None
    upstream_s: float | None = None  # from sending the request to the origin's response headers
    upstream_status: int | None = None  # the origin's status, when it answered
    cache_status: str = "BYPASS"  # what the edge cache did: HIT, MISS, EXPIRED, REVALIDATED, STALE, BYPASS
    bytes_in: int = 0  # request body bytes read from the client
    bytes_out: int = 0  # response body bytes written to the client
    body_error: GatewayError | None = None  # what stopped the client's body while it streamed to the origin

    def __init__(
        self, request: web.Request, config: Config, decider: Any, session: ClientSession | None,
        clock: Callable[[], float] = time.perf_counter, **values: Any,
    ) -> None:  # fmt: skip
        # Straight into __dict__: nothing is stamped at birth, and every field left out reads its class
        # default (all immutable), so a request pays for a few assignments, not one __setattr__ per field.
        unknown = values.keys() - self.__dataclass_fields__.keys()
        if unknown:
            raise TypeError(f"Exchange has no field {', '.join(sorted(unknown))}")
        self.__dict__.update(request=request, config=config, decider=decider, session=session, clock=clock,
                             stamps={}, **values)  # fmt: skip

    @classmethod
    def begin(cls, request: web.Request) -> "Exchange":
        app = request.app
        holder = app.get(HOLDER)
        generation = holder.enter() if holder is not None else None
        config = generation.config if generation is not None else app[CONFIG]
        clock = app.get(CLOCK, time.perf_counter)
        return cls(
            request=request,
            config=config,
            decider=generation.decider if generation is not None else None,
            session=app.get(SESSION),
            clock=clock,
            edge=app.get(EDGE),
            metrics=app.get(METRICS),
            origin=app.get(ORIGIN),
            holder=holder,
            journal=app.get(JOURNAL),
            id=request_id(),
            generation=generation,
            route=config.route(request.raw_path.partition("?")[0]),
            started=clock(),
        )

    def retarget(self, request: web.Request) -> None:
        """The same request with its target rewritten (absolute-form to origin-form): route it again."""
        self.request = request
        self.route = self.config.route(request.raw_path.partition("?")[0])

    def finish(self) -> None:
        if self.generation is not None:
            self.holder.leave(self.generation)
            self.generation = None

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in STAMPED and value is not None:
            self.stamps[name] = self.clock()

    @property
    def decision_s(self) -> float | None:
        if "verdict" in self.stamps and "features" in self.stamps:
            return self.stamps["verdict"] - self.stamps["features"]
        return None

    @property
    def status(self) -> int:
        """What the client got: the response's status, the error's, or 499 when the client went away first."""
        if self.response is not None:
            return self.response.status
        if self.error is not None:
            return self.error.status
        return 499
