"""bench/dev_errors.py: a bundle's served errors on its own dev split, by group."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.factories import bench_script, dev_split_corpus

ROOT = Path(__file__).resolve().parents[2]
dev_errors = bench_script("dev_errors")


def test_errors_are_counted_by_group_and_their_concentration_is_read_off_the_largest():
    # attacks: group a (3, all missed), group b (2: one missed, one blocked by the rules), group c (1, caught)
    # benign: group x (2, one over the threshold), group y (2, one blocked by the rules), group z (1, low)
    groups = ["a", "a", "a", "b", "b", "c", "x", "x", "y", "y", "z"]
    attack = [True] * 6 + [False] * 5
    score = [0.1, 0.2, 0.3, 0.4, 0.1, 0.99, 0.96, 0.5, 0.4, 0.3, 0.01]
    ruled = [False] * 4 + [True] + [False] * 3 + [True] + [False] * 2
    s = {"score": np.array(score, np.float32), "attack": np.array(attack), "ruled": np.array(ruled),
         "group": np.array(groups)}  # fmt: skip
    dev = [{"method": "GET", "path": f"/{g}", "query": "q=1", "attack_class": "sqli" if a else None, "gen": g}
           for g, a in zip(groups, attack)]  # fmt: skip
    res = dev_errors.analyse(s, dev, 0.95, top=3)
    assert res["misses"] == 4 and [(g["group"], g["n"]) for g in res["miss_groups"]] == [("a", 3), ("b", 1)]
    assert res["miss_share_of_largest_groups"] == {"1": 0.75, "2": 1.0, "4": 1.0, "8": 1.0}
    assert res["served_tpr"] == round(2 / 6, 5) and res["served_fpr"] == round(2 / 5, 5)
    assert (res["false_positives"], res["false_positives_by_model"], res["false_positives_by_rules"]) == (2, 1, 1)
    assert {g["group"] for g in res["false_positive_groups"]} == {"x", "y"}
    assert [(g["group"], g["n"]) for g in res["highest_benign"]["groups"]] == [("x", 2), ("y", 1)]
    assert res["miss_groups"][0]["example"] == "GET /a?q=1 "
    assert "75 %" in dev_errors.report({"bundle": "t", **res})


def test_a_file_of_attacks_alone_reports_no_false_positive_rate():
    s = {"score": np.array([0.1, 0.99], np.float32), "attack": np.array([True, True]), "ruled": np.array([False, False]),
         "group": np.array(["a", "b"])}  # fmt: skip
    dev = [{"method": "GET", "path": f"/{g}", "query": "", "attack_class": "nosqli", "gen": g} for g in "ab"]
    res = dev_errors.analyse(s, dev, 0.95, top=3)
    assert res["served_fpr"] is None and res["misses"] == 1
    text = dev_errors.report({"bundle": "t", **res})
    assert "TPR 50.00 %, FPR n/a" in text and "highest-scoring benign" not in text


def test_a_run_on_the_default_model_writes_figures(tmp_path):
    rng = random.Random(5)
    corpus = tmp_path / "corpus"
    dev_split_corpus(corpus, rng)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "dev_errors.py"), "--corpus", str(corpus), "--out", str(out),
                          "--threads", "1", "--top", "5"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "another train.jsonl" in run.stderr  # not the default bundle's corpus, and it says so
    res = json.loads((out / "dev_errors.json").read_text())
    assert 10 <= res["benign"] <= 40 and res["attacks"] >= 3 and res["highest_benign"]["top"] == 5
    assert res["misses"] == sum(g["n"] for g in res["miss_groups"])
    assert "example" not in json.dumps(res)  # request text only prints: a committed results file holds no corpus text
    assert "served misses" in run.stdout and "highest-scoring benign" in run.stdout


def test_a_held_out_file_is_read_instead_of_the_dev_split(tmp_path):
    rng = random.Random(7)
    rows = dev_split_corpus(tmp_path / "corpus", rng, n=30)  # only its records: no corpus is read with --data
    data = tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "dev_errors.py"), "--data", str(data), "--corpus",
                          str(tmp_path / "absent"), "--out", str(out), "--threads", "1", "--top", "5"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads((out / "dev_errors.json").read_text())
    assert res["data"] == str(data) and "corpus" not in res
    assert res["attacks"] + res["benign"] == 30 and res["attacks"] == 10  # every record, not a 5 % dev split of them
    assert res["misses"] == sum(g["n"] for g in res["miss_groups"])
    assert f"on {data}:" in run.stdout
