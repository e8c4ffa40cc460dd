"""bench/stage2.py: a two-network bundle's second network trained further on the requests its first one scores
over a bound, the first left as it was; requantize makes a bundle of the result."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from engine import bundle as bundles  # noqa: E402
from engine.train import weights  # noqa: E402
from engine.train.__main__ import main as train_main  # noqa: E402
from engine.train.requantize import main as requantize_main  # noqa: E402
from tests.factories import TINY_TRAINING, bench_script, labelled_corpus  # noqa: E402

bench = bench_script("stage2")


@pytest.mark.slow
def test_only_the_second_network_moves_and_requantize_packages_it(tmp_path, capsys):
    corpus = labelled_corpus(tmp_path / "corpus", random.Random(5))
    common = ["--corpus", str(corpus), *TINY_TRAINING, "--networks", "2", "--threads", "2", "--one-at-a-time"]
    assert train_main([*common, "--out", str(tmp_path / "base")]) == 0
    base = bundles.load(tmp_path / "base")
    first = int(base.manifest.get("cascade", {}).get("first", 0))
    argv = ["--bundle", str(base.path), "--corpus", str(corpus), "--threads", "1", "--epochs", "2", "--first", str(first)]

    # a bound no score passes: nothing to train on, said, and nothing written
    assert bench.main([*argv, "--out", str(tmp_path / "none"), "--select", "1.0"]) == 2
    assert not (tmp_path / "none").exists() and "nothing to train on" in capsys.readouterr().err

    out = tmp_path / "s2"
    assert bench.main([*argv, "--out", str(out), "--select", "0.0"]) == 0
    before, after = weights.load(base), weights.load(bundles.load(out))
    for (name, a), b in zip(before.members[first].state_dict().items(), after.members[first].state_dict().values()):
        assert torch.equal(a, b), name  # the first network as it was, bit for bit
    moved = [torch.equal(a, b) for a, b in zip(before.members[1 - first].state_dict().values(),
                                                after.members[1 - first].state_dict().values())]  # fmt: skip
    assert not all(moved)
    record = bundles.load(out).manifest["stage2"]
    n_train = base.manifest["trained_on"]["records"]
    assert record["first"] == first and record["steps"] > 0
    assert record["selected"]["of_attacks"] + record["selected"]["of_benign"] == n_train
    assert 0 < record["selected"]["attacks"] + record["selected"]["benign"] <= n_train
    with pytest.raises(SystemExit):
        bench.main([*argv, "--out", str(out)])

    # --fresh: the second network drawn anew and trained alone on the region; the first again as it was
    fresh = tmp_path / "fresh"
    assert bench.main([*argv, "--out", str(fresh), "--select", "0.0", "--fresh", "--seed", "3"]) == 0
    drawn = weights.load(bundles.load(fresh))
    assert all(torch.equal(a, b) for a, b in zip(before.members[first].state_dict().values(),
                                                 drawn.members[first].state_dict().values()))  # fmt: skip
    assert not torch.equal(drawn.members[1 - first].state_dict()["embed.weight"],
                           before.members[1 - first].state_dict()["embed.weight"])  # fmt: skip
    record = bundles.load(fresh).manifest["stage2"]
    assert record["fresh"] is True and record["lr"] == 2e-3

    packaged = tmp_path / "s2q"
    assert requantize_main(["--bundle", str(out), "--corpus", str(corpus), "--out", str(packaged), "--threads", "1",
                            "--int8", "dynamic"]) == 0  # fmt: skip
    made = bundles.load(packaged)
    assert torch.equal(weights.load(made).members[1 - first].state_dict()["embed.weight"],
                       after.members[1 - first].state_dict()["embed.weight"])  # fmt: skip
    assert 0.5 <= made.thresholds["block"] < 1 and "eval" in made.manifest
