"""rules/overrides.py through RuleEngine.override(): operator allow/deny rules before the model."""

import pytest

from engine.features import Features
from engine.verdict import Source
from rules.engine import RuleEngine, RuleError

OVERRIDES = [
    {"id": "deny-admin", "action": "deny", "path_prefix": "/admin"},
    {"id": "office", "action": "allow", "networks": ["10.20.0.0/16", "2001:db8::/48"]},
    {"id": "health", "action": "cache", "path_regex": "^/healthz$", "methods": ["GET", "HEAD"]},
    {"id": "no-curl-posts", "action": "block", "methods": "POST", "user_agent_regex": "(?i)^curl/"},
    {"id": "debug", "action": "origin", "header": {"name": "X-Debug", "regex": "^1$"}},
]


@pytest.fixture(scope="module")
def engine():
    return RuleEngine.load(overrides=OVERRIDES)


def req(path="/", method="GET", client="203.0.113.5", **headers):
    return Features.build(method, path, headers=headers, client=client)


@pytest.mark.parametrize(
    "features,override_id,label",
    [
        (req("/admin/users"), "deny-admin", "block"),
        (req("/admin"), "deny-admin", "block"),
        (req("/administrator", client="10.20.3.4"), "deny-admin", "block"),  # first match wins
        (req("/shop", client="10.20.3.4"), "office", "allow"),
        (req("/account", client="10.20.3.4"), "office", "origin"),  # allow → the routing decision
        (req("/logo.png", client="2001:db8::7"), "office", "cache"),
        (req("/healthz"), "health", "cache"),
        (req("/", "POST", **{"User-Agent": "curl/8.1"}), "no-curl-posts", "block"),
        (req("/", **{"X-Debug": "1"}), "debug", "origin"),
    ],
)
def test_matching_override_decides(engine, features, override_id, label):
    verdict = engine.override(features)
    assert verdict is not None
    assert verdict.source is Source.OVERRIDE
    assert verdict.label == label
    assert verdict.model == f"override:{override_id}"
    assert verdict.confidence == 1.0


@pytest.mark.parametrize(
    "features",
    [
        req("/shop"),
        req("/adm"),
        req("/healthz", "POST"),
        req("/", "GET", **{"User-Agent": "curl/8.1"}),
        req("/", **{"X-Debug": "0"}),
        req("/", client="10.21.0.1"),
        req("/", client=""),
    ],
)
def test_no_override_matches(engine, features):
    assert engine.override(features) is None


def test_deny_blocks_even_a_benign_request_and_evaluate_ignores_overrides(engine):
    f = req("/admin/settings")
    assert engine.override(f).blocked
    assert engine.evaluate(f).source is Source.RULES


def test_no_overrides_by_default():
    assert RuleEngine.load().override(req("/admin")) is None


@pytest.mark.parametrize(
    "overrides,key",
    [
        ([{"id": "x", "action": "deny", "path_regex": "(?<=a)"}], "overrides[0].path_regex: invalid pattern"),
        ([{"action": "deny"}, {"id": "y", "action": "nuke"}], "overrides[1].action: must be one of"),
        ([{"id": "x", "action": "deny", "networks": ["10.0.0.1", "10.0.0.0/99"]}], "overrides[0].networks[1]:"),
        ([{"id": "x", "action": "deny", "paths": ["/a"]}], "overrides[0].paths: unknown key"),
        ([{"id": "x", "action": "deny", "path_prefix": "admin"}], "overrides[0].path_prefix: must be a path"),
        ([{"id": "x", "action": "deny", "header": {"name": "X", "regex": "("}}], "overrides[0].header.regex:"),
        ([{"id": "x", "action": "deny", "header": {"regex": "a"}}], "overrides[0].header.name: required"),
        ([{"id": "x", "action": "deny", "methods": []}], "overrides[0].methods: must be a list"),
        ([{"id": "x", "action": "deny"}, {"id": "x", "action": "allow"}], "overrides[1].id: duplicate id"),
        (["deny"], "overrides[0]: must be a mapping"),
    ],
)
def test_bad_override_names_its_key(overrides, key):
    with pytest.raises(RuleError) as err:
        RuleEngine.load(overrides=overrides)
    assert key in str(err.value)
