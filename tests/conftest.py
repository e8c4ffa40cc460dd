"""Fixtures shared across the test packages: a fake clock, a recording origin on loopback, and a real
redis-server (tests/redis_server.py) for the shared decision cache."""

from __future__ import annotations

import pytest

from tests import redis_server as redis
from tests.factories import FakeClock, Upstream


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def upstream(aiohttp_server) -> Upstream:
    origin = Upstream()
    server = await aiohttp_server(origin.app(), access_log=None)  # the origin's own log is not the gateway's
    origin.url = str(server.make_url("")).rstrip("/")
    origin.server = server
    return origin


@pytest.fixture
def redis_server():
    yield from redis.serve()
