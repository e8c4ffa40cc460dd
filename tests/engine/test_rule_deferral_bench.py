"""bench/rule_deferral.py: a block only noisy rules make gives way when the model is sure the request is benign."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.factories import bench_script

ROOT = Path(__file__).resolve().parents[2]
bench = bench_script("rule_deferral")


def test_only_a_block_made_by_noisy_rules_alone_gives_way_and_only_under_the_score():
    score = np.array([0.001, 0.001, 0.001, 0.5, 0.995, 0.001])
    blocked_by = [("noisy-a",), ("noisy-a", "clean"), ("clean",), ("noisy-a",), (), ()]
    today = bench.decide(score, 0.99, blocked_by, set(), 0.0)
    assert today.tolist() == [True, True, True, True, True, False]
    deferred = bench.decide(score, 0.99, blocked_by, {"noisy-a"}, 0.01)
    assert deferred.tolist() == [False, True, True, True, True, False]  # a clean rule, or a doubtful model, keeps it


def test_measure_counts_false_positives_and_the_attacks_deferral_lets_through():
    s = {"score": np.array([0.001, 0.002, 0.9, 0.995]), "attack": np.array([False, True, True, False]),
         "class": np.array(["", "xss", "sqli", ""]), "blocked_by": [("x",), ("x",), ("x",), ()]}  # fmt: skip
    counts = bench.noisy_counts([("x",), ("x",), ("y",)], np.array([False, False, True]))
    assert counts == {"x": 2}  # an attack's rule hit is no misfire
    today, strict, loose = bench.measure(s, 0.99, counts, [(3, 0.01), (2, 0.01)])
    assert (today["fp"], today["tpr"]) == (2, 1.0)
    assert strict["noisy_rules"] == 0 and strict["fp"] == 2
    assert loose["noisy_rules"] == 1 and loose["fp"] == 1 and loose["attacks_lost"] == 1
    assert loose["lost_by_class"] == {"xss": 1} and loose["tpr"] == 0.5


def test_the_benchmark_runs_on_a_small_corpus_and_writes_its_figures(tmp_path):
    import random

    from tests.factories import labelled_record

    rng = random.Random(3)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rows = [labelled_record(rng, i % 2 == 0) for i in range(120)]
    (corpus / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (corpus / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:40]))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "rule_deferral.py"), "--corpus", str(corpus), "--test",
                           "--procs", "1", "--min-benign", "1", "--below", "0.01,0.5", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "rule_deferral.json").read_text())
    assert set(result["splits"]) == {"dev", "test"}
    assert [r["below"] for r in result["splits"]["test"]] == [None, 0.01, 0.5]
    assert result["splits"]["test"][0]["attacks_lost"] == 0  # today's row is the baseline
    assert "(today)" in done.stdout
    assert result["benign_training_blocked"] <= result["benign_training_requests"]
