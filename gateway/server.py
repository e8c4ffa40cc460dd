"""Running the gateway: the proxy and admin listeners, started together and stopped together.

`running(config)` is an async context manager: on entry the engine is loaded and both listeners accept
connections (port 0 picks a free port; the URLs say which); on exit both stop and the engine closes. The
CLI's `serve` and `demo` use it, and so do tests that need real sockets on both addresses.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from aiohttp import web

from gateway.app import build_admin_app, build_app
from gateway.config import Address, Config
from gateway.exchange import DECIDER


@dataclass(frozen=True)
class Running:
    proxy_url: str
    admin_url: str
    decider: Any


@asynccontextmanager
async def running(
    config: Config, clock: Callable[[], float] | None = None, model: Any = None
) -> AsyncIterator[Running]:
    proxy = build_app(config, clock=clock, model=model)
    proxy_runner = web.AppRunner(proxy, access_log=None)  # observe writes our own access log
    admin_runner = web.AppRunner(build_admin_app(config, proxy), access_log=None)
    await proxy_runner.setup()  # loads the engine
    try:
        await admin_runner.setup()
        proxy_url = await _listen(proxy_runner, config.listen)
        admin_url = await _listen(admin_runner, config.admin.listen)
        yield Running(proxy_url, admin_url, proxy[DECIDER])
    finally:
        await admin_runner.cleanup()
        await proxy_runner.cleanup()


async def _listen(runner: web.AppRunner, address: Address) -> str:
    site = web.TCPSite(runner, address.host, address.port)
    try:
        await site.start()
    except OSError as err:
        raise ListenError(f"cannot listen on {address}: {err.strerror or err}") from None
    host, port = runner.addresses[-1][:2]
    return f"http://{Address(host, port)}"


class ListenError(Exception):
    """An address is taken or not ours to bind."""
