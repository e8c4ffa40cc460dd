"""The auth_request / ext_authz listener over real sockets: check requests shaped as nginx's auth_request
subrequests and as Envoy's HTTP ext_authz calls send them, decided like proxied requests (action map,
routes, detect mode, overrides), answered 200 or 403 with the decision headers, never forwarded."""

from __future__ import annotations

from contextlib import asynccontextmanager

import aiohttp
import pytest

from gateway.server import running
from tests.factories import FakeModel, make_config

SQLI = "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--"
NGINX = {"X-Original-Method": "POST", "X-Original-URI": "/search?q=shoes", "X-Real-IP": "203.0.113.9",
         "User-Agent": "Mozilla/5.0", "Cookie": "session=abc"}  # fmt: skip


@asynccontextmanager
async def authz(upstream, fake=None, **extra):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "authz": {"listen": "127.0.0.1:0"}}
    raw["authz"].update(extra.pop("authz", {}))
    config = make_config({**raw, **extra}, origin=upstream.url)
    async with running(config, model=fake) as gw, aiohttp.ClientSession() as session:
        yield gw, session


async def ask(session, url, method="GET", **kw):
    async with session.request(method, url, **kw) as resp:
        return resp.status, resp.headers, await resp.read()


async def test_an_nginx_subrequest_is_decided_on_the_original_request(upstream, access_log):
    model = FakeModel(scores={"origin": 0.8})
    async with authz(upstream, model) as (gw, s):
        status, headers, body = await ask(s, gw.authz_url + "/_clef/authz", headers=NGINX)
    assert status == 200 and body == b""
    assert (headers["x-clef-decision"], headers["x-clef-source"], headers["x-clef-action"]) == ("origin", "model",
                                                                                               "forward")  # fmt: skip
    assert headers["x-clef-confidence"] == "0.800" and headers["x-clef-mode"] == "enforce"
    seen = model.seen[0]
    assert (seen.method, seen.path, seen.query, seen.client) == ("POST", "/search", "q=shoes", "203.0.113.9")
    names = {k.lower() for k, _ in seen.headers}
    assert {"user-agent", "cookie"} <= names and not names & {"x-original-method", "x-original-uri", "x-real-ip"}
    line = [x for x in access_log() if x["path"] == "/search"][-1]
    assert (line["method"], line["status"], line["client"], line["decision"]) == ("POST", 200, "203.0.113.9", "origin")
    assert upstream.seen == []  # a check is never forwarded


async def test_an_envoy_check_with_path_prefix_and_a_partial_body(upstream):
    model = FakeModel(scores={"allow": 0.9})
    headers = {"x-envoy-expected-rq-timeout-ms": "200", "x-envoy-auth-partial-body": "true",
               "x-forwarded-for": "198.51.100.1, 192.0.2.7", "content-type": "application/json"}  # fmt: skip
    async with authz(upstream, model, authz={"path_prefix": "/clef"}) as (gw, s):
        status, answer, _ = await ask(s, gw.authz_url + "/clef/api/items?id=7", "PUT", headers=headers,
                                      data=b'{"name": "x"}')  # fmt: skip
        assert status == 200 and answer["x-clef-decision"] == "allow"
        outside, _, _ = await ask(s, gw.authz_url + "/elsewhere/api", "GET")
        assert outside == 400  # not behind the prefix: not a check we can read
    seen = model.seen[0]
    assert (seen.method, seen.path, seen.query, seen.client) == ("PUT", "/api/items", "id=7", "192.0.2.7")
    assert seen.body == b'{"name": "x"}' and seen.body_size > len(seen.body)  # Envoy said it cut the body
    assert not [k for k, _ in seen.headers if k.lower().startswith("x-envoy-")]


async def test_a_block_answers_403_with_the_block_body_and_the_decision(upstream):
    model = FakeModel(scores={"block": 0.97}, features=("sqli",))
    async with authz(upstream, model) as (gw, s):
        status, headers, body = await ask(s, gw.authz_url + "/", headers={"X-Original-URI": SQLI})
    assert status == 403 and body.startswith(b"Forbidden")
    assert (headers["x-clef-decision"], headers["x-clef-feature"], headers["x-clef-action"]) == ("block", "sqli",
                                                                                               "block")  # fmt: skip


