"""engine/batcher.py with the real model: batching, order, lanes, cancellation, a bounded queue."""

import asyncio

import numpy as np
import pytest

from engine import bundle as bundles
from engine.batcher import LONG_TOKENS, Batcher
from engine.errors import Overloaded
from engine.features import Features
from engine.model import Model


@pytest.fixture(scope="module")
def model():
    return Model(bundles.load())


@pytest.fixture
async def batcher(model):
    b = Batcher(model, max_batch=8, max_queue=64)
    yield b
    await b.close()


def reference(model, f):
    labels, feats = model.run([model.encode(f)])
    return model.verdict(labels[0], feats[0])


async def test_concurrent_requests_are_batched_and_answered_in_place(model, batcher):
    fs = [Features.build("GET", f"/item/{i}", "q=" + "word " * i) for i in range(20)]
    verdicts = await asyncio.gather(*(batcher.predict(f) for f in fs))
    assert max(batcher.batches) > 1  # they shared forward passes
    for f, v in zip(fs, verdicts):
        ref = reference(model, f)
        assert v.label == ref.label
        assert abs(v.confidence - ref.confidence) < 0.05


async def test_batched_requests_near_the_threshold_get_their_own_scores(model, batcher, monkeypatch):
    import engine.model

    monkeypatch.setattr(engine.model, "SETTLE_LOGITS", 1e9)  # every request counts as near the threshold
    fs = [Features.build("GET", f"/item/{i}", "q=" + "word " * i) for i in range(20)]
    verdicts = await asyncio.gather(*(batcher.predict(f) for f in fs))
    assert max(batcher.batches) > 1
    for f, v in zip(fs, verdicts):
        assert v.scores == reference(model, f).scores  # exactly as scored alone


async def test_long_input_takes_the_long_lane(model, batcher):
    long = Features.build("POST", "/doc", headers={"content-type": "text/plain"}, body=("word " * 20000).encode())
    short = Features.build("GET", "/")
    assert model.encode(long).length > LONG_TOKENS
    results = await asyncio.gather(batcher.predict(long), batcher.predict(short))
    assert results[0].truncated is False and results[1].label == reference(model, short).label


async def test_cancelled_requests_are_skipped(batcher):
    tasks = [asyncio.create_task(batcher.predict(Features.build("GET", f"/{i}"))) for i in range(3)]
    await asyncio.sleep(0)  # queued, not yet run
    tasks[1].cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(done[1], asyncio.CancelledError)
    assert sum(batcher.batches) == 2


async def test_full_queue_raises_overloaded(model):
    b = Batcher(model, max_batch=8, max_queue=1)
    try:
        results = await asyncio.gather(*(b.predict(Features.build("GET", "/")) for _ in range(3)), return_exceptions=True)
        assert sum(isinstance(r, Overloaded) for r in results) == 2
    finally:
        await b.close()


def test_probabilities_sum_to_one(model):
    labels, _ = model.run([model.encode(Features.build("GET", "/"))])
    assert np.isclose(labels.sum(), 1.0, atol=1e-3)
