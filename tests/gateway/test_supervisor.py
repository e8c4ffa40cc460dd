"""The parent of several workers, in process: when a worker is restarted and when the parent gives up
(fake processes, the fake clock), how many workers `null` means (cgroup quotas), and the parent's admin
listener answering for the workers (in-process stand-ins for their admin listeners)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket

import pytest
from aiohttp import web

from gateway import fleet, supervisor
from gateway.config import Address
from gateway.config_serve import cgroup_cpus, worker_count
from gateway.supervisor import GIVE_UP_AFTER, Backoff, Supervisor, Worker


@pytest.mark.parametrize(
    "lives, delays",
    [
        ([60, 60, 60], [0.5, 0.5, 0.5]),  # each had served a while: the same short wait every time
        ([1, 1, 1, 1], [0.5, 1.0, 2.0, 4.0]),  # dying at once: twice as long each time
        ([1, 1, 60, 1], [0.5, 1.0, 0.5, 0.5]),  # a good run in between starts the count again
        ([1, 1, 1, 1, 1], [0.5, 1.0, 2.0, 4.0, None]),  # the fifth quick death in a row: give up
    ],
)
def test_backoff(clock, lives, delays):
    backoff = Backoff(clock)
    got = []
    for life in lives:
        started = clock()
        clock.advance(life)
        got.append(backoff.died(started))
    assert got == delays


class FakeProcess:
    """A worker process that exits when told to, or on the signals a worker obeys."""

    pids = iter(range(1000, 2000))

    def __init__(self, code_at_once: int | None = None):
        self.pid = next(self.pids)
        self.returncode: int | None = None
        self.signals: list[int] = []
        self.done = asyncio.Event()
        if code_at_once is not None:
            self.exit(code_at_once)

    def exit(self, code: int) -> None:
        self.returncode = code
        self.done.set()

    async def wait(self) -> int:
        await self.done.wait()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)
        if sig == signal.SIGTERM:
            self.exit(0)

    def kill(self) -> None:
        self.exit(-9)


class Fleet:
    """A Supervisor over fake processes: `exits` says what each new process does (None: runs)."""

    def __init__(self, clock, count: int = 2, exits: list[int | None] | None = None, up: bool = True):
        self.clock, self.exits, self.up = clock, list(exits or []), up
        self.procs: list[FakeProcess] = []
        self.slept: list[float] = []
        workers = [Worker(i, Address("127.0.0.1", 1), Backoff(clock)) for i in range(count)]
        self.sup = Supervisor(workers, self.spawn, self.probe, grace_s=1.0, clock=clock, sleep=self.sleep)

    async def spawn(self, w: Worker) -> FakeProcess:
        proc = FakeProcess(self.exits.pop(0) if self.exits else None)
        self.procs.append(proc)
        return proc

    async def probe(self, w: Worker) -> bool:
        return self.up

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.clock.advance(seconds)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_worker_that_dies_is_started_again(clock):
    f = Fleet(clock, count=2)
    run = asyncio.create_task(f.sup.run())
    await asyncio.wait_for(f.sup.all_up.wait(), 1)
    clock.advance(60)
    f.procs[0].exit(-9)  # killed after a minute of serving
    await settle()
    w0 = f.sup.workers[0]
    assert (len(f.procs), w0.restarts, w0.state, f.slept) == (3, 1, "up", [0.5])
    f.sup.hup()
    assert [p.signals for p in f.procs] == [[], [signal.SIGHUP], [signal.SIGHUP]]
    f.sup.stop()
    assert await asyncio.wait_for(run, 1) == 0
    assert [w.state for w in f.sup.workers] == ["stopped", "stopped"]
    assert f.procs[1].signals[-1] == f.procs[2].signals[-1] == signal.SIGTERM


async def test_repeated_quick_deaths_give_up_and_stop_the_others(clock, caplog):
    f = Fleet(clock, count=2)
    run = asyncio.create_task(f.sup.run())
    await asyncio.wait_for(f.sup.all_up.wait(), 1)
    clock.advance(60)
    f.exits = [1] * GIVE_UP_AFTER  # every restart of worker 0 dies at once
    f.procs[0].exit(1)
    assert await asyncio.wait_for(run, 1) == 1
    assert f.slept == [0.5, 0.5, 1.0, 2.0, 4.0]  # after a minute's serving, then quick deaths; the fifth: no more
    assert f.procs[1].signals == [signal.SIGTERM]  # the healthy worker was stopped
    assert "worker 0 died 5 times in a row within 10s of starting (last exit 1); giving up" in caplog.text


@pytest.mark.parametrize("code, exit_code", [(2, 2), (1, 1), (-11, 1)])
async def test_a_worker_that_cannot_start_ends_it_at_once(clock, caplog, code, exit_code):
    f = Fleet(clock, count=2, exits=[code], up=False)
    assert await asyncio.wait_for(f.sup.run(), 1) == exit_code
    assert f.slept == [] and all(p.returncode is not None for p in f.procs)  # none restarted, none left running
    assert f"worker 0 could not start (exit {code})" in caplog.text


async def test_a_worker_that_cannot_be_run_stops_the_others(clock, caplog):
    f = Fleet(clock, count=2)
    spawn = f.spawn

    async def exec_fails(w: Worker) -> FakeProcess:
        if w.index == 1:
            raise OSError(8, "Exec format error")
        return await spawn(w)

    f.sup.spawn = exec_fails
    assert await asyncio.wait_for(f.sup.run(), 1) == 1
    assert all(p.returncode is not None for p in f.procs)
    assert "worker 1 could not be run: OSError" in caplog.text


async def test_a_worker_that_outlives_its_grace_is_killed(clock):
    f = Fleet(clock, count=1)
    f.sup.grace_s = -supervisor.KILL_AFTER_S + 0.01  # the kill comes 10 ms after SIGTERM
    run = asyncio.create_task(f.sup.run())
    await asyncio.wait_for(f.sup.all_up.wait(), 1)
    f.procs[0].send_signal = lambda sig: None  # deaf to SIGTERM
    f.sup.stop()
    assert await asyncio.wait_for(run, 2) == 1 and f.procs[0].returncode == -9


@pytest.mark.parametrize(
    "files, cpus",
    [
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "200000 100000\n"}, 2),
        ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs: the second worker has half a core
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),  # cgroup v1, no quota
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),
        ({}, None),
    ],
)
def test_cgroup_quota(tmp_path, files, cpus):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpus(tmp_path) == cpus


def test_worker_count(tmp_path):
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert worker_count(3, tmp_path) == 3  # as configured
    assert worker_count(None, tmp_path) == 1  # one CPU's quota, however many cores the machine has


def test_the_parent_tells_a_worker_its_addresses(monkeypatch):
    assert supervisor.overrides() == {}
    told = {"index": 1, "parent": 1, "listen": "127.0.0.1:8080", "admin.listen": "127.0.0.1:4000"}
    monkeypatch.setenv(supervisor.ENV, json.dumps(told))
    assert supervisor.overrides() == {"workers": 1, "listen": "127.0.0.1:8080", "admin.listen": "127.0.0.1:4000"}


def test_a_reserved_port_takes_no_connection_and_no_one_else_binds_it():
    sock = supervisor.reserve(Address("127.0.0.1", 0))
    port = sock.getsockname()[1]
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))  # without SO_REUSEPORT: taken
        with socket.socket() as worker:  # a worker binds it with SO_REUSEPORT and listens
            worker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            worker.bind(("127.0.0.1", port))
            worker.listen()
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        sock.close()


# -- the parent's admin listener ----------------------------------------------------------------------

HEAD = "# HELP clef_requests_total Requests\n# TYPE clef_requests_total counter\n"
METRICS = {
    0: HEAD + 'clef_requests_total{status="200"} 3.0\n',
    1: HEAD + 'clef_requests_total{status="200"} 5.0\nclef_requests_total{status="403"} 1.0\n',
}


def test_metrics_merge_labels_every_sample_with_its_worker():
    (family,) = fleet.merge(METRICS)
    assert family.name == "clef_requests" and family.type == "counter"
    assert [(s.labels, s.value) for s in family.samples] == [
        ({"status": "200", "worker": "0"}, 3.0), ({"status": "200", "worker": "1"}, 5.0),
        ({"status": "403", "worker": "1"}, 1.0),
    ]  # fmt: skip


def stand_in(index: int, health: dict, status: int = 200, token: str = "") -> web.Application:
    """What a worker's admin listener answers, enough for the parent to ask it."""
    app = web.Application()
    purged = {"n": index + 1}

    def authorized(request: web.Request) -> bool:
        return not token or request.headers.get("Authorization") == f"Bearer {token}"

    async def metrics(request: web.Request) -> web.Response:
        if not authorized(request):
            return web.json_response({"error": {"type": "unauthorized"}}, status=401)
        return web.Response(text=METRICS[index])

    async def purge(request: web.Request) -> web.Response:
        return web.json_response({"purged": purged["n"]})

    async def decision(request: web.Request) -> web.Response:
        return web.json_response({"worker": index, "got": (await request.json())["input"]})

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response(health, status=status)

    app.router.add_get("/health", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/cache/purge", purge)
    app.router.add_post("/v1/decision", decision)
    return app


@pytest.fixture
async def parent(aiohttp_server, aiohttp_client):
    async def make(*healths, token: str = "", states=("up", "up")):
        workers = []
        for i, (health, status) in enumerate(healths):
            server = await aiohttp_server(stand_in(i, health, status, token))
            w = Worker(i, Address("127.0.0.1", server.port), Backoff(), state=states[i])
            w.proc = FakeProcess()
            workers.append(w)
        sup = Supervisor(workers, None, None, grace_s=1.0)
        client = await aiohttp_client(web.Application())  # a session for the parent to ask with
        return await aiohttp_client(fleet.build(sup, client.session)), workers

    return make


OK = {"status": "ok", "model": {"name": "m", "version": "1"}, "breaker": "closed"}


async def test_health_is_ok_only_when_every_worker_is(parent):
    client, workers = await parent((OK, 200), (OK, 200))
    resp = await client.get("/health")
    body = await resp.json()
    assert resp.status == 200 and body["model"] == OK["model"]
    assert [(w["worker"], w["pid"], w["state"], w["breaker"]) for w in body["workers"]] == [
        (0, workers[0].pid, "up", "closed"), (1, workers[1].pid, "up", "closed")]  # fmt: skip

    workers[1].state = "down"  # it died; the parent is about to start it again
    resp = await client.get("/health")
    body = await resp.json()
    assert resp.status == 503 and body["reason"] == "worker 1: worker 1 is down"
    assert body["workers"][1]["status"] == "unavailable"


async def test_health_names_the_worker_whose_engine_is_degraded(parent):
    degraded = {**OK, "status": "unavailable", "reason": "circuit breaker open: deciding on rules"}
    client, _ = await parent((OK, 200), (degraded, 503))
    resp = await client.get("/health")
    assert resp.status == 503
    assert (await resp.json())["reason"] == "worker 1: circuit breaker open: deciding on rules"


async def test_metrics_are_every_workers_with_the_parents_own(parent):
    client, workers = await parent((OK, 200), (OK, 200), states=("up", "starting"))
    workers[1].restarts = 2
    text = await (await client.get("/metrics")).text()
    assert 'clef_requests_total{status="200",worker="0"} 3.0' in text
    assert 'worker="1"' not in text.split("clef_workers ")[0]  # a worker not up: no series made up for it
    assert "clef_workers 2.0" in text and "clef_workers_up 1.0" in text
    assert 'clef_worker_up{worker="1"} 0.0' in text and 'clef_worker_restarts_total{worker="1"} 2.0' in text


async def test_metrics_need_the_workers_token(parent):
    token = "a-token-of-sixteen-chars"
    client, _ = await parent((OK, 200), (OK, 200), token=token)
    assert (await client.get("/metrics")).status == 401
    resp = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert resp.status == 200 and 'worker="1"' in await resp.text()


async def test_purge_reaches_every_worker_and_decisions_one(parent):
    client, workers = await parent((OK, 200), (OK, 200))
    assert await (await client.post("/v1/cache/purge", json={"prefix": "/"})).json() == {"purged": 3, "workers": 2}
    workers[0].state = "down"
    assert await (await client.post("/v1/decision", json={"input": "x"})).json() == {"worker": 1, "got": "x"}
    workers[1].state = "down"
    resp = await client.post("/v1/decision", json={"input": "x"})
    assert resp.status == 503 and (await resp.json())["error"]["type"] == "engine_unavailable"
