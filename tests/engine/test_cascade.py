"""engine.train.cascade: an ensemble served one network first, the others only for the rows that need them; the
graph's function, the choice of the first network and its cutoff, and the bundle that training writes with it."""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine import bundle as bundles  # noqa: E402
from engine.features import Features  # noqa: E402
from engine.labels import FEATURES  # noqa: E402
from engine.model import Model, open_session  # noqa: E402
from engine.train import cascade, weights  # noqa: E402
from engine.train.__main__ import main as train_main  # noqa: E402
from engine.train.data import Encoded  # noqa: E402
from engine.train.export import export_onnx, quantize_dynamic  # noqa: E402
from engine.train.net import ClefNet, Ensemble  # noqa: E402
from tests.factories import TINY_TRAINING, labelled_corpus  # noqa: E402


def tiny(seed: int) -> ClefNet:
    torch.manual_seed(seed)
    return ClefNet(300, 4, len(FEATURES), d=16, window=16, ffn=32).eval()


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """Two tiny networks: their plain ensemble graph and their logits graphs, each in dynamic int8 as training makes them."""
    folder = tmp_path_factory.mktemp("cascade")
    net = Ensemble([tiny(1), tiny(2)]).eval()
    plain = quantize_dynamic(export_onnx(net, folder / "plain-fp32.onnx"), folder / "plain.onnx", per_channel=False)
    return folder, net, plain, cascade.member_graphs(net, folder, "s8")


def ids_batch(rows: int = 6, length: int = 48) -> np.ndarray:
    rng = np.random.default_rng(3)
    ids = rng.integers(4, 300, size=(rows, length)).astype(np.int64)
    ids[1, 20:] = 0
    ids[2, 5:] = 0
    return ids


def run(path, ids):
    return open_session(str(path)).run(None, {"input_ids": ids})


def test_with_every_row_over_the_cutoff_it_is_the_plain_ensemble_graph_bit_for_bit(graphs):
    folder, _, plain, members = graphs
    ids = ids_batch()
    want = run(plain, ids)
    for first in (0, 1):
        got = run(cascade.compose(members, first, -1.0, folder / f"always{first}.onnx"), ids)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_with_every_row_under_the_cutoff_it_is_the_first_network_alone(graphs):
    folder, net, plain, members = graphs
    ids = ids_batch()
    for first in (0, 1):
        got = run(cascade.compose(members, first, 1.0, folder / f"alone{first}.onnx"), ids)
        with torch.no_grad():
            labels, feats = net.members[first](torch.from_numpy(ids))
        assert np.abs(got[0] - labels.numpy()).max() < 0.05 and np.abs(got[1] - feats.numpy()).max() < 0.05  # int8 against fp32
        assert not np.allclose(got[0], run(plain, ids)[0], atol=1e-4)  # not the average


def test_the_other_network_reads_only_the_rows_over_the_cutoff_and_each_gets_the_average(graphs):
    folder, _, plain, members = graphs
    ids = ids_batch()
    alone = run(cascade.compose(members, 1, 1.0, folder / "alone.onnx"), ids)
    cutoff = float(np.median(alone[0][:, 0]))  # half the rows each way
    got = run(cascade.compose(members, 1, cutoff, folder / "mixed.onnx"), ids)
    over = alone[0][:, 0] > cutoff
    assert 0 < over.sum() < len(ids)
    # over the cutoff: network 1's logits of the batch and network 0's of those rows alone, averaged in member order
    first_labels, first_feats = run(members[1], ids)
    other_labels, other_feats = run(members[0], ids[over])
    want_labels = torch.softmax(torch.from_numpy((other_labels + first_labels[over]) * np.float32(0.5)), -1).numpy()
    want_feats = torch.sigmoid(torch.from_numpy((other_feats + first_feats[over]) * np.float32(0.5))).numpy()
    assert np.allclose(got[0][over], want_labels, atol=1e-6) and np.allclose(got[1][over], want_feats, atol=1e-6)
    assert np.array_equal(got[0][~over], alone[0][~over]) and np.array_equal(got[1][~over], alone[1][~over])
    # one row alone over the cutoff: the plain graph's scores of that row, bit for bit
    row = ids[over][:1]
    assert all(np.array_equal(a, b) for a, b in zip(run(folder / "mixed.onnx", row), run(plain, row)))


