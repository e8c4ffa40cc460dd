"""bench/dev_evasions.py: evasions of a bundle's dev split, decided by the rules alone and as served."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.corpus.build import build
from tests.factories import bench_script

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not available")


def test_a_run_builds_evasions_of_dev_groups_only_and_reports_each_transform(tmp_path):
    corpus = tmp_path / "corpus"
    build(str(DATA), str(corpus), seed=1, scale=0.01, log=lambda msg: None)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "dev_evasions.py"), "--corpus", str(corpus), "--data", str(DATA),
                          "--total", "120", "--out", str(out), "--threads", "1"], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "another train.jsonl" in run.stderr  # not the default bundle's corpus, and it says so
    res = json.loads((out / "dev_evasions.json").read_text())
    assert 60 <= res["evasions"] <= 200 and res["plain_attacks"] > 0
    assert set(res["plain"]) == set(res["evasion"]) == {"rules", "model", "served"}
    assert sum(row["n"] for row in res["by_transform"].values()) == res["evasions"]
    assert set(res["by_transform"]) <= {"double_pct", "mixed_case", "sql_comments", "unicode_escape", "html_entities",
                                        "base64_param", "fullwidth", "deep_json_50k"}  # fmt: skip
    for row in list(res["by_transform"].values()) + list(res["by_class"].values()):
        assert 0.0 <= row["rules"] <= 1.0 and row["model"] <= row["served"] + 1e-9 and row["rules"] <= row["served"] + 1e-9
    assert res["rules"].startswith("rules:clef-default@")
    assert "all evasions" in run.stdout and "by class" in run.stdout
    if importlib.util.find_spec("matplotlib") is None:
        assert not (out / "dev_evasions.png").exists()
    else:
        assert (out / "dev_evasions.png").stat().st_size > 1000


def test_evasions_come_from_the_given_groups_only():
    bench = bench_script("dev_evasions")
    from engine.corpus import sources
    from engine.corpus.build import prepare

    prep = prepare(sources.load(str(DATA)))
    train_groups = {r["group"] for recs in prep.attacks["train"].values() for r in recs[:3]}
    test_groups = {r["group"] for recs in prep.attacks["test"].values() for r in recs}
    groups = train_groups | set(sorted(test_groups)[:50])  # asked for test groups too: it must not build from them
    recs = bench.evasions(str(DATA), groups, 200, seed=1)
    assert recs and {r["group"] for r in recs} <= groups
    assert not {r["group"] for r in recs} & test_groups
    assert all(r["gen"].startswith("evasion/") and r["label"] == "block" for r in recs)
    assert bench.evasions(str(DATA), groups, 200, seed=1) == recs  # seeded
