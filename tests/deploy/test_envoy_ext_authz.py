"""deploy/envoy-ext-authz.yaml: valid YAML, a valid Envoy bootstrap by Envoy's own API definitions (the
protobuf messages of xds-protos: unknown fields, types, enums, typed_config; and the required, min_len, gt
and deprecated rules of its validate annotations, tests/deploy/envoyschema.py), agreeing with the gateway
(its authz port, its path_prefix, every x-clef-* header let through); then the check requests this config
makes Envoy send (method, path_prefix + path and query, every header, a buffered body, Envoy's own
x-envoy-* headers) sent to a real authz listener. No Envoy binary is run: none is packaged for Debian or
PyPI, and none can be downloaded here."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import aiohttp
import pytest
import yaml

from gateway.annotate import headers as decision_headers
from gateway.server import running
from tests.factories import make_config

envoyschema = pytest.importorskip("tests.deploy.envoyschema", reason="xds-protos is not installed (the test extra)")

FILE = Path(__file__).resolve().parents[2] / "deploy" / "envoy-ext-authz.yaml"
DOC = yaml.safe_load(FILE.read_text())
SQLI = "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--"


def ext_authz(bootstrap) -> dict:
    """The ext_authz filter's config, as the parsed document (dict) gives it."""
    (listener,) = bootstrap["static_resources"]["listeners"]
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    filters = hcm["http_filters"]
    assert [f["name"] for f in filters] == ["envoy.filters.http.ext_authz", "envoy.filters.http.router"]
    return filters[0]["typed_config"]


AUTHZ = ext_authz(DOC)


def test_it_is_a_bootstrap_envoy_accepts():
    parsed = envoyschema.bootstrap(DOC)
    assert envoyschema.problems(parsed) == []
    assert {c.name for c in parsed.static_resources.clusters} == {"app", "clef_authz"}


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda d: ext_authz(d)["http_service"]["server_uri"].pop("timeout"), "server_uri.timeout: required"),
        (lambda d: ext_authz(d)["with_request_body"].update(max_request_bytes=0), "max_request_bytes: must be > 0"),
        (lambda d: ext_authz(d)["http_service"]["server_uri"].update(cluster=""), "cluster: at least 1 characters"),
        (lambda d: ext_authz(d)["http_service"].update(authorization_request={"allowed_headers": {"patterns": [
            {"exact": "cookie"}]}}), "authorization_request.allowed_headers: deprecated"),  # fmt: skip
    ],
)
def test_the_checks_catch_what_envoy_would_refuse(change, problem):
    doc = copy.deepcopy(DOC)
    change(doc)
    assert any(p.endswith(problem) for p in envoyschema.problems(envoyschema.bootstrap(doc))), problem


def test_an_unknown_field_is_refused():
    doc = copy.deepcopy(DOC)
    ext_authz(doc)["http_service"]["path_prefx"] = "/x"
    with pytest.raises(Exception, match="path_prefx"):
        envoyschema.bootstrap(doc)


def test_it_agrees_with_the_gateway():
    (authz_cluster,) = [c for c in DOC["static_resources"]["clusters"] if c["name"] == "clef_authz"]
    address = authz_cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    service = AUTHZ["http_service"]
    assert service["server_uri"]["cluster"] == "clef_authz"
    assert f":{address['socket_address']['port_value']}" in service["server_uri"]["uri"]
    assert re.search(rf"listen: 127\.0\.0\.1:{address['socket_address']['port_value']}\b", FILE.read_text())
    assert f"path_prefix: {service['path_prefix']}" in FILE.read_text()  # the gateway's side, as documented
    assert AUTHZ["with_request_body"]["max_request_bytes"] == make_config().model.inspect_bytes
    assert AUTHZ["failure_mode_allow"] is False  # fails closed
    patterns = service["authorization_response"]["allowed_upstream_headers"]["patterns"]
    from engine.verdict import Source, Verdict
    from gateway.actions import resolve

    verdict = Verdict("allow", 1.0, source=Source.MODEL, model="m@1")
    sent = [name for name, _ in decision_headers(resolve(verdict, make_config().route("/")), verdict).upstream]
    assert all(any(name.startswith(p["prefix"]) for p in patterns) for name in sent)  # every one reaches the app


async def test_the_gateway_answers_the_checks_this_config_sends(upstream):
    prefix = AUTHZ["http_service"]["path_prefix"]
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "model": {"enabled": False},
           "authz": {"listen": "127.0.0.1:0", "path_prefix": prefix}}  # fmt: skip
    envoy = {"x-envoy-expected-rq-timeout-ms": "2000", "x-request-id": "4c2b", "x-forwarded-proto": "http",
             "x-forwarded-for": "203.0.113.5", "x-envoy-internal": "true"}  # fmt: skip
    async with running(make_config(raw, origin=upstream.url)) as gw, aiohttp.ClientSession() as s:
        async with s.get(gw.authz_url + prefix + "/products?page=2", headers=envoy) as resp:
            assert resp.status == 200 and resp.headers["x-clef-source"] == "rules"
        body = b'{"note": "a note"}'
        headers = {**envoy, "content-type": "application/json", "x-envoy-auth-partial-body": "false"}
        async with s.post(gw.authz_url + prefix + "/api/notes", data=body, headers=headers) as resp:
            assert resp.status == 200 and resp.headers["x-clef-decision"] == "origin"
        async with s.get(gw.authz_url + prefix + SQLI, headers=envoy) as resp:
            assert resp.status == 403 and resp.headers["x-clef-decision"] == "block"
            assert resp.headers["content-type"].startswith("text/plain")  # Envoy passes it to the client
    assert upstream.seen == []  # checks only: nothing reaches an origin through the authz listener
