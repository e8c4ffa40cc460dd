"""bench/train_step.py: the default network's training step, timed with PyTorch held to an instruction set, and two
processes at once."""

from __future__ import annotations

import json

import pytest

from tests.factories import bench_script

bench = bench_script("train_step")


def test_the_summary_takes_medians_over_turns_and_ratios_to_the_first_set():
    runs = {
        "native": [{"capability": "AVX512", "seconds": {"8x64": 0.010, "1x1024": 0.020}},
                   {"capability": "AVX512", "seconds": {"8x64": 0.012, "1x1024": 0.022}},
                   {"capability": "AVX512", "seconds": {"8x64": 0.030, "1x1024": 0.021}}],
        "avx2": [{"capability": "AVX2", "seconds": {"8x64": 0.024, "1x1024": 0.042}}] * 3,
        "native-x2": [{"capability": "AVX512", "seconds": {"8x64": 0.018, "1x1024": 0.0315}, "processes": 2}] * 3,
    }  # fmt: skip
    s = bench.summarise(runs)
    assert s["native"]["seconds"] == {"8x64": 0.012, "1x1024": 0.021}  # the slow third turn is outvoted
    assert s["native"]["ratio_to_native"] == 1.0 and s["native"]["throughput_vs_native"] == 1.0
    assert s["avx2"]["ratio_to_native"] == 2.0 and s["avx2"]["capability"] == ["AVX2"]
    assert s["avx2"]["throughput_vs_native"] == 0.5
    # two processes at once, each step 1.5 times as long: 2 / 1.5 the steps per second
    assert s["native-x2"]["ratio_to_native"] == 1.5 and s["native-x2"]["throughput_vs_native"] == 1.333


def test_each_set_runs_in_its_own_process_with_pytorch_held_to_it(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("an x86 CPU with AVX2 is needed to hold PyTorch to AVX2")
    assert bench.main(["--turns", "1", "--repeats", "1", "--shapes", "4x64,1x128", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "train_step.json").read_text())
    assert result["summary"]["avx2"]["capability"] == ["AVX2"]  # the switch took, in the child only
    assert result["summary"]["native"]["capability"] == [torch.backends.cpu.get_cpu_capability()]
    assert set(result["summary"]["avx2"]["seconds"]) == {"4x64", "1x128"}
    assert result["summary"]["native-x2"]["processes"] == 2 and result["runs"]["native-x2"][0]["processes"] == 2
    assert all(v > 0 for v in result["summary"]["native"]["seconds"].values())
    out = capsys.readouterr().out
    assert "vs native" in out and "avx2" in out


def test_the_bf16_sets_time_bf16_steps_of_the_same_shapes(tmp_path):
    pytest.importorskip("torch")
    assert bench.main(["--isa", "native,bf16", "--turns", "1", "--repeats", "1", "--shapes", "4x64", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "train_step.json").read_text())
    assert set(result["summary"]) == {"native", "bf16"} and result["summary"]["bf16"]["processes"] == 1
    assert result["summary"]["bf16"]["seconds"]["4x64"] > 0
    assert bench.PRECISION["bf16"] == bench.PRECISION["bf16-x2"] == "bf16" and "native" not in bench.PRECISION


def test_an_unknown_set_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--isa", "native,sse9"])
    assert e.value.code == 2
    assert "unknown --isa sse9" in capsys.readouterr().err
