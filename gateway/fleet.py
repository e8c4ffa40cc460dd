"""The parent process of `serve --workers N` (supervisor.py runs its workers): `serve()`, and its admin
listener, which answers for all the workers as one.

Every worker has its own admin listener on a loopback port; this app, on `admin.listen`, answers for
the whole gateway by asking them:

    GET  /health          every worker's /health: 200 when all are up and report ok, else 503 with the
                          reason naming the worker; `workers` lists each one's report (pid, state,
                          restarts, and its own /health), `model` is the model they serve
    GET  /metrics         every worker's series, each with a `worker` label ("0", "1", ...), one family
                          per name, and the parent's own: clef_workers, clef_workers_up, clef_worker_up
                          and clef_worker_restarts_total. No worker's numbers stand for the whole: sum
                          them in the query (`sum without (worker) (...)`). A restarted worker's counters
                          start again at 0, which rate() reads as the counter reset it is
    POST /v1/cache/purge  sent to every worker that is up (each has its own edge cache; a worker that is
                          down has none): {"purged": total, "workers": how many answered}
    anything else         (/v1/decision, /v1/models) answered by the first worker that is up, so the
                          decision API's rate limit (admin.decision_rate) holds for the gateway as a whole

The workers check the bearer token (admin.token): the client's Authorization header goes with each
question, and a worker's 401 is the answer. /health needs none, as on a single process. Errors are the
admin API's JSON; 503 when no worker is up.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gateway import admin
from gateway import supervisor as supervisors
from gateway.config import Config
from gateway.errors import EngineUnavailable
from gateway.parse import prefix
from gateway.protocol import GatewayRunner
from gateway.server import ListenError, _listen

log = logging.getLogger("clef.supervisor")

SUPERVISOR: web.AppKey[Any] = web.AppKey("clef_supervisor", object)
SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey("clef_fleet_session", aiohttp.ClientSession)
ASK_S = 5.0  # a worker's /health or /metrics: a worker slower than this is reported unreachable
RELAY_S = 60.0  # the decision API: a batch may queue behind the model
PASSED_BACK = ("Content-Type", "Retry-After", "WWW-Authenticate", "x-clef-error")


async def serve(config: Config, argv: list[str], count: int) -> int:
    """Reserve the addresses, start `count` workers with `argv`, open the admin listener once all are up,
    and run until SIGTERM or a give-up; the exit code."""
    socks = [supervisors.reserve(config.listen)]
    addresses = {"listen": str(supervisors.bound(config.listen, socks[0]))}
    if config.authz.listen is not None:
        socks.append(supervisors.reserve(config.authz.listen))
        addresses["authz.listen"] = str(supervisors.bound(config.authz.listen, socks[-1]))
    workers, private = supervisors.workers_for(count)
    socks += private
    runner = None
    try:
        async with aiohttp.ClientSession(trust_env=False) as session:
            sup = supervisors.Supervisor(workers, lambda w: supervisors.spawn_process(w, argv, addresses),
                                         lambda w: answers(session, w), config.shutdown.grace_s)  # fmt: skip
            _on_signals(sup)
            main = asyncio.create_task(sup.run())
            ready = asyncio.create_task(sup.all_up.wait())
            await asyncio.wait({main, ready}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            if not main.done():
                try:
                    runner, admin_url = await _admin(config, sup, session)
                except ListenError:
                    sup.stop()
                    await main
                    raise
                await _started(config, addresses, admin_url, sup, session)
            return await main
    finally:
        if runner is not None:
            await runner.cleanup()
        for sock in socks:
            sock.close()


def _on_signals(sup: Any) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, sup.stop)
    loop.add_signal_handler(signal.SIGHUP, sup.hup)


async def _admin(config: Config, sup: Any, session: aiohttp.ClientSession) -> tuple[web.AppRunner, str]:
    from gateway.app import handler_args

    runner = GatewayRunner(build(sup, session), config.limits, access_log=None, shutdown_timeout=5.0,
                           **handler_args(config))  # fmt: skip
    await runner.setup()
    try:
        return runner, await _listen(runner, config.admin.listen)
    except ListenError:
        await runner.cleanup()
        raise


async def _started(config: Config, addresses: dict[str, str], admin_url: str, sup: Any,
                   session: aiohttp.ClientSession) -> None:  # fmt: skip
    model = (await worker_report(session, sup.workers[0])).get("model") or {}
    name = f"{model.get('name')}@{model.get('version')}" if model else "none (deciding on rules)"
    authz = f", authz http://{addresses['authz.listen']}" if "authz.listen" in addresses else ""
    pids = ", ".join(str(w.pid) for w in sup.workers)
    print(f"clef-gateway: proxy http://{addresses['listen']} -> {config.origin.url}, admin {admin_url}, model "
          f"{name}{authz}, workers {len(sup.workers)} (pids {pids})", file=sys.stderr, flush=True)  # fmt: skip


def build(supervisor: Any, session: aiohttp.ClientSession) -> web.Application:
    app = web.Application(middlewares=[admin.json_errors])
    app[SUPERVISOR], app[SESSION] = supervisor, session
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/cache/purge", purge)
    app.router.add_route("*", "/{tail:.*}", relay)
    return app


async def answers(session: aiohttp.ClientSession, worker: Any) -> bool:
    """Whether the worker's admin listener answers /health at all (it opens once the engine is loaded)."""
    try:
        async with session.get(worker.admin_url + "/health", timeout=aiohttp.ClientTimeout(total=1.0)) as resp:
            await resp.read()
            return True
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
        return False