@pytest.mark.parametrize(
    "extra, status, mode, action",
    [
        ({"mode": "detect"}, 200, "detect", "block"),  # decided, annotated, never blocked
        ({"routes": [{"prefix": "/search", "mode": "detect"}]}, 200, "detect", "block"),
        ({"routes": [{"prefix": "/other", "mode": "detect"}]}, 403, "enforce", "block"),
        ({"actions": {"block": {"min_confidence": 0.99}}}, 200, "enforce", "forward"),  # a doubtful block
    ],
)
async def test_the_action_map_routes_and_detect_mode_apply(upstream, extra, status, mode, action):
    async with authz(upstream, FakeModel(scores={"block": 0.97}), **extra) as (gw, s):
        got, headers, _ = await ask(s, gw.authz_url + "/", headers={"X-Original-URI": SQLI})
    assert (got, headers["x-clef-mode"], headers["x-clef-action"]) == (status, mode, action)
    assert headers["x-clef-decision"] == "block"


async def test_overrides_see_the_original_client_and_path(upstream):
    deny = {"rules": {"overrides": [{"id": "lab", "action": "deny", "networks": ["203.0.113.0/24"]},
                                    {"id": "ok", "action": "allow", "path_prefix": "/health"}]}}  # fmt: skip
    async with authz(upstream, FakeModel(scores={"allow": 1.0}), **deny) as (gw, s):
        status, headers, _ = await ask(s, gw.authz_url + "/", headers=NGINX)
        assert (status, headers["x-clef-source"]) == (403, "override")
        other = {**NGINX, "X-Real-IP": "192.0.2.1", "X-Original-URI": "/healthz"}
        status, headers, _ = await ask(s, gw.authz_url + "/", headers=other)
        assert (status, headers["x-clef-source"]) == (200, "override")


async def test_the_rules_decide_when_there_is_no_model(upstream):
    async with authz(upstream, model={"enabled": False}) as (gw, s):
        blocked, headers, _ = await ask(s, gw.authz_url + "/", headers={"X-Original-URI": SQLI})
        benign, _, _ = await ask(s, gw.authz_url + "/", headers={"X-Original-URI": "/products?page=2"})
    assert (blocked, headers["x-clef-source"], benign) == (403, "rules", 200)


@pytest.mark.parametrize(
    "headers, status",
    [
        ({"X-Original-Method": "GE T", "X-Original-URI": "/"}, 400),
        ({"X-Original-URI": "not-a-path"}, 400),
        ({"X-Original-URI": "http://example.com/a/b?c=1"}, 200),  # absolute-form: its path and query
    ],
)
async def test_what_is_not_a_request_is_refused(upstream, headers, status):
    model = FakeModel()
    async with authz(upstream, model) as (gw, s):
        got, answer, _ = await ask(s, gw.authz_url + "/", headers=headers)
    assert got == status
    if status == 400:
        assert answer["x-clef-error"] == "bad_request" and model.calls == 0
    else:
        assert (model.seen[0].path, model.seen[0].query) == ("/a/b", "c=1")


async def test_the_proxy_listener_still_proxies_beside_it(upstream):
    async with authz(upstream, FakeModel(scores={"allow": 1.0})) as (gw, s):
        status, _, _ = await ask(s, gw.proxy_url + "/_clef/authz", headers=NGINX)
        assert status == 200 and upstream.hits("/_clef/authz") == 1  # the proxy forwards every path
        status, _, _ = await ask(s, gw.authz_url + "/_clef/authz", headers=NGINX)
        assert status == 200 and len(upstream.seen) == 1


async def test_decisions_on_it_are_counted(upstream):
    async with authz(upstream, FakeModel(scores={"block": 0.97})) as (gw, s):
        await ask(s, gw.authz_url + "/", headers={"X-Original-URI": SQLI})
        _, _, metrics = await ask(s, gw.admin_url + "/metrics")
    assert 'clef_decisions_total{action="block",label="block",source="model"} 1.0' in metrics.decode()
