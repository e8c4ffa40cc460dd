"""The admin listener's protection: loopback by default, a bearer token, a rate limit on decisions, and
nothing of it reachable through the proxy listener."""

from __future__ import annotations

import aiohttp
import pytest

from gateway import config as configs
from gateway.config import Config
from gateway.errors import ConfigError
from gateway.server import running
from tests.factories import FakeModel, make_config

TOKEN = "s3cret-admin-token-0123456789"
PATHS = [("GET", "/metrics"), ("GET", "/v1/models"), ("POST", "/v1/decision"), ("POST", "/v1/cache/purge"),
         ("GET", "/nope")]  # fmt: skip


def test_the_admin_listener_is_on_loopback_by_default():
    assert Config().admin.listen.host == "127.0.0.1" and configs.load(None, env={}).admin.listen.host == "127.0.0.1"


def test_the_token_never_shows_in_the_config_or_its_errors():
    config = configs.from_dict({}, env={"CLEF_ADMIN_TOKEN": TOKEN})
    assert config.admin.token == TOKEN and TOKEN not in repr(config)
    with pytest.raises(ConfigError) as err:
        configs.from_dict({"admin": {"token": "short-secret"}}, env={})
    assert "short-secret" not in err.value.message and err.value.message.startswith("admin.token:")


@pytest.mark.parametrize("method, path", PATHS)
async def test_everything_but_health_needs_the_token(make_gateway, method, path):
    gw = await make_gateway({"admin": {"token": TOKEN}}, model=FakeModel())
    assert (await gw.admin.get("/health")).status == 200
    for headers in ({}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": TOKEN},
                    {"Authorization": f"Basic {TOKEN}"}):  # fmt: skip
        resp = await gw.admin.request(method, path, headers=headers, json={"input": "a"})
        assert resp.status == 401, headers
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert (await resp.json())["error"]["type"] == "unauthorized"
    resp = await gw.admin.request(method, path, headers={"Authorization": f"Bearer {TOKEN}"},
                                  json={"input": "a"} if path == "/v1/decision" else {"prefix": "/"})  # fmt: skip
    assert resp.status == (404 if path == "/nope" else 200)


async def test_no_token_no_check(make_gateway):
    gw = await make_gateway(model=FakeModel())
    assert (await gw.admin.get("/v1/models")).status == 200


async def test_the_decision_api_is_rate_limited_per_input(make_gateway, clock):
    gw = await make_gateway({"admin": {"decision_rate": 2, "decision_burst": 4, "max_batch": 4}},
                            model=FakeModel(), clock=clock)  # fmt: skip
    assert (await gw.admin.post("/v1/decision", json={"input": ["a", "b", "c"]})).status == 200
    assert (await gw.admin.post("/v1/decision", json={"input": "d"})).status == 200
    resp = await gw.admin.post("/v1/decision", json={"input": ["e", "f"]})  # the bucket is empty
    assert resp.status == 429 and resp.headers["Retry-After"] == "1"
    assert (await resp.json())["error"]["type"] == "rate_limited"
    clock.advance(1.0)  # two more inputs' worth
    assert (await gw.admin.post("/v1/decision", json={"input": ["e", "f"]})).status == 200
    assert (await gw.admin.get("/health")).status == 200  # the rest of the API is not limited


def test_the_burst_must_hold_a_whole_batch():
    with pytest.raises(ConfigError, match="admin.decision_burst: must be >= max_batch"):
        make_config({"admin": {"decision_burst": 10, "max_batch": 64}})


async def test_no_admin_path_is_reachable_on_the_proxy_listener(upstream):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0", "token": TOKEN}, "mode": "detect"}
    async with running(make_config(raw, origin=upstream.url), model=FakeModel()) as gw:
        assert gw.admin_url.startswith("http://127.0.0.1:")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession() as s:
            for method, path in [("GET", "/health"), *PATHS[:-1]]:
                async with s.request(method, gw.proxy_url + path, headers=auth, json={"prefix": "/"}) as resp:
                    assert resp.headers.get("X-Origin") == "yes", path  # the origin's answer, never ours
    assert [s.target for s in upstream.seen] == ["/health", *(p for _, p in PATHS[:-1])]
