"""bench/model.py's parts that read real requests and compare graph rewrites, on the real default model."""

from __future__ import annotations

import json
from pathlib import Path

from engine import bundle as bundles
from engine.features import Features
from engine.model import DISABLED_OPTIMIZERS, Model
from tests.factories import bench_script

bench = bench_script("model")


def test_real_requests_are_sampled_evenly_and_measured(tmp_path):
    path = tmp_path / "requests.jsonl"
    with path.open("w") as fh:
        for i in range(30):
            long = i in (9, 18, 19)  # bodies of well over 256 tokens
            body = json.dumps({"text": " ".join(f"word{j} and more" for j in range(400))}) if long else ""
            fh.write(json.dumps({"method": "POST" if long else "GET", "path": f"/items/{i}", "query": f"page={i}",
                                 "headers": [["Content-Type", "application/json"]] if long else [], "body": body,
                                 "label": "block" if i % 2 else "allow"}) + "\n")  # fmt: skip
    res = bench.real_requests(Model(bundles.load()), path, 10)
    assert res["requests"] == 10  # every third line: 0, 3, ..., 27; 9 and 18 long, 19 not read
    assert res["share_within_256"] == 0.8
    assert res["tokens_p90"] > 256 > res["tokens_p50"]
    assert 0 < res["forward_p50_ms"] <= res["forward_p90_ms"] and 0 < res["forward_p50_within_256_ms"]
    assert res["with_encoding_p50_ms"] > 0 and res["with_encoding_cold_p50_ms"] > 0
    # read apart: lines 0, 6, ..., 24 benign, 3, 9, ..., 27 attacks (9 past 256 tokens)
    assert res["forward_p50_within_256_benign_ms"] > 0 and res["forward_p50_within_256_attack_ms"] > 0


def test_rewrites_time_the_served_session_against_every_rewrite():
    rows = bench.rewrites(Model(bundles.load()), 3)
    assert [r["tokens"] for r in rows] == [64, 256, 1024]
    assert all(r["served_p50_ms"] > 0 and r["every_rewrite_p50_ms"] > 0 and r["ratio"] > 0 for r in rows)
    assert "SkipLayerNormFusion" in DISABLED_OPTIMIZERS
    assert "SkipLayerNormFusion" in bench.table({"bundle": "b", "cores": 2, "latency": [], "batch": [], "rewrites": rows})


def test_the_machine_is_recorded_with_its_int8_instructions():
    cpu = bench.machine()
    assert cpu["cpu"] and cpu["cores"] >= 1 and cpu["onnxruntime"]
    assert set(cpu["int8_instructions"]) <= set(bench.INT8_FLAGS)
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    assert ("avx2" in cpu["int8_instructions"]) == ("avx2" in flags)
    head = bench.table({"bundle": "b", "cores": 2, "machine": cpu, "latency": [], "batch": [], "rewrites": []}).splitlines()[0]
    assert head.startswith("model b on 2 cores (") and cpu["cpu"] in head
    old = bench.table({"bundle": "b", "cores": 2, "latency": [], "batch": [], "rewrites": []}).splitlines()[0]
    assert old == "model b on 2 cores"  # results written before the machine was recorded still print


def test_mixed_batches_hold_fifteen_benign_requests_and_an_attack():
    model = Model(bundles.load())
    benign = [model.encode(Features.build("GET", f"/items/{i}", f"page={i}")) for i in range(32)]
    attack = [model.encode(Features.build("GET", "/search", f"q=1' UNION SELECT password FROM users--{i}")) for i in range(3)]
    encs, labels = benign + attack, ["allow"] * 32 + ["block"] * 3
    res = bench.mixed_batches(model, encs, labels, reps=2)
    assert res["batches"] == 2 and res["batch_p50_ms"] > 0  # 32 benign fill two batches of 15; 3 attacks, one each
    assert abs(res["per_request_ms"] - res["batch_p50_ms"] / 16) < 1e-3
    assert bench.mixed_batches(model, benign, ["allow"] * 32) is None  # no attack: no such batch
