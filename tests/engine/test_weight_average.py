"""engine.train.loop.WeightAverage and bench/weight_average.py: a run that ends on a moving average of its weights."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.factories import bench_script, dev_split_corpus

torch = pytest.importorskip("torch")

from engine.train.calibrate import CEILING  # noqa: E402
from engine.train.loop import TrainConfig, WeightAverage, set_seed, train  # noqa: E402
from engine.train.net import ClefNet  # noqa: E402
from tests.engine.test_parallel import SHAPE, tiny_data  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "weight_average.py"
bench = bench_script("weight_average")


def test_the_average_is_debiased_and_weighs_recent_steps_more():
    net = torch.nn.Linear(1, 1, bias=False)
    avg = WeightAverage(net, 0.5)
    with torch.no_grad():
        net.weight.fill_(1.0)
    avg.update(net)
    assert avg.state_dict(net)["weight"].item() == pytest.approx(1.0)  # one step: that step's weights, not half of them
    with torch.no_grad():
        net.weight.fill_(3.0)
    avg.update(net)
    assert avg.state_dict(net)["weight"].item() == pytest.approx((0.5 * 1 + 3) / 1.5)
    assert net.weight.item() == 3.0  # the network keeps its own weights
    with pytest.raises(ValueError):
        WeightAverage(net, 1.0)


def test_averages_watch_a_run_without_changing_it():
    data = tiny_data()
    cfg = TrainConfig(epochs=2, seed=1, tokens_per_batch=256, warmup_steps=2)
    set_seed(1)
    plain = ClefNet(**SHAPE)
    run = train(plain, data, cfg)
    set_seed(1)
    watched = ClefNet(**SHAPE)
    averages = (WeightAverage(watched, 0.5), WeightAverage(watched, 0.9))
    assert train(watched, data, cfg, averages=averages)["steps"] == run["steps"] > 5
    for (name, a), b in zip(plain.state_dict().items(), watched.state_dict().values()):
        assert torch.equal(a, b), name  # the same run, bit for bit: averaging touches neither the weights nor the seeds
    assert all(avg.steps == run["steps"] for avg in averages)
    short, long = (avg.state_dict(watched)["embed.weight"] for avg in averages)
    last = watched.state_dict()["embed.weight"]
    assert (short - last).abs().mean() < (long - last).abs().mean()  # a longer memory lies further from the last weights


def test_tpr_is_read_within_a_budget_the_rules_share():
    # benign scores 9 .. 0; attacks 9.5, 8.5, 5.5, 0.5
    score = np.array([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 9.5, 8.5, 5.5, 0.5], dtype=float)
    attack = np.arange(14) >= 10
    assert bench.tpr_at(score, attack, 0.1) == 0.5  # one benign request may pass: threshold 8
    ruled = np.zeros(14, dtype=bool)
    ruled[[9, 13]] = True  # the rules block the lowest benign request and the lowest attack
    assert bench.tpr_at(score, attack, 0.1, ruled) == 0.5  # their false positive takes the budget: threshold 9
    assert bench.tpr_at(score, attack, 0.2, ruled) == 0.75  # one left for the model: threshold 8, plus the rules' catch
    assert np.isnan(bench.tpr_at(score, attack, 0.0, ruled))  # the rules alone are over the budget


def test_scores_near_one_keep_their_order():
    probs = np.array([[0.999990, 0.000005, 0.000003, 0.000002], [0.999996, 0.000002, 0.000001, 0.000001]], np.float32)
    s = bench.score_of(probs, 0)
    assert s[1] > s[0]


@pytest.mark.slow
def test_the_benchmark_compares_the_last_weights_with_their_averages(tmp_path):
    corpus = tmp_path / "corpus"
    dev_split_corpus(corpus, random.Random(7), n=900)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(SCRIPT), "--corpus", str(corpus), "--epochs", "0.5", "--decays", "0.9,0.99",
                          "--vocab", "600", "--threads", "1", "--out", str(out)], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads((out / "weight_average.json").read_text())
    assert [r["weights"] for r in res["rows"]] == ["last", "average 0.9", "average 0.99"]
    assert res["steps"] > 0 and res["dev_attacks"] > 0 and res["dev_benign"] > 0
    for row in res["rows"]:
        assert list(row["model"]) == ["0.05", "0.1", "0.2", "0.5"]
        assert all(0 <= v <= 100 for v in row["model"].values())
        assert 0.5 <= row["calibrated"]["threshold"] <= CEILING
    assert "| average 0.99 |" in run.stdout
    if importlib.util.find_spec("matplotlib") is None:
        assert not (out / "weight_average.png").exists() and "matplotlib not installed" in run.stderr
    else:
        assert (out / "weight_average.png").stat().st_size > 1000
