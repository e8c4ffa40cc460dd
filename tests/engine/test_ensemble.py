"""engine.train.net.Ensemble and `python -m engine.train.ensemble`: members' logits averaged in one graph, the
bundle made from trained members exactly as training makes one, and members that cannot be joined refused."""

from __future__ import annotations

import json
import random

import numpy as np
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")

from engine import bundle as bundles  # noqa: E402
from engine.features import Features  # noqa: E402
from engine.labels import FEATURES  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.train import weights  # noqa: E402
from engine.train.__main__ import main as train_main  # noqa: E402
from engine.train.calibrate import CEILING  # noqa: E402
from engine.train.ensemble import main as ensemble_main  # noqa: E402
from engine.train.export import export_onnx  # noqa: E402
from engine.train.net import ClefNet, Ensemble, build  # noqa: E402
from tests.factories import TINY_TRAINING, labelled_corpus  # noqa: E402


def tiny(seed: int) -> ClefNet:
    torch.manual_seed(seed)
    return ClefNet(300, 4, len(FEATURES), d=16, window=16, ffn=32).eval()


def test_the_ensemble_averages_its_members_logits_in_one_exported_graph(tmp_path):
    a, b = tiny(1), tiny(2)
    net = Ensemble([a, b]).eval()
    ids = torch.randint(4, 300, (3, 48))
    ids[1, 20:] = 0
    with torch.no_grad():
        (la, fa), (lb, fb) = a.logits(ids), b.logits(ids)
        labels, feats = net(ids)
        assert torch.allclose(net.logits(ids)[0], (la + lb) / 2)
        assert torch.allclose(labels, torch.softmax((la + lb) / 2, -1)) and torch.allclose(feats, torch.sigmoid((fa + fb) / 2))
        assert not torch.allclose(labels, a(ids)[0])  # the members differ, so the mean is neither
    path = export_onnx(net, tmp_path / "model.onnx")
    got_labels, got_feats = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"input_ids": ids.numpy()})
    assert np.allclose(got_labels, labels.numpy(), atol=1e-5) and np.allclose(got_feats, feats.numpy(), atol=1e-5)
    assert [i.name for i in ort.InferenceSession(str(path)).get_inputs()] == ["input_ids"]


def test_one_pass_gives_the_pair_s_and_each_member_s_probabilities_as_their_own_forward_passes_do():
    """predict_each (a run of two networks reports each alone, then the pair) reads every batch once per member;
    its figures must be those of the ensemble's and each member's own forward pass over the same batches, bit
    for bit."""
    from engine.train.data import Encoded, batches, pad
    from engine.train.loop import predict, predict_each

    rng = np.random.default_rng(5)
    data = Encoded([rng.integers(4, 300, int(rng.integers(1, 90))).astype(np.int32) for _ in range(70)],
                   np.zeros(70, np.int64), np.zeros((70, len(FEATURES)), np.float32), [""] * 70)  # fmt: skip
    a, b = tiny(1), tiny(2)
    pair = Ensemble([a, b]).eval()

    def forward(net):  # each batch through the net's own forward, as predict did before predict_each
        probs = np.zeros((70, 4), np.float32)
        feats = np.zeros((70, len(FEATURES)), np.float32)
        with torch.no_grad():
            for idx in batches([len(x) for x in data.ids], 512, 16, random.Random(0)):
                p, f = net(torch.from_numpy(pad(data.ids, idx, 16)))
                probs[idx], feats[idx] = p.numpy(), f.numpy()
        return probs, feats

    probs, feats, each = predict_each(pair, data, tokens_per_batch=512)
    want_probs, want_feats = forward(pair)
    assert np.array_equal(probs, want_probs) and np.array_equal(feats, want_feats)
    assert len(each) == 2
    for member, alone in zip((a, b), each):
        assert np.array_equal(alone, forward(member)[0])
        assert np.array_equal(alone, predict(member, data, tokens_per_batch=512)[0])
    assert not np.array_equal(each[0], each[1])
    assert predict_each(a, data, tokens_per_batch=512)[2] == []  # one network: no members to report


def test_a_saved_ensemble_is_rebuilt_from_its_config():
    net = Ensemble([tiny(1), tiny(2)])
    again = build(json.loads(json.dumps(net.config)))
    assert isinstance(again, Ensemble) and len(again.members) == 2
    again.load_state_dict(net.state_dict())
    assert isinstance(build(tiny(1).config), ClefNet)


def test_an_ensemble_among_the_members_contributes_its_own():
    a, b, c = tiny(1), tiny(2), tiny(3)
    net = Ensemble([Ensemble([a, b]), c])
    assert list(net.members) == [a, b, c] and len(net.config["ensemble"]) == 3


def test_training_moves_every_member():
    from engine.train.data import Encoded
    from engine.train.loop import TrainConfig, train

    net = Ensemble([tiny(1), tiny(2)])
    before = [p.detach().clone() for p in net.parameters()]
    rng = np.random.default_rng(0)
    ids = [rng.integers(4, 300, int(n)).astype(np.int64) for n in rng.integers(5, 40, 64)]
    data = Encoded(ids, rng.integers(0, 4, 64).astype(np.int64), np.zeros((64, len(FEATURES)), np.float32), ["g"] * 64)
    train(net, data, TrainConfig(epochs=1, warmup_steps=1, tokens_per_batch=512, log_every_s=1e9))
    moved = [not torch.equal(p0, p1) for p0, p1 in zip(before, net.parameters())]
    half = len(moved) // 2  # members' parameters in order: the first member's, then the second's
    assert any(moved[:half]) and any(moved[half:])  # fine-tuning an ensemble bundle trains both members


