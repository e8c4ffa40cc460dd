"""Running the gateway: the proxy and admin listeners, started together and stopped together.

`running(config)` is an async context manager: on entry the engine is loaded and both listeners accept
connections (port 0 picks a free port; the URLs say which); on exit the proxy listener stops accepting,
requests in flight get up to `shutdown.grace_s` to finish, then the engine closes and the admin listener
stops. `Running.reload(config)` swaps in a new config and engine (SIGHUP). The CLI's `serve` and `demo`
use it, and so do tests that need real sockets on both addresses. With `authz.listen` set, the proxy's
runner listens there too (gateway/authz.py answers what arrives on that port).

Both listeners run on protocol.GatewayRunner: aiohttp's, with the connection limits, the slow-client
timeouts and refusals that say nothing about the request (gateway/protocol.py).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from aiohttp import web
from yarl import URL

from gateway import app as apps
from gateway import authz
from gateway.config import Address, Config
from gateway.exchange import HOLDER
from gateway.protocol import GatewayRunner


@dataclass(frozen=True)
class Running:
    proxy_url: str
    admin_url: str
    app: web.Application
    model: Any = None  # what tests injected; reloads use it too
    authz_url: str | None = None  # the auth_request / ext_authz listener, when configured

    @property
    def decider(self) -> Any:
        return self.app[HOLDER].decider

    @property
    def config(self) -> Config:
        return self.app[HOLDER].config

    async def reload(self, config: Config) -> bool:
        """True when `config` is in force; False (logged) when it was refused and the running one stays."""
        return await apps.reload(self.app, config, self.model)


@asynccontextmanager
async def running(
    config: Config, clock: Callable[[], float] | None = None, model: Any = None, reuse_port: bool = False
) -> AsyncIterator[Running]:
    """`reuse_port`: bind with SO_REUSEPORT, for worker processes sharing the addresses (supervisor.py)."""
    proxy = apps.build_app(config, clock=clock, model=model)
    grace = config.shutdown.grace_s
    # handler_cancellation: a client that hangs up cancels its request, and with it the one to the origin
    # (as nginx's proxy_ignore_client_abort off); the log line still says 499
    proxy_runner = GatewayRunner(proxy, config.limits, apps.refusals(proxy), access_log=None, shutdown_timeout=grace,
                                 handler_cancellation=True)  # fmt: skip
    admin_runner = GatewayRunner(apps.build_admin_app(config, proxy), config.limits, access_log=None,
                                 shutdown_timeout=min(grace, 5.0), **apps.handler_args(config))  # fmt: skip
    await proxy_runner.setup()  # loads the engine
    try:
        await admin_runner.setup()
        proxy_url = await _listen(proxy_runner, config.listen, reuse_port)
        authz_url = None
        if config.authz.listen is not None:  # a second site of the proxy's runner: its engine, its drain
            authz_url = await _listen(proxy_runner, config.authz.listen, reuse_port)
            proxy[authz.DISPATCH].ports.add(URL(authz_url).port)
        admin_url = await _listen(admin_runner, config.admin.listen, reuse_port)
        yield Running(proxy_url, admin_url, proxy, model, authz_url)
    finally:
        await proxy_runner.cleanup()  # stop accepting, drain, close the engine; the admin answers meanwhile
        await admin_runner.cleanup()


async def _listen(runner: web.AppRunner, address: Address, reuse_port: bool = False) -> str:
    site = web.TCPSite(runner, address.host, address.port, reuse_port=reuse_port or None)
    try:
        await site.start()
    except OSError as err:
        raise ListenError(f"cannot listen on {address}: {err.strerror or err}") from None
    host, port = runner.addresses[-1][:2]
    return f"http://{Address(host, port)}"


class ListenError(Exception):
    """An address is taken or not ours to bind."""
