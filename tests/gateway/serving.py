"""`clef-gateway serve` as a real process, for the tests that need one (signals, workers, the learning
loop): started in its own session, its access log (stdout) and log (stderr) read as they come, signalled,
and killed with any workers it started. These wait for real processes, so they poll, briefly."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).parents[2]
CLI = [sys.executable, "-m", "gateway.cli"]


async def until(ready: Callable[[], bool], timeout: float = 30.0) -> None:
    async def poll() -> None:
        while not ready():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)


class Serving:
    """The process, its addresses, its access-log lines (stdout) and its log lines (stderr) as they come."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc, self.access, self.errors, self.proxy, self.admin = proc, [], [], "", ""
        self.tasks = [asyncio.create_task(self._drain(proc.stdout, self.access)),
                      asyncio.create_task(self._drain(proc.stderr, self.errors))]  # fmt: skip

    async def _drain(self, stream: asyncio.StreamReader, into: list[str]) -> None:
        while line := await stream.readline():
            into.append(line.decode(errors="replace"))

    async def started(self, timeout: float = 90) -> None:
        def addresses() -> bool:
            for line in self.errors:
                if m := re.search(r"proxy (\S+) -> .* admin (\S+),", line):
                    self.proxy, self.admin = m.groups()
                    return True
            assert self.proc.returncode is None, "".join(self.errors)
            return False

        await until(addresses, timeout)

    async def logged(self, pattern: str, count: int = 1, timeout: float = 30) -> None:
        await until(lambda: sum(1 for line in self.errors if re.search(pattern, line)) >= count, timeout)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    async def reload(self, generation: int) -> None:
        """SIGHUP, and wait until config generation `generation` serves (a refused reload fails the test)."""
        self.signal(signal.SIGHUP)
        await until(lambda: any(f"config generation {generation} " in ln or "reload refused" in ln for ln in self.errors), 60)
        assert not any("reload refused" in ln for ln in self.errors), "".join(self.errors[-5:])

    def access_lines(self, path: str) -> list[dict]:
        lines = [json.loads(ln) for ln in self.access if ln.startswith("{")]
        return [ln for ln in lines if ln["path"] == path]

    async def stop(self) -> None:
        if self.proc.returncode is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the process and its workers, nothing else
        await self.proc.wait()
        for t in self.tasks:
            t.cancel()


async def launch(config: Path, workers: int = 1) -> Serving:
    """`clef-gateway serve --workers N --config FILE`, without the CLEF_* settings of the test's own
    environment; `await started()` waits for its addresses."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEF_")}
    proc = await asyncio.create_subprocess_exec(
        *CLI, "serve", "--workers", str(workers), "--config", str(config), env={**env, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    return Serving(proc)