def test_the_cutoff_keeps_a_margin_under_every_block_and_the_first_network_stops_the_most_benign_rows():
    blocked = np.array([True, True, False, False, False, False])
    benign = np.array([False, False, True, True, True, True])
    a = np.array([0.9, 0.3, 0.001, 0.01, 0.04, 0.15])  # lowest block 0.3: cutoffs up to 0.1 keep 2x under it
    b = np.array([0.99, 0.95, 0.001, 0.003, 0.03, 0.3])  # lowest block 0.95: up to 0.2
    assert cascade.choose([a, b], blocked, benign) == (0, 0.1)  # a stops 3 benign rows at 0.1, b 3 at 0.2: a tie, the first
    b[5] = 0.1
    assert cascade.choose([a, b], blocked, benign) == (1, 0.2)  # b now stops all 4
    a[1] = b[1] = 0.0015  # a block scored under twice the smallest cutoff: none qualifies
    assert cascade.choose([a, b], blocked, benign) is None
    none_blocked = np.zeros(6, dtype=bool)
    assert cascade.choose([a, b], none_blocked, benign) == (0, cascade.GRID[-1])
    high = np.array([0.9, 0.9, 0.3, 0.5, 0.7, 0.25])  # every benign row over every cutoff: nothing to save
    assert cascade.choose([high, high], blocked, benign) is None


def dev_set(ids: np.ndarray, labels: list[int]) -> Encoded:
    rows = [row[row != 0] for row in ids]
    return Encoded(ids=rows, labels=np.array(labels), features=np.zeros((len(rows), len(FEATURES)), dtype=np.float32),
                   groups=["g"] * len(rows), cut=np.zeros(len(rows), dtype=bool))  # fmt: skip


def test_attach_replaces_the_graph_only_when_no_dev_decision_changes(graphs, tmp_path, monkeypatch):
    _, net, plain, _ = graphs
    ids = ids_batch(12)
    model = tmp_path / "model.onnx"
    model.write_bytes(plain.read_bytes())
    scores = run(plain, ids)[0][:, 0]
    threshold = float(np.sort(scores)[-3])  # the plain graph blocks the three highest
    dev = dev_set(ids, [0 if s >= threshold else 2 for s in scores])
    # untrained networks score every row over every cutoff: no benign row would stop, so no cascade
    assert (scores > cascade.GRID[-1]).all()
    assert cascade.attach(net, dev, threshold, model, "s8", log=lambda m: None) is None
    assert model.read_bytes() == plain.read_bytes()
    # a cutoff that drops blocks (a fault choose never makes): the plain graph stays
    model.write_bytes(plain.read_bytes())
    monkeypatch.setattr(cascade, "choose", lambda alone, blocked, benign: (0, threshold * 0.999))
    assert cascade.attach(net, dev, threshold, model, "s8", log=lambda m: None) is None
    assert model.read_bytes() == plain.read_bytes()
    assert cascade.attach(tiny(1), dev, threshold, model, "s8", log=lambda m: None) is None  # one network: nothing to do
    # a bundle whose routing head routes: under the cutoff that head would be the first network's alone
    monkeypatch.setattr(cascade, "choose", lambda alone, blocked, benign: (0, 0.001))
    assert cascade.attach(net, dev, threshold, model, "s8", log=lambda m: None, routing="model") is None
    assert model.read_bytes() == plain.read_bytes()


