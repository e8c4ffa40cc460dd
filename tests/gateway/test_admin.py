from __future__ import annotations

import json

import aiohttp
import pytest

from gateway.server import running
from tests.factories import make_config
from tests.gateway.test_admin_security import TOKEN


async def test_health_names_the_model(make_gateway):
    gw = await make_gateway(load_bundle=True)  # the full load path: bundle read, checked and warmed
    resp = await gw.admin.get("/health")
    assert resp.status == 200
    body = await resp.json()
    assert body["status"] == "ok" and body["breaker"] == "closed"
    assert body["model"]["name"] == "clef-default" and body["model"]["version"]


async def test_health_names_the_model_and_no_more(make_gateway):
    """/health answers without the admin token and every probe polls it: the bundle's folder, training record and
    eval figures are /v1/models' to give."""
    gw = await make_gateway({"admin": {"token": TOKEN}})
    body = await (await gw.admin.get("/health")).json()
    assert set(body["model"]) == {"name", "version", "sha256", "max_tokens", "routing"}
    assert "work/" not in json.dumps(body) and "eval" not in json.dumps(body)
    models = (await (await gw.admin.get("/v1/models", headers={"Authorization": f"Bearer {TOKEN}"})).json())["models"]
    assert models[0]["sha256"] == body["model"]["sha256"] and {"path", "trained_on", "eval"} <= set(models[0])


async def test_health_is_503_with_the_reason_when_the_bundle_is_broken(make_gateway, upstream, tmp_path):
    (tmp_path / "bundle.json").write_text("{not json")
    gw = await make_gateway({"model": {"bundle": str(tmp_path)}}, load_bundle=True)
    resp = await gw.admin.get("/health")
    assert resp.status == 503
    assert "bundle.json is not valid JSON" in (await resp.json())["reason"]
    assert (await gw.proxy.get("/")).status == 200  # the rules decide meanwhile
    assert upstream.seen[-1].header("x-clef-source") == "rules"


async def test_models_lists_the_bundle(make_gateway):
    gw = await make_gateway()
    models = (await (await gw.admin.get("/v1/models")).json())["models"]
    assert [m["name"] for m in models] == ["clef-default"]
    assert models[0]["labels"] == ["block", "cache", "origin", "allow"]


async def test_decision_for_a_string(make_gateway):
    gw = await make_gateway()
    question = {"input": "1' UNION SELECT password FROM users--", "max_tokens": 128}
    resp = await gw.admin.post("/v1/decision", json=question)
    assert resp.status == 200
    decision = (await resp.json())["decision"]
    assert set(decision) >= {"label", "confidence", "feature", "source", "model"}
    assert decision["label"] == "block"


