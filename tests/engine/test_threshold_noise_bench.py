"""bench/threshold_noise.py: training's threshold rule, bootstrapped on the bundle's own dev split."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

from engine.train.calibrate import CEILING
from tests.factories import bench_script, dev_split_corpus, labelled_record

ROOT = Path(__file__).resolve().parents[2]
noise = bench_script("threshold_noise")


def scored(scores, attack, ruled=None, groups=None) -> dict:
    n = len(scores)
    return {"score": np.array(scores, np.float32), "attack": np.array(attack, bool),
            "ruled": np.zeros(n, bool) if ruled is None else np.array(ruled, bool),
            "group": np.array(groups or [str(i) for i in range(n)])}  # fmt: skip


def test_the_rule_is_trainings_and_resampling_moves_it_only_when_few_scores_decide():
    rng = np.random.default_rng(1)
    benign = list(rng.uniform(0, 0.6, 3000)) + [0.97, 0.975, 0.98, 0.985]  # 0.1 % of 3,004: the model may add 3
    dev = scored(benign + [0.999] * 50, [False] * len(benign) + [True] * 50)
    t = noise.threshold(dev, np.arange(len(benign) + 50), 0.001)
    assert (np.array(benign) >= t).sum() == 3 and 0.97 < t <= 0.975 + 1e-6
    ruled = scored(benign + [0.999] * 50, [False] * len(benign) + [True] * 50, ruled=[True] + [False] * (len(benign) + 49))
    assert noise.threshold(ruled, np.arange(len(benign) + 50), 0.001) == t  # a benign request the rules block costs nothing
    draws = noise.bootstrap(dev, 200, 0.001, "request")
    assert draws.min() < t < draws.max()  # four high scores decide, so a resample moves it
    assert noise.served(dev, t) == {"tpr": 1.0, "fpr": round(3 / len(benign), 5)}
    flat = scored([0.1] * 3000 + [0.999] * 50, [False] * 3000 + [True] * 50, groups=[f"g{i % 30}" for i in range(3050)])
    assert set(noise.bootstrap(flat, 50, 0.001, "group")) == {0.5}  # nothing high among the benign: the floor


def test_a_group_cap_keeps_one_family_from_setting_the_threshold():
    rng = np.random.default_rng(2)
    benign = list(rng.uniform(0, 0.6, 2000)) + [0.95, 0.96] + [0.999] * 12  # 0.1 % of 2,014: the model may add 2
    groups = [f"t{i}" for i in range(2002)] + ["oauth"] * 12
    dev = scored(benign + [0.9999] * 20, [False] * len(benign) + [True] * 20, groups=groups + [f"a{i}" for i in range(20)])
    plain = noise.threshold(dev, np.arange(len(benign) + 20), 0.001)
    assert plain > 0.999  # twelve near-copies above everything else decide it
    assert noise.capped_threshold(dev, 0.001, 10**6) == plain  # no cap: training's rule
    one = noise.capped_threshold(dev, 0.001, 1)  # the family counts once, so the 0.96 request fits the budget too
    assert 0.95 < one <= 0.96 + 1e-6
    ruled = dict(dev, ruled=np.array([False] * 2001 + [True] + [False] * 32))  # the rules block the 0.96 one anyway
    assert noise.capped_threshold(ruled, 0.001, 1) <= 0.95 + 1e-6
    assert noise.capped_threshold(scored([0.1] * 100, [False] * 100), 0.001, 1) == 0.5  # the floor, as training's


def test_a_run_on_the_default_model_writes_figures_and_a_chart(tmp_path):
    rng = random.Random(3)
    corpus = tmp_path / "corpus"
    dev_split_corpus(corpus, rng)
    (corpus / "test.jsonl").write_text("".join(json.dumps(labelled_record(rng, i % 3 == 0)) + "\n" for i in range(90)))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "threshold_noise.py"), "--corpus", str(corpus), "--out", str(out),
                          "--rounds", "40", "--threads", "1", "--group-cap", "1,3"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "another train.jsonl" in run.stderr  # not the default bundle's corpus, and it says so
    res = json.loads((out / "threshold_noise.json").read_text())
    assert [r["cap"] for r in res["group_capped"]] == [1, 3] and all(set(r["test_served"]) == {"tpr", "fpr"} for r in res["group_capped"])
    assert all(0.5 <= r["dev_threshold"] <= res["dev_threshold"] for r in res["group_capped"])  # a cap only lowers it
    assert "each group capped at 1 benign requests" in run.stdout
    assert 10 <= res["dev_benign"] <= 40 and res["rounds"] == 40
    assert 0.5 <= res["dev_threshold"] <= CEILING and len(res["by_request"]["thresholds"]) == 5
    assert set(res["by_group"]["test_served"][0]) == {"tpr", "fpr"} and 0.5 <= res["test_threshold"] <= CEILING
    assert "resampled by request" in run.stdout
    if importlib.util.find_spec("matplotlib") is None:
        assert not (out / "threshold_noise.png").exists()
    else:
        assert (out / "threshold_noise.png").stat().st_size > 1000

    # calibration requests from another build join the dev benign requests
    from engine.train.calibration import make

    dev_split_corpus(tmp_path / "build", random.Random(9))
    made = make(corpus, [tmp_path / "build"], 1, "mixed", corpus / "calibration.jsonl", log=lambda _: None)
    assert made["requests"] > 0
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "threshold_noise.py"), "--corpus", str(corpus), "--out", str(out),
                          "--rounds", "40", "--threads", "1", "--calibration", str(corpus / "calibration.jsonl")],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    more = json.loads((out / "threshold_noise.json").read_text())
    assert more["dev_benign"] == res["dev_benign"] + made["requests"] and more["calibration"].endswith("calibration.jsonl")
    assert "dev and calibration benign requests" in run.stdout
