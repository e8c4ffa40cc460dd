"""The parent of `clef-gateway serve --workers N` (N > 1): it starts N workers and keeps them running.

Each worker is `clef-gateway serve` itself, run with the same arguments and told by CLEF_SUPERVISED (a
JSON object) which worker it is and which addresses to bind: it loads its own config, rules and model
(one ONNX Runtime session, `model.threads` threads) and binds the proxy listener (and the authz one)
with SO_REUSEPORT, so the kernel spreads new connections across the workers. The parent binds each of
those addresses first without listening on it, which picks the port when it is 0 and keeps it reserved
while workers come and go; it never accepts a proxied connection itself. Each worker's admin listener is
on a loopback port of its own, for the parent, whose admin listener is the public one (fleet.py, which
also holds the parent's `serve()`).

- A worker that exits is started again, after `Backoff` says how long; one that keeps dying within
  QUICK_S of starting is given up on after GIVE_UP_AFTER deaths in a row: the parent stops the others and
  exits 1, saying why. A worker whose very first start fails (a broken ruleset exits 2, an address in
  use 1) ends the gateway at once with that code: starting it again would fail the same way.
- SIGTERM or SIGINT: passed to every worker (each stops accepting and drains for shutdown.grace_s); the
  parent exits 0 once all have exited (1 if one had to be killed past its grace).
- SIGHUP: passed to every worker that is up; each reloads as a single process does. A worker restarted
  later reads the config as it is then, as a reload would.
- A worker whose parent dies gets SIGTERM from the kernel (PR_SET_PDEATHSIG, see `adopt`).
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from gateway.config import Address
from gateway.server import ListenError

log = logging.getLogger("clef.supervisor")

ENV = "CLEF_SUPERVISED"
FIRST_DELAY_S = 0.5  # before restarting a worker that died
QUICK_S = 10.0  # a worker that dies sooner than this after starting has not really started
GIVE_UP_AFTER = 5  # quick deaths in a row, each waiting twice as long as the one before
KILL_AFTER_S = 10.0  # past shutdown.grace_s, a worker still running at shutdown is killed


class Backoff:
    """How long to wait before restarting a worker that died, or None to give up. The clock is injected."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.quick = 0  # deaths in a row, each within QUICK_S of its start

    def died(self, started: float) -> float | None:
        self.quick = self.quick + 1 if self.clock() - started < QUICK_S else 0
        if self.quick >= GIVE_UP_AFTER:
            return None
        return FIRST_DELAY_S * 2 ** max(0, self.quick - 1)


@dataclass
class Worker:
    index: int
    admin: Address  # its own admin listener, on loopback, for the parent
    backoff: Backoff
    proc: Any = None  # asyncio.subprocess.Process (or a test's stand-in)
    state: str = "starting"  # starting | up | down (waiting to be restarted) | stopped
    started: float = 0.0
    restarts: int = 0
    ever_up: bool = False
    exits: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def admin_url(self) -> str:
        return f"http://{self.admin}"


Spawn = Callable[[Worker], Awaitable[Any]]
Probe = Callable[[Worker], Awaitable[bool]]


