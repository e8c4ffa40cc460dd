"""bench/recipe_sweep.py: recipe variants trained at once on one encoding, compared on a dev split by whole groups."""

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

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "recipe_sweep.py"
sweep = bench_script("recipe_sweep")


def test_tpr_is_read_at_the_threshold_the_benign_budget_allows():
    # benign scores 9, 8, 7, ... 0 (ten, one group each); attacks 9.5, 8.5, 5.5, 0.5
    score = np.array([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 9.5, 8.5, 5.5, 0.5])
    attack = np.arange(14) >= 10
    weight = (~attack).astype(float)
    assert sweep.tpr_at(score, attack, weight, 0.0) == 0.25  # nothing benign above: the threshold is the top benign score, 9
    assert sweep.tpr_at(score, attack, weight, 0.1) == 0.5  # one benign request may pass: threshold 8
    assert sweep.tpr_at(score, attack, weight, 0.5) == 0.75  # five: threshold 4
    assert sweep.tpr_at(score, attack, weight, 0.05) == 0.25  # half a request: none may pass
    # the five highest benign requests one group, weighing as one request: each is a 30th of the benign weight
    grouped = np.where(np.arange(14) < 5, 1 / 5, weight)
    assert sweep.tpr_at(score, attack, grouped, 0.05) == 0.5  # one of them may pass now: threshold 8


def test_scores_near_one_keep_their_order_in_half_precision():
    probs = np.array([[0.99990, 0.00005, 0.00003, 0.00002], [0.99996, 0.00002, 0.00001, 0.00001]], np.float16)
    assert probs[0, 0] == probs[1, 0]  # p(block) alone ties
    s = sweep.block_score(probs)
    assert s[1] > s[0]


def test_encode_train_and_report_end_to_end(tmp_path):
    corpus = tmp_path / "corpus"
    dev_split_corpus(corpus, random.Random(7), n=900)
    data, runs, out = tmp_path / "data", tmp_path / "runs", tmp_path / "report"

    def bench(*args):
        run = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr
        return run

    bench("encode", "--corpus", str(corpus), "--out", str(data), "--vocab", "600", "--threads", "1")
    meta = json.loads((data / "dev_meta.json").read_text())
    assert meta["dev_split"] == "groups" and meta["dev"] == len(meta["groups"]) > 10
    trained = bench("train", "--data", str(data), "--runs", str(runs), "--configs", "base1,win32", "--epochs", "0.3", "--every", "1")
    assert "2 of 2 configs trained" in trained.stderr
    info = json.loads((runs / "win32.json").read_text())
    assert info["steps"] == info["planned_steps"] > 0 and info["device"] == "cpu"
    assert np.load(runs / "base1.npy").shape == (meta["dev"], 4)
    shown = bench("report", "--data", str(data), "--runs", str(runs), "--out", str(out), "--compare", "base1,win32,base1+win32")
    res = json.loads((out / "report.json").read_text())
    assert list(res["configs"]) == ["base1", "win32", "base1+win32"]
    for row in res["configs"].values():
        assert all(0 <= x <= 100 for view in list(row)[:3] for x in row[view])
        assert row["complete"]
    assert "base1+win32" in shown.stdout
    if importlib.util.find_spec("matplotlib") is None:  # the bench extra is not installed: the figures, no chart
        assert not (out / "sweep.png").exists() and "matplotlib not installed" in shown.stderr
    else:
        assert (out / "sweep.png").stat().st_size > 5000


def test_an_unknown_config_is_named(tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPT), "train", "--data", str(tmp_path), "--runs", str(tmp_path / "r"),
                          "--configs", "base1,huge"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode != 0 and "huge" in run.stderr
