"""A real redis-server on a free loopback port, for the shared decision cache's tests.

The fixture `redis_server` (tests/conftest.py, through `serve()`) starts one per test (no persistence, a
few milliseconds) and kills it after. A test can `stop()` it (SIGKILL: a crashed Redis, connections
reset), `start()` it again on the same port (empty, as a restarted cache is), or `pause()` / `resume()`
it (SIGSTOP / SIGCONT: a hung Redis that accepts connections and never answers, the case a timeout is
for). Skipped, saying why, where the binary is missing; .ci/run installs it.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from typing import Iterator

import pytest

BINARY = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None
        self.paused = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        assert BINARY, "redis-server is not installed"
        args = [BINARY, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()
        return self

    def _wait_ready(self, limit_s: float = 10.0) -> None:
        """Poll until it answers PING: a real server's start, the only waiting these tests do."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, "redis-server exited at start"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise AssertionError(f"redis-server did not answer on port {self.port} within {limit_s} s")

    def stop(self) -> None:
        if self.process is not None:
            self.resume()
            self.process.kill()
            self.process.wait()
            self.process = None

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.paused and self.process is not None:
            self.process.send_signal(signal.SIGCONT)
        self.paused = False


def serve() -> Iterator[RedisServer]:
    """A started server, killed afterwards; the test is skipped where redis-server is not installed."""
    if BINARY is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run installs it)")
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()