async def _ask(
    session: aiohttp.ClientSession, worker: Any, path: str, headers: dict[str, str] | None = None,
    method: str = "GET", body: bytes | None = None, timeout: float = ASK_S,
) -> tuple[int, dict, bytes]:  # fmt: skip
    async with session.request(method, worker.admin_url + path, headers=headers or {}, data=body,
                               timeout=aiohttp.ClientTimeout(total=timeout)) as resp:  # fmt: skip
        return resp.status, {k: v for k, v in resp.headers.items() if k in PASSED_BACK}, await resp.read()


async def worker_report(session: aiohttp.ClientSession, w: Any) -> dict[str, Any]:
    report = {"worker": w.index, "pid": w.pid, "state": w.state, "restarts": w.restarts}
    if w.state != "up":
        return {**report, "status": "unavailable", "reason": f"worker {w.index} is {w.state}"}
    try:
        _, _, body = await _ask(session, w, "/health")
        return {**report, **json.loads(body)}
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as err:
        return {**report, "state": "unreachable", "status": "unavailable",
                "reason": f"worker {w.index} did not answer /health ({type(err).__name__})"}  # fmt: skip


async def health(request: web.Request) -> web.Response:
    sup, session = request.app[SUPERVISOR], request.app[SESSION]
    reports = await asyncio.gather(*(worker_report(session, w) for w in sup.workers))
    bad = [r for r in reports if r.get("status") != "ok"]
    out: dict[str, Any] = {"status": "ok" if not bad else "unavailable"}
    if bad:
        out["reason"] = "; ".join(f"worker {r['worker']}: {r.get('reason', r.get('status'))}" for r in bad)
    out["model"] = next((r["model"] for r in reports if r.get("model")), None)
    out["workers"] = reports
    return web.json_response(out, status=200 if not bad else 503)


async def metrics(request: web.Request) -> web.Response:
    from gateway.metrics import CONTENT_TYPE

    sup, session = request.app[SUPERVISOR], request.app[SESSION]
    auth = {"Authorization": request.headers["Authorization"]} if "Authorization" in request.headers else {}
    up = [w for w in sup.workers if w.state == "up"]
    asked = await asyncio.gather(*(_ask(session, w, "/metrics", auth) for w in up), return_exceptions=True)
    texts: dict[int, str] = {}
    for w, got in zip(up, asked):
        if isinstance(got, BaseException):
            continue  # reported by clef_worker_up; its series are missing from this scrape, not made up
        status, headers, body = got
        if status != 200:
            return web.Response(status=status, body=body, headers=headers)  # 401: the token is the worker's
        texts[w.index] = body.decode()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(merge(texts) + own_families(sup, set(texts))))
    return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE})


def merge(texts: dict[int, str]) -> list[Metric]:
    """The workers' expositions as one: each sample labelled with its worker, one family per name."""
    families: dict[str, Metric] = {}
    for index, text in sorted(texts.items()):
        for fam in text_string_to_metric_families(text):
            into = families.setdefault(fam.name, Metric(fam.name, fam.documentation, fam.type))
            for s in fam.samples:
                into.samples.append(Sample(s.name, {**s.labels, "worker": str(index)}, s.value, s.timestamp))
    return list(families.values())


def own_families(sup: Any, answered: set[int]) -> list[Metric]:
    configured = GaugeMetricFamily("clef_workers", "Worker processes configured", value=len(sup.workers))
    up = GaugeMetricFamily("clef_workers_up", "Workers up and answering", value=len(answered))
    each = GaugeMetricFamily("clef_worker_up", "1 when the worker is up and answered this scrape",
                             labels=("worker",))  # fmt: skip
    restarts = CounterMetricFamily("clef_worker_restarts", "Times the worker was started again after it exited",
                                   labels=("worker",))  # fmt: skip
    for w in sup.workers:
        each.add_metric((str(w.index),), 1 if w.index in answered else 0)
        restarts.add_metric((str(w.index),), w.restarts)
    return [configured, up, each, restarts]


class _Fixed:
    def __init__(self, families: list[Metric]):
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


async def purge(request: web.Request) -> web.Response:
    sup, session = request.app[SUPERVISOR], request.app[SESSION]
    body = await prefix(request.content, 64 * 1024 + 1)  # {"url": ...} or {"prefix": ...}: short
    up = [w for w in sup.workers if w.state == "up"]
    if not up:
        raise EngineUnavailable("no worker is up")
    headers = {k: v for k, v in request.headers.items() if k in ("Authorization", "Content-Type")}
    asked = await asyncio.gather(*(_ask(session, w, "/v1/cache/purge", headers, "POST", body) for w in up),
                                 return_exceptions=True)  # fmt: skip
    total, answered = 0, 0
    for got in asked:
        if isinstance(got, BaseException):
            continue
        status, passed, raw = got
        if status != 200:
            return web.Response(status=status, body=raw, headers=passed)
        total, answered = total + json.loads(raw)["purged"], answered + 1
    return web.json_response({"purged": total, "workers": answered})


async def relay(request: web.Request) -> web.Response:
    sup, session = request.app[SUPERVISOR], request.app[SESSION]
    worker = next((w for w in sup.workers if w.state == "up"), None)
    if worker is None:
        raise EngineUnavailable("no worker is up")
    limit = 64 << 20  # the worker applies admin.max_body_bytes; this only bounds what the parent holds
    body = await prefix(request.content, limit) if request.body_exists else None
    headers = {k: v for k, v in request.headers.items() if k in ("Authorization", "Content-Type")}
    try:
        status, passed, raw = await _ask(session, worker, request.rel_url.raw_path_qs, headers, request.method,
                                         body, RELAY_S)  # fmt: skip
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as err:
        raise EngineUnavailable(f"worker {worker.index} did not answer ({type(err).__name__})") from None
    return web.Response(status=status, body=raw, headers=passed)