def test_training_two_networks_writes_a_cascade_that_serves_as_recorded(tmp_path):
    corpus = labelled_corpus(tmp_path / "corpus", random.Random(5))
    common = ["--corpus", str(corpus), *TINY_TRAINING, "--networks", "2", "--threads", "2", "--one-at-a-time"]
    assert train_main([*common, "--out", str(tmp_path / "c")]) == 0
    assert train_main([*common, "--out", str(tmp_path / "plain"), "--no-cascade"]) == 0
    c, plain = bundles.load(tmp_path / "c"), bundles.load(tmp_path / "plain")
    rec = c.manifest["cascade"]
    assert "cascade" not in plain.manifest and rec["dev"]["decisions_changed"] == 0
    assert rec["first"] in (0, 1) and rec["cutoff"] in cascade.GRID and rec["cutoff"] < c.thresholds["block"]
    assert (c.path / "weights.pt").read_bytes() == (plain.path / "weights.pt").read_bytes()
    assert c.manifest["thresholds"] == plain.manifest["thresholds"]
    assert c.info()["cascade"] == {"first": rec["first"], "cutoff": rec["cutoff"]} and "cascade" not in plain.info()  # /v1/models
    a, b = Model(c), Model(plain)
    requests = [Features.build("GET", "/search", "q=shoes"), Features.build("GET", "/", "id=1' OR '1'='1"),
                Features.build("POST", "/comment", "", {"content-type": "application/json"}, b'{"text": "<script>alert(1)</script>"}')]  # fmt: skip
    assert 0 <= rec["dev"]["one_network"] <= 1 and rec["dev"]["requests"] == c.manifest["trained_on"]["dev_records"]
    # what is served: the first network's scores where they stay under the cutoff, the plain graph's elsewhere
    members = cascade.member_graphs(weights.load(c), tmp_path, c.manifest["quantization"]["layout"])
    first = Model(c)
    first.session = open_session(str(cascade.compose(members, rec["first"], 1.0, tmp_path / "first.onnx")))
    for request in requests:
        enc = a.encode(request)
        got, both, alone = a.run([enc])[0][0], b.run([enc])[0][0], first.run([enc])[0][0]
        assert np.array_equal(got, alone if alone[0] <= rec["cutoff"] else both)


@pytest.mark.slow
def test_fine_tuning_an_ensemble_writes_the_cascade_of_its_own_graph(tmp_path, capsys):
    """`clef-gateway train --from-bundle` on a two-network base: the fine-tuned bundle's `cascade` record describes
    its own graph (chosen again at the base's threshold), never the base's record copied."""
    import onnx

    from engine.train.export import export_onnx, quantize_dynamic
    from gateway import cli
    from tests.sitecorpus import journal_site_marked, train_base, write_corpus

    corpus = write_corpus(tmp_path / "corpus")
    a, b = (bundles.load(train_base(corpus, tmp_path / f"net{seed}", seed=seed)) for seed in (1, 2))
    assert a.tokenizer_path.read_bytes() == b.tokenizer_path.read_bytes()  # one corpus, one tokenizer
    base = tmp_path / "base"
    base.mkdir()
    (base / "tokenizer.json").write_bytes(a.tokenizer_path.read_bytes())
    net = Ensemble([weights.load(a), weights.load(b)]).eval()
    weights.save(net, base)
    quantize_dynamic(export_onnx(net, tmp_path / "fp32.onnx"), base / "model.onnx", per_channel=False)
    manifest = {k: v for k, v in a.manifest.items() if k != "sha256"}
    bundles.write_manifest(base, {**manifest, "architecture": net.config, "cascade": {"first": 7, "cutoff": 0.5}})
    journal = tmp_path / "journal.db"
    journal_site_marked(journal, base)
    for name, more in (("site-v2", []), ("site-plain", ["--no-cascade"])):
        out = tmp_path / name
        argv = ["train", "--from-bundle", str(base), "--feedback", str(journal), "--out", str(out), "--corpus", str(corpus),
                "--threads", "1", "--epochs", "0.05", "--int8", "dynamic", *more]  # fmt: skip
        assert cli.main(argv) in (0, 1)  # accepted or not, the bundle is written (beside, when the gate rejects it)
        made = out if out.exists() else tmp_path / f"{name}.rejected"
        tuned = bundles.load(made, allow_rejected=True)
        ops = {n.op_type for n in onnx.load(str(tuned.model_path)).graph.node}
        record = tuned.manifest.get("cascade")
        if record is None:  # --no-cascade, or none qualified: the plain graph, and no record of the base's
            assert "If" not in ops
        else:
            assert not more and record["first"] in (0, 1) and record["dev"]["decisions_changed"] == 0 and "If" in ops
    assert "cascade" not in tuned.manifest  # the --no-cascade run