async def test_a_compressed_question_is_read_inflated(make_gateway):
    """Request bodies reach the admin API as sent (the gateway does not let aiohttp inflate them), so it inflates its own."""
    import gzip
    import json

    gw = await make_gateway()
    body = gzip.compress(json.dumps({"input": "1' UNION SELECT password FROM users--"}).encode())
    resp = await gw.admin.post("/v1/decision", data=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert resp.status == 200 and (await resp.json())["decision"]["label"] == "block"
    resp = await gw.admin.post("/v1/decision", data=b'{"input": "x"}', headers={"Content-Type": "application/json", "Content-Encoding": "br"})
    assert resp.status == 400 and "Content-Encoding" in await resp.text()


async def test_batch_answers_in_order(make_gateway):
    gw = await make_gateway()
    assert len((await (await gw.admin.post("/v1/decision", json={"input": ["a", "b", "c"]})).json())["decisions"]) == 3
    inputs = ["good morning", "1' UNION SELECT password FROM users--", "<script>alert(1)</script>", "see you soon"]
    batch = (await (await gw.admin.post("/v1/decision", json={"input": inputs})).json())["decisions"]
    alone = [(await (await gw.admin.post("/v1/decision", json={"input": i})).json())["decision"] for i in inputs]
    pairs = [(d["label"], d["confidence"]) for d in batch]
    assert pairs == [(d["label"], d["confidence"]) for d in alone]
    assert len(set(pairs)) > 1  # distinct answers, so a reordering could not go unnoticed
    assert batch[1]["label"] == "block" and batch[2]["label"] == "block"


async def test_structured_request_input(make_gateway):
    gw = await make_gateway()
    attack = {"method": "GET", "path": "/", "query": "id=1%27%20OR%201%3D1--", "headers": {"Host": "shop.example"}}
    resp = await gw.admin.post("/v1/decision", json={"input": attack})
    assert (await resp.json())["decision"]["label"] == "block"
    pairs = {"method": "POST", "path": "/api", "headers": [["Content-Type", "text/plain"], ["X-A", "1"]], "body": "hi"}
    assert (await gw.admin.post("/v1/decision", json={"input": [pairs, "text"]})).status == 200


@pytest.mark.parametrize(
    "body, status, kind",
    [
        (b"{not json", 400, "bad_request"),
        (b'["input"]', 400, "bad_request"),
        (b'{"input": 5}', 400, "bad_request"),
        (b'{"input": ["a", 5]}', 400, "bad_request"),
        (b'{"input": "a", "max_tokens": "many"}', 400, "bad_request"),
        (b'{"input": {"path": 7}}', 400, "bad_request"),
        (b'{"input": {"headers": "x"}}', 400, "bad_request"),
        (b'{"input": []}', 422, "invalid_input"),
        (b'{"max_tokens": 5}', 422, "invalid_input"),
        (b'{"input": "a", "max_tokens": 0}', 422, "invalid_input"),
        (b'{"input": "a", "mode": "fast"}', 422, "invalid_input"),
        (b'{"input": {"path": "no-slash"}}', 422, "invalid_input"),
        (b'{"input": {"verb": "GET"}}', 422, "invalid_input"),
        (json.dumps({"input": ["x"] * 65}).encode(), 422, "invalid_input"),
    ],
)
async def test_decision_errors(make_gateway, body, status, kind):
    gw = await make_gateway()
    resp = await gw.admin.post("/v1/decision", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == status
    error = (await resp.json())["error"]
    assert error["type"] == kind and error["message"]


async def test_decision_body_too_large_is_413(make_gateway):
    gw = await make_gateway({"admin": {"max_body_bytes": 1000}})
    resp = await gw.admin.post("/v1/decision", json={"input": "x" * 2000})
    assert resp.status == 413 and (await resp.json())["error"]["type"] == "payload_too_large"

    async def chunked():  # no Content-Length: caught while reading
        yield b'{"input": "' + b"y" * 2000 + b'"}'

    assert (await gw.admin.post("/v1/decision", data=chunked())).status == 413


async def test_unknown_admin_path_is_json_404(make_gateway):
    gw = await make_gateway()
    resp = await gw.admin.get("/nope")
    assert resp.status == 404 and (await resp.json())["error"]["type"] == "not_found"


async def test_admin_is_not_reachable_on_the_proxy_listener(upstream, real_model):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "mode": "detect"}  # never blocked
    config = make_config(raw, origin=upstream.url)
    async with running(config, model=real_model()) as gw:
        assert gw.proxy_url != gw.admin_url
        async with aiohttp.ClientSession() as s:
            async with s.get(gw.admin_url + "/health") as resp:
                assert resp.status == 200 and (await resp.json())["status"] == "ok"
            async with s.get(gw.proxy_url + "/health") as resp:
                assert resp.headers.get("X-Origin") == "yes"  # the origin's /health, not ours
            async with s.post(gw.proxy_url + "/v1/decision", json={"input": "a"}) as resp:
                assert resp.headers.get("X-Origin") == "yes"
    assert [s.target for s in upstream.seen] == ["/health", "/v1/decision"]