def test_members_that_read_different_ids_are_refused():
    with pytest.raises(ValueError, match="differ in window"):
        Ensemble([tiny(1), ClefNet(300, 4, len(FEATURES), d=16, window=32, ffn=32)])
    with pytest.raises(ValueError, match="at least two"):
        Ensemble([tiny(1)])


@pytest.mark.slow
def test_trained_members_become_one_bundle_and_mismatched_ones_are_refused(tmp_path, capsys):
    corpus = labelled_corpus(tmp_path / "corpus", random.Random(5))
    common = ["--corpus", str(corpus), *TINY_TRAINING]
    assert train_main([*common, "--out", str(tmp_path / "a")]) == 0
    assert train_main([*common, "--out", str(tmp_path / "b"), "--init-seed", "2"]) == 0
    a, b = bundles.load(tmp_path / "a"), bundles.load(tmp_path / "b")
    assert a.tokenizer_path.read_bytes() == b.tokenizer_path.read_bytes()  # --init-seed keeps the tokenizer
    assert b.manifest["trained_on"]["init_seed"] == 2
    assert bundles.sha256_file(a.path / "weights.pt") != bundles.sha256_file(b.path / "weights.pt")

    out = tmp_path / "ens"
    assert ensemble_main(["--member", str(a.path), "--member", str(b.path), "--corpus", str(corpus), "--out", str(out),
                          "--threads", "1", "--version", "9.9.9", "--int8", "dynamic"]) == 0  # fmt: skip
    e = bundles.load(out)  # sha256 verified
    m = e.manifest
    assert e.version == "9.9.9" and len(m["architecture"]["ensemble"]) == 2 and m["quantization"]["format"] == "dynamic"
    assert [x["id"] for x in m["trained_on"]["members"]] == [a.id, b.id]
    assert m["trained_on"]["dev_records"] == a.manifest["trained_on"]["dev_records"]  # the members' own dev split
    assert 0.5 <= m["thresholds"]["block"] <= CEILING and set(m["eval"]["test"]) >= {"tpr", "fpr", "per_class"}
    net = weights.load(e)
    assert isinstance(net, Ensemble)
    model = Model(e)
    enc = model.encode(Features.build("GET", "/search", "q=shoes"))
    labels, _ = model.run([enc])
    ids = torch.nn.functional.pad(torch.from_numpy(enc.ids[None, :]), (0, model.padded_length(enc.length) - enc.length))
    with torch.no_grad():
        want = torch.softmax((weights.load(a).logits(ids)[0] + weights.load(b).logits(ids)[0]) / 2, -1).numpy()
    assert np.abs(want - labels).max() < 0.1  # the members' mean (or, under its cascade's cutoff, the first's: close here)

    # one command, `--networks 2`, makes the same bundle as the two runs and the join
    # (--threads 2 shared between two networks: one each, as the members above trained with --threads 1)
    assert train_main([*common, "--out", str(tmp_path / "one"), "--networks", "2", "--version", "9.9.9", "--threads", "2"]) == 0
    one = bundles.load(tmp_path / "one")
    assert one.manifest["thresholds"] == m["thresholds"] and one.manifest["quantization"] == m["quantization"]
    assert one.model_path.read_bytes() == e.model_path.read_bytes()
    assert [x["trained_on"].get("init_seed") for x in one.manifest["trained_on"]["members"]] == [None, 2]
    assert one.manifest["eval"] == m["eval"] | {k: {**m["eval"][k], "latency": one.manifest["eval"][k]["latency"]} for k in m["eval"]}
    assert "2 networks at the same time" in capsys.readouterr().err  # each in its own process (engine.train.parallel)
    # ... and one after the other, in this process: the same weights, bit for bit
    assert train_main([*common, "--out", str(tmp_path / "seq"), "--networks", "2", "--version", "9.9.9", "--one-at-a-time",
                       "--threads", "2"]) == 0  # in turn, each still with its one thread: the same weights  # fmt: skip
    assert "2 networks one after the other" in capsys.readouterr().err
    seq = bundles.load(tmp_path / "seq")
    assert (seq.path / "weights.pt").read_bytes() == (one.path / "weights.pt").read_bytes()
    assert seq.model_path.read_bytes() == one.model_path.read_bytes()
    runs = {b.manifest["trained_on"]["networks_trained"]: b.manifest["trained_on"] for b in (one, seq)}
    assert set(runs) == {"at the same time", "one after the other"}
    assert {r["threads_per_network"] for r in runs.values()} == {1}
    # the training phase's wall clock: one after the other it holds both networks' runs
    members = runs["one after the other"]["members"]
    assert runs["one after the other"]["seconds"] >= sum(m["trained_on"]["seconds"] for m in members) - 0.2

    assert train_main([*common, "--out", str(tmp_path / "c"), "--seed", "2"]) == 0  # another tokenizer
    assert ensemble_main(["--member", str(a.path), "--member", str(tmp_path / "c"), "--corpus", str(corpus),
                          "--out", str(tmp_path / "bad")]) == 2  # fmt: skip
    assert "different tokenizers" in capsys.readouterr().err
    assert ensemble_main(["--member", str(a.path), "--member", str(tmp_path / "nowhere"), "--corpus", str(corpus),
                          "--out", str(tmp_path / "bad")]) == 2  # fmt: skip
