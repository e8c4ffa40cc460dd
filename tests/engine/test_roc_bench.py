"""bench/roc.py: thresholds at a fixed false-positive rate, and a run on the real default model."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.factories import bench_script

ROOT = Path(__file__).resolve().parents[2]
roc = bench_script("roc")


def test_the_threshold_at_a_false_positive_rate_blocks_at_most_that_share():
    benign = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
    for fpr, blocked in ((0.0, 0), (0.05, 0), (0.1, 1), (0.25, 2), (0.5, 5), (1.0, 10)):
        t = roc.threshold_at(benign, fpr)
        assert (benign >= t).sum() == blocked
    assert roc.threshold_at(benign, 0.1) > 0.9  # the highest benign score itself is not blocked at 10 %
    fpr, tpr = roc.curve(np.array([0.2, 0.9, 0.99, 0.1, 0.5]), np.array([False, True, True, False, False]))
    assert all(0 <= x <= 1 for x in fpr + tpr) and max(tpr) == 1.0


def test_a_run_on_the_default_model_writes_figures_and_a_chart(tmp_path):
    def req(query, label, cls=None):
        return {"method": "GET", "path": "/search", "query": query, "headers": [["Host", "shop.example"]],
                "body": "", "label": label, "attack_class": cls}  # fmt: skip

    rows = [req(f"q=garden+chair+{i}", "allow") for i in range(20)]
    rows += [req(f"id={i}%27+union+select+password+from+users--", "block", "sqli") for i in range(10)]
    data = tmp_path / "mini.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    benign = tmp_path / "benign.jsonl"
    benign.write_text("".join(json.dumps(r) + "\n" for r in rows[:5]))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "roc.py"), "--bundle", "DEFAULT", "--data", str(data),
                          "--benign", str(benign), "--out", str(out), "--threads", "1", "--served"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "attack TPR at a fixed benign FPR" in run.stdout
    (res,) = json.loads((out / "roc.json").read_text())
    assert res["attacks"] == 10 and res["benign"] == 20 and res["at_fpr"]["1%"]["fpr"] == 0.0
    assert res["at_fpr"]["1%"]["tpr"] >= 0.9  # plain UNION SELECT in a query: the default model catches it
    assert res["by_class"]["sqli"]["n"] == 10 and res["by_class"]["sqli"]["at_fpr"]["1%"] == res["at_fpr"]["1%"]["tpr"]
    assert "attack TPR per class at a benign FPR of 0.1%" in run.stdout
    served = res["served"]  # the default rules block every UNION SELECT and no garden chair (no asset requests here)
    assert (served["rules_attacks"], served["rules_benign"]) == (10, 0) and served["own"] == {
        "threshold": res["own_threshold"], "tpr": 1.0, "fp": 0, "fpr": 0.0}
    assert "served (the model at a threshold, or the default rules)" in run.stdout
    assert served["at_first_threshold"] == served["own"] and "at the first bundle's threshold" in run.stdout
    assert str(benign) in res["benign_files"] and res["benign_files"][str(benign)]["n"] == 5
    if importlib.util.find_spec("matplotlib") is None:  # the chart needs the bench extra; the figures do not
        assert "matplotlib not installed" in run.stderr and not (out / "roc.png").exists()
    else:
        assert (out / "roc.png").stat().st_size > 1000


def test_served_figures_count_the_rules_blocks_first():
    """Six benign requests (the rules block one) and four attacks (the rules block one the model scores low)."""
    p = np.array([0.1, 0.2, 0.3, 0.6, 0.97, 0.05, 0.99, 0.98, 0.7, 0.01])
    attack = np.array([False] * 6 + [True] * 4)
    ruled = np.array([False, False, False, False, False, True, False, False, False, True])
    assert roc.served_threshold(p, attack, ruled, 0) is None  # the rules' own false positive is a floor
    t = roc.served_threshold(p, attack, ruled, 1)  # room for none of the model's
    assert 0.97 < t <= 0.98 and roc.served_rates(p, attack, ruled, t) == {"threshold": t, "tpr": 0.75, "fp": 1, "fpr": 1 / 6}
    s = roc.served_figures(p, attack, ruled, own=0.9, first_fp=None)
    assert (s["rules_benign"], s["rules_attacks"]) == (1, 1)
    assert s["own"]["fp"] == 2 and s["own"]["tpr"] == 0.75  # 0.97 benign and the ruled one; 0.7 slips
    m = s["at_first_fp"]  # at the same 2 false positives the lowest threshold lies just above the 0.6 benign
    assert m["matched_fp"] == 2 and m["fp"] == 2 and 0.6 < m["threshold"] <= 0.7 and m["tpr"] == 1.0
    assert s["at_fpr"]["1%"] is None  # 6 benign requests: 1 % allows none, and the rules already block one
    assert s["at_first_threshold"] == s["own"]  # the first bundle: its own threshold
    other = roc.served_figures(p, attack, ruled, own=0.5, first_fp=2, first_threshold=0.9)  # a candidate read at the first's 2 FP
    assert other["own"]["fp"] == 3 and other["at_first_fp"]["fp"] <= 2
    assert other["at_first_threshold"] == s["own"]  # and at the first's threshold: the same scores, the same figures
    handed = np.array([False, False, False, False, True, False, False, True, False, False])  # the rules decide these
    h = roc.served_figures(p, attack, ruled, own=0.9, first_fp=None, handed=handed)
    assert h["own"]["fp"] == 1 and h["own"]["tpr"] == 0.5  # the 0.97 benign goes, and so does the 0.98 attack
