"""The gateway under test: the proxy and admin apps on loopback, in front of the recording origin,
with the real rules and the real default model bundle unless a test passes a fake to reach a fault.
Both listen through the gateway's own connection handling (protocol.GatewayRunner), as in production."""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gateway.app import build_admin_app, build_app, refusals
from gateway.config import Config
from gateway.exchange import HOLDER
from gateway.protocol import GatewayRunner
from tests.factories import make_config
from tests.gateway.serving import Serving, launch


class GatewayTestServer(TestServer):
    """aiohttp's TestServer on the gateway's runner: the same limits, timeouts and refusals as serving."""

    def __init__(self, app: web.Application, config: Config, log_refusals: bool = True, **kwargs: Any):
        super().__init__(app, **kwargs)
        self.config, self.log_refusals = config, log_refusals

    async def _make_runner(self, **kwargs: Any) -> GatewayRunner:
        on_refusal = refusals(self.app) if self.log_refusals else None
        return GatewayRunner(self.app, self.config.limits, on_refusal, **kwargs)


@dataclass
class Gateway:
    proxy: TestClient
    admin: TestClient
    config: Config
    app: web.Application

    @property
    def decider(self) -> Any:
        return self.app[HOLDER].decider


@functools.cache
def bundle_model():
    """The default bundle's ONNX session, loaded once, on first use (tests with a fake model never load
    it): it holds no event-loop state, so tests share it."""
    from engine import bundle
    from engine.model import Model

    model = Model(bundle.load(None))
    model.warm_up()
    return model


@pytest.fixture
def real_model() -> Callable[[], Any]:
    """Makes a fresh runner (batcher, lanes) around the shared session, for this test's event loop."""
    from engine.decide import ModelRunner

    return lambda: ModelRunner(bundle_model(), max_batch=16, max_queue=1024)


@pytest.fixture
def make_gateway(aiohttp_client, upstream, real_model) -> Callable[..., Any]:
    async def make(
        raw: dict[str, Any] | None = None, *, model: Any = None, clock: Any = None, origin: str | None = None,
        load_bundle: bool = False,
    ) -> Gateway:  # fmt: skip
        config = make_config(raw, origin=origin or upstream.url)
        if model is None and not load_bundle:
            model = real_model()
        app = build_app(config, clock=clock, model=model)
        proxy = await aiohttp_client(GatewayTestServer(app, config))
        admin = await aiohttp_client(GatewayTestServer(build_admin_app(config, app), config, log_refusals=False))
        return Gateway(proxy, admin, config, app)

    return make


@pytest.fixture
def access_log(caplog) -> Callable[[], list[dict[str, Any]]]:
    """The access-log lines written so far, parsed."""
    caplog.set_level(logging.INFO, logger="clef.access")
    return lambda: [json.loads(r.getMessage()) for r in caplog.records if r.name == "clef.access"]


@pytest.fixture
async def serve() -> Any:
    """`await serve(config, workers=1, wait=True)`: a real `clef-gateway serve` process (tests/gateway/serving.py);
    every one started is killed, with its workers, at the end of the test."""
    started: list[Serving] = []

    async def start(config: Any, workers: int = 1, wait: bool = True) -> Serving:
        started.append(serving := await launch(config, workers))
        if wait:
            await serving.started()
        return serving

    yield start
    for serving in started:
        await serving.stop()
