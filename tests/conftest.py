"""Fixtures shared across the test packages: a fake clock and a recording origin on loopback."""

from __future__ import annotations

import pytest

from tests.factories import FakeClock, Upstream


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def upstream(aiohttp_server) -> Upstream:
    origin = Upstream()
    server = await aiohttp_server(origin.app())
    origin.url = str(server.make_url("")).rstrip("/")
    origin.server = server
    return origin