class Supervisor:
    def __init__(
        self, workers: list[Worker], spawn: Spawn, probe: Probe, grace_s: float,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Awaitable[None]] | None = None,
    ):  # fmt: skip
        self.workers, self.spawn, self.probe, self.grace_s, self.clock = workers, spawn, probe, grace_s, clock
        self.sleep = sleep or self._pause
        self.stopping = asyncio.Event()
        self.all_up = asyncio.Event()  # every worker answered once: the gateway is serving
        self.failure: tuple[str, int] | None = None
        self.killed: list[int] = []

    async def run(self) -> int:
        """Until stopped (or given up): 0, or the exit code of a failure."""
        await asyncio.gather(*(self._keep(w) for w in self.workers))
        if self.failure is not None:
            log.error("%s", self.failure[0])
            return self.failure[1]
        return 1 if self.killed else 0

    async def _keep(self, w: Worker) -> None:
        try:
            await self._keep_running(w)
        except Exception as err:  # our bug or the OS refusing a process: never a parent left half-running
            log.exception("worker %d: supervision failed", w.index)
            self.fail(f"worker {w.index} could not be run: {type(err).__name__}: {err}", 1)

    async def _keep_running(self, w: Worker) -> None:
        while not self.stopping.is_set():
            w.state, w.started = "starting", self.clock()
            w.proc = await self.spawn(w)
            up = asyncio.create_task(self._until_up(w))
            code = await w.proc.wait()
            up.cancel()
            w.exits.append(code)
            w.state = "stopped" if self.stopping.is_set() else "down"
            if self.stopping.is_set():
                return
            if not w.ever_up and w.restarts == 0 and code != 0:
                return self.fail(f"worker {w.index} could not start (exit {code}); stopping", 2 if code == 2 else 1)
            delay = w.backoff.died(w.started)
            if delay is None:
                return self.fail(f"worker {w.index} died {GIVE_UP_AFTER} times in a row within {QUICK_S:g}s of "
                                 f"starting (last exit {code}); giving up", 1)  # fmt: skip
            log.error("worker %d (pid %s) exited %s after %.1fs; starting it again in %.1fs", w.index, w.pid, code,
                      self.clock() - w.started, delay)  # fmt: skip
            await self.sleep(delay)
            w.restarts += 1

    async def _until_up(self, w: Worker) -> None:
        while not await self.probe(w):
            await asyncio.sleep(0.1)  # a real process loading a model: polled, briefly
        w.state, w.ever_up = "up", True
        if w.restarts:
            log.warning("worker %d (pid %s) is up again (restart %d)", w.index, w.pid, w.restarts)
        if all(x.ever_up for x in self.workers):
            self.all_up.set()

    async def _pause(self, seconds: float) -> None:
        try:  # a stop ends the wait: no worker is started while stopping
            await asyncio.wait_for(self.stopping.wait(), seconds)
        except TimeoutError:
            pass

    def fail(self, message: str, code: int) -> None:
        if self.failure is None:
            self.failure = (message, code)
        self.stop()

    def stop(self) -> None:
        """SIGTERM to every worker; those still running grace_s + KILL_AFTER_S later are killed."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.signal(signal.SIGTERM)
        asyncio.get_running_loop().call_later(self.grace_s + KILL_AFTER_S, self._kill)

    def _kill(self) -> None:
        for w in self.alive():
            log.error("worker %d (pid %s) still running %gs after SIGTERM: killed", w.index, w.pid,
                      self.grace_s + KILL_AFTER_S)  # fmt: skip
            self.killed.append(w.index)
            w.proc.kill()

    def alive(self) -> list[Worker]:
        return [w for w in self.workers if w.proc is not None and w.proc.returncode is None]

    def signal(self, sig: int, up_only: bool = False) -> list[int]:
        sent = []
        for w in self.alive():
            if not up_only or w.state == "up":
                try:
                    w.proc.send_signal(sig)
                    sent.append(w.index)
                except ProcessLookupError:
                    pass
        return sent

    def hup(self) -> None:
        # only workers that are up: one still importing would take SIGHUP's default and exit; one starting
        # reads the config as it is now anyway
        log.info("SIGHUP: passed to workers %s", ", ".join(map(str, self.signal(signal.SIGHUP, up_only=True))))


# -- the real processes ---------------------------------------------------------------------------------


def reserve(address: Address) -> socket.socket:
    """Bind (never listen on) `address` with SO_REUSEPORT: the port, chosen when it is 0, stays ours while
    workers bind and listen on it themselves. A bound socket that does not listen receives no connection."""
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM,
                                                              flags=socket.AI_PASSIVE)[0]  # fmt: skip
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(sockaddr)
    except OSError as err:
        raise ListenError(f"cannot listen on {address}: {err.strerror or err}") from None
    return sock


def bound(address: Address, sock: socket.socket) -> Address:
    return Address(address.host, sock.getsockname()[1])


def command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "gateway.cli", *argv]


async def spawn_process(w: Worker, argv: list[str], addresses: dict[str, str]) -> Any:
    told = {"index": w.index, "parent": os.getpid(), **addresses, "admin.listen": str(w.admin)}
    env = {**os.environ, ENV: json.dumps(told)}
    proc = await asyncio.create_subprocess_exec(*command(argv), env=env, stdin=asyncio.subprocess.DEVNULL)
    log.info("worker %d: pid %d", w.index, proc.pid)
    return proc


def told() -> dict[str, Any] | None:
    """What the parent told this process, when it is a worker."""
    raw = os.environ.get(ENV)
    return json.loads(raw) if raw else None


def overrides() -> dict[str, Any]:
    """Config keys the parent sets for this worker (its addresses, one process), laid over the flags."""
    t = told()
    if t is None:
        return {}
    return {"workers": 1, **{k: v for k, v in t.items() if k in ("listen", "admin.listen", "authz.listen")}}


def adopt() -> None:
    """In a worker: SIGTERM from the kernel if the parent dies (Linux), so no orphan keeps serving; and
    if the parent is already gone, stop now."""
    t = told()
    if t is None:
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's SIGTERM is all there is
        pass
    if os.getppid() != t["parent"]:
        os.kill(os.getpid(), signal.SIGTERM)


def workers_for(count: int, clock: Callable[[], float] = time.monotonic) -> tuple[list[Worker], list]:
    """The workers, and the sockets that reserve their private admin ports."""
    socks = [reserve(Address("127.0.0.1", 0)) for _ in range(count)]
    workers = [Worker(i, bound(Address("127.0.0.1", 0), s), Backoff(clock)) for i, s in enumerate(socks)]
    return workers, socks
