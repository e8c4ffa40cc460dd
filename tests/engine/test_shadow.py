"""engine/shadow.py: a second model decides beside the live one, counted, bounded, never in the way."""

from __future__ import annotations

import asyncio

from engine import bundle as bundles
from engine.decide import Decider, EngineSettings
from engine.features import Features
from engine.shadow import Shadow
from engine.verdict import Source, Verdict
from tests.factories import FakeModel

LIVE_BLOCK = Verdict("block", 0.9, ("sqli",), Source.MODEL, "live@1")
LIVE_ALLOW = Verdict("allow", 0.9, (), Source.MODEL, "live@1")


async def test_agreement_is_counted_and_each_decision_handed_over():
    shadow = Shadow(FakeModel({"allow": 0.8}))
    got: list = []
    assert shadow.submit(Features.build("GET", "/a"), LIVE_BLOCK, got.append)
    assert shadow.submit(Features.build("GET", "/b"), LIVE_ALLOW, got.append)
    await shadow.drain()
    assert [v.label for v in got] == ["allow", "allow"]
    assert shadow.agreement == {("block", "allow"): 1, ("allow", "allow"): 1}
    assert shadow.pending == 0


async def test_a_busy_shadow_drops_instead_of_queueing():
    model = FakeModel(hang=True)
    shadow = Shadow(model, max_pending=2)
    got: list = []
    for path in ("/a", "/b", "/c"):
        shadow.submit(Features.build("GET", path), LIVE_ALLOW, got.append)
    assert shadow.dropped == 1 and got == [None] and shadow.pending == 2
    await asyncio.sleep(0)  # let the two tasks reach the model (no time passes: the fake hangs on an event)
    assert model.calls == 2
    await shadow.close()
    assert model.closed and shadow.pending == 0


async def test_a_failing_shadow_hands_over_none_and_counts():
    shadow = Shadow(FakeModel(error=True))
    got: list = []
    shadow.submit(Features.build("GET", "/"), LIVE_ALLOW, got.append)
    await shadow.drain()
    assert got == [None] and shadow.failed == 1 and not shadow.agreement


async def test_repeated_requests_are_answered_from_the_shadows_cache():
    model = FakeModel({"block": 0.9})
    shadow = Shadow(model)
    for _ in range(3):
        shadow.submit(Features.build("GET", "/same"), LIVE_BLOCK)
        await shadow.drain()
    assert model.calls == 1 and shadow.agreement == {("block", "block"): 3}


async def test_the_decider_loads_a_shadow_bundle_and_reports_it(tmp_path):
    decider = Decider.create(EngineSettings(shadow_bundle=str(bundles.DEFAULT_BUNDLE)))
    try:
        verdict = await decider.decide(Features.build("GET", "/search", "q=shoes"))
        decider.shadow.submit(Features.build("GET", "/search", "q=shoes"), verdict)
        await decider.shadow.drain()
        assert sum(decider.shadow.agreement.values()) == 1 and decider.shadow_agreement() == 1.0
        health = decider.health()
        assert health["status"] == "ok" and health["shadow"]["agreement"] == 1.0
        assert [m.get("shadow", False) for m in decider.models()] == [False, True]
    finally:
        await decider.close()


async def test_a_shadow_bundle_that_does_not_load_leaves_the_live_model_alone(tmp_path):
    decider = Decider.create(EngineSettings(shadow_bundle=str(tmp_path)))
    try:
        assert decider.shadow is None and "bundle.json is missing" in decider.shadow_error
        health = decider.health()
        assert health["status"] == "ok" and "shadow model not loaded" in health["shadow"]["error"]
        assert (await decider.decide(Features.build("GET", "/"))).source is Source.MODEL
    finally:
        await decider.close()
