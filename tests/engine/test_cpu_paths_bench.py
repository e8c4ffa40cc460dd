"""bench/cpu_paths.py: the comparison it prints, its scoring mode on the real default model, and (where qemu-user is
installed) the default scored on an emulated CPU without VNNI."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

import numpy as np
import pytest

from engine import bundle as bundles
from engine.eval import features_of
from engine.model import Model
from tests.factories import bench_script

bench = bench_script("cpu_paths")


def test_compare_counts_how_far_scores_moved_and_the_decisions_that_differ():
    native = np.array([[0.10, 0.9, 0, 0], [0.96, 0.04, 0, 0], [0.951, 0.049, 0, 0]], dtype=np.float32)
    emulated = native.copy()
    emulated[2, 0] = 0.948  # across the threshold
    res = bench.compare(native, emulated, 0.95)
    assert res["requests"] == 3 and res["decisions_differ"] == 1
    assert res["block_logit_moved_median"] == 0 and 0 < res["block_logit_moved_max"] < 0.1
    assert res["probability_moved_max"] == pytest.approx(0.003, abs=1e-6)


def write_requests(tmp_path: Path) -> Path:
    path = tmp_path / "requests.jsonl"
    rows = [{"method": "GET", "path": "/search", "query": "q=red+shoes", "headers": [], "body": "", "label": "allow"},
            {"method": "GET", "path": "/items", "query": "id=1' UNION SELECT password FROM users--", "headers": [],
             "body": "", "label": "block", "attack_class": "sqli"},
            {"method": "POST", "path": "/api/notes", "query": "", "headers": [["Content-Type", "application/json"]],
             "body": json.dumps({"text": "a note " * 200}), "label": "origin"}]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_scoring_mode_gives_the_scores_the_gateway_gives(tmp_path):
    model = Model(bundles.load())
    records = [json.loads(line) for line in write_requests(tmp_path).read_text().splitlines()]
    encs = [model.encode(features_of(r)) for r in records]
    np.savez(tmp_path / "ids.npz", ids=np.array([e.ids for e in encs], dtype=object))
    bench.score(str(model.bundle.model_path), str(tmp_path / "ids.npz"), str(tmp_path / "out.npy"), model.bundle.window)
    got = np.load(tmp_path / "out.npy")
    want = np.concatenate([model.run([e])[0] for e in encs])
    assert got.shape == (3, 4) and np.allclose(got, want, atol=1e-6)
    assert got[1, 0] > 0.9 > got[0, 0]


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() != "x86_64", reason="emulates an x86-64 CPU with this machine's x86-64 Python")
@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user is not installed (apt-get install qemu-user)")
def test_the_default_scores_the_same_on_an_emulated_cpu_without_vnni(tmp_path, capsys):
    assert bench.main(["--requests", str(write_requests(tmp_path)), "--sample", "3", "--out", str(tmp_path / "out")]) == 0
    res = json.loads((tmp_path / "out" / "cpu_paths.json").read_text())["models"]["bundle"]
    assert res["requests"] == 3 and res["decisions_differ"] == 0 and res["probability_moved_max"] < 1e-4
