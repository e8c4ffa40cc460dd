"""engine/train: the whole pipeline on a tiny corpus (train → ONNX → int8 → bundle → eval), and the
exported graph against the PyTorch one."""

from __future__ import annotations

import json
import random

import numpy as np
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")

from engine import bundle as bundles  # noqa: E402
from engine.errors import BundleError  # noqa: E402
from engine.features import Features  # noqa: E402
from engine.labels import FEATURES  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.train import weights  # noqa: E402
from engine.train.__main__ import main as train_main  # noqa: E402
from engine.train.calibrate import CEILING  # noqa: E402
from engine.train.export import export_onnx, quantize_dynamic  # noqa: E402
from engine.train.net import ClefNet  # noqa: E402
from tests.factories import TINY_TRAINING, labelled_corpus  # noqa: E402
from tests.factories import labelled_record as record


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return labelled_corpus(tmp_path_factory.mktemp("corpus"), random.Random(3), train=600, test=120)


@pytest.mark.slow
def test_pipeline_writes_a_verified_int8_bundle(corpus, tmp_path):
    out = tmp_path / "bundle"
    args = ["--corpus", str(corpus), "--out", str(out), "--epochs", "2", "--vocab", "700", "--threads", "1",
            "--version", "9.9.9", "--train-max-tokens", "256", "--dim", "48", "--ffn", "80", "--window", "32", "--device", "cpu"]  # fmt: skip
    assert train_main(args) == 0
    b = bundles.load(out)  # sha256 verified
    m = b.manifest
    assert m["architecture"]["d"] == 48 and m["architecture"]["ffn"] == 80
    assert m["architecture"]["window"] == m["window"] == 32  # and the model below serves in 32-token windows
    assert b.version == "9.9.9" and b.labels == ("block", "cache", "origin", "allow")
    assert list(b.features) == list(FEATURES)
    assert m["quantization"]["format"] in ("dynamic", "static")
    assert 0.5 <= m["thresholds"]["block"] <= CEILING
    assert m["trained_on"]["train_sha256"] and m["trained_on"]["records"] > 0
    assert m["routing"] == "policy" and b.routing == "policy"  # the corpus's routing labels are the policy's
    assert "device" not in m["trained_on"]  # a CPU run's manifest reads as before; only another device is named
    assert set(m["eval"]["test"]) >= {"tpr", "fpr", "per_class", "latency"}
    model = Model(b)
    labels, _ = model.run([model.encode(Features.build("GET", "/search", "q=shoes"))])
    assert np.isclose(labels.sum(), 1.0, atol=1e-3)
    assert any(n.startswith("DynamicQuantize") or n.startswith("QuantizeLinear") or "Integer" in n
               for n in {node.op_type for node in __import__("onnx").load(str(b.model_path)).graph.node})
    # the weights fine-tuning starts from: recorded, and the very network the int8 model was made from
    assert m["sha256"]["weights.pt"] == bundles.sha256_file(out / "weights.pt")
    assert (out / "weights.pt").stat().st_size < 4 << 20
    net = weights.load(b)
    ids = torch.from_numpy(model.encode(Features.build("GET", "/search", "q=shoes")).ids[None, :])
    ids = torch.nn.functional.pad(ids, (0, model.padded_length(ids.shape[1]) - ids.shape[1]))
    assert np.abs(net(ids)[0].detach().numpy() - labels).max() < 0.1


def test_a_corpus_whose_routing_labels_are_the_policy_s_trains_a_policy_routed_bundle(corpus, tmp_path):
    from engine.train.data import corpus_routing

    assert corpus_routing(corpus / "train.jsonl") == "policy"
    rows = [json.loads(line) for line in (corpus / "train.jsonl").read_text().splitlines()]
    benign = next(i for i, r in enumerate(rows) if r["label"] != "block")
    rows[benign]["label"] = "origin" if rows[benign]["label"] != "origin" else "allow"  # a site's own routing label
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert corpus_routing(tmp_path / "train.jsonl") == "model"
    assert corpus_routing(tmp_path / "train.jsonl", limit=benign) == "policy"  # a --limit run reads what it trains on


def test_a_bundle_without_weights_cannot_be_fine_tuned(tmp_path):
    src = bundles.load()
    for name in ("model.onnx", "tokenizer.json", "bundle.json"):
        (tmp_path / name).write_bytes((src.path / name).read_bytes())
    with pytest.raises(BundleError, match="has no weights.pt.*cannot be fine-tuned.*python -m engine.train"):
        weights.load(bundles.load(tmp_path))


def test_exported_graph_matches_pytorch(tmp_path):
    torch.manual_seed(0)
    net = ClefNet(500, 4, len(FEATURES), d=32, window=16, ffn=64).eval()
    ids = torch.randint(4, 500, (3, 48))
    ids[1, 20:] = 0  # padding, a partly empty last window
    ids[2, 5:] = 0  # whole windows of padding (a short request batched with long ones)
    with torch.no_grad():
        want_labels, want_feats = net(ids)
    path = export_onnx(net, tmp_path / "model.onnx")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got_labels, got_feats = sess.run(None, {"input_ids": ids.numpy()})
    assert np.allclose(got_labels, want_labels.numpy(), atol=1e-5)
    assert np.allclose(got_feats, want_feats.numpy(), atol=1e-5)
    q = quantize_dynamic(path, tmp_path / "int8.onnx", per_channel=False)
    q_labels, _ = ort.InferenceSession(str(q), providers=["CPUExecutionProvider"]).run(None, {"input_ids": ids.numpy()})
    assert np.abs(q_labels - want_labels.numpy()).max() < 0.1


def test_the_int8_layouts_store_the_weights_they_name(tmp_path):
    """s8 (the default): linear weights signed and within 7 bits, so no pair of products overflows 16 bits on a CPU
    without int8 dot products; the depthwise convolution stays fp32. u8: every weight unsigned, convolution too."""
    import onnx
    from onnx import numpy_helper

    torch.manual_seed(2)
    net = ClefNet(500, 4, len(FEATURES), d=32, window=16, ffn=64).eval()
    ids = torch.randint(4, 500, (2, 48))
    ids[1, 30:] = 0
    with torch.no_grad():
        want = net(ids)[0].numpy()
    path = export_onnx(net, tmp_path / "model.onnx")
    graphs = {layout: quantize_dynamic(path, tmp_path / f"{layout}.onnx", per_channel=False, layout=layout) for layout in ("s8", "u8")}
    for layout, q in graphs.items():
        graph = onnx.load(str(q)).graph
        inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        ops = [n.op_type for n in graph.node]
        matmul_weights = [inits[n.input[1]] for n in graph.node if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") and n.input[1] in inits]
        assert len(matmul_weights) >= 6  # the convolution's mix, qkv, out, up, down, the pooling key, the head
        if layout == "s8":
            assert all(w.dtype == np.int8 and np.abs(w.astype(int)).max() <= 64 for w in matmul_weights)
            assert "Conv" in ops and "ConvInteger" not in ops
        else:
            assert all(w.dtype == np.uint8 for w in matmul_weights) and "ConvInteger" in ops
        got = ort.InferenceSession(str(q), providers=["CPUExecutionProvider"]).run(None, {"input_ids": ids.numpy()})[0]
        assert np.abs(got - want).max() < 0.1
    with pytest.raises(ValueError, match="unknown int8 layout"):
        quantize_dynamic(path, tmp_path / "x.onnx", layout="s4")


def test_training_and_inference_graphs_agree():
    """The fused attention used in training and the plain one exported give the same answer."""
    torch.manual_seed(1)
    net = ClefNet(300, 4, len(FEATURES), d=32, window=16, ffn=64)
    ids = torch.randint(4, 300, (2, 64))
    ids[1, 30:] = 0
    net.train()
    a = net.logits(ids)[0]
    net.eval()
    b = net.logits(ids)[0]
    assert torch.allclose(a, b, atol=1e-5)


def test_one_graph_serves_a_short_and_a_long_input(tmp_path):
    net = ClefNet(300, 4, len(FEATURES), d=32, window=16, ffn=64).eval()
    sess = ort.InferenceSession(str(export_onnx(net, tmp_path / "m.onnx")), providers=["CPUExecutionProvider"])
    for length in (16, 16 * 257):
        labels, _ = sess.run(None, {"input_ids": np.random.randint(4, 300, (1, length)).astype(np.int64)})
        assert labels.shape == (1, 4)


def test_the_exported_graph_reads_no_shape_but_the_inputs(tmp_path):
    """Every reshape uses the network's own sizes: the graph reads the input's shape once (its batch and length)
    and computes no other shape at run time; each shape computation is a node of its own (the default's two-network
    graph had 9 Shape nodes, and 51 more nodes in all, before)."""
    import onnx

    net = ClefNet(300, 4, len(FEATURES), d=32, window=16, ffn=64).eval()
    graph = onnx.load(str(export_onnx(net, tmp_path / "m.onnx"))).graph
    assert [list(n.input) for n in graph.node if n.op_type == "Shape"] == [["input_ids"]]


def tiny_run(seed: int, **config) -> dict:
    """The weights of a small network after one epoch over 120 random sequences (the same sequences every call)."""
    from engine.train.data import Encoded
    from engine.train.loop import TrainConfig, train

    rng = np.random.default_rng(5)
    data = Encoded(
        ids=[rng.integers(4, 300, int(n)) for n in rng.integers(5, 80, 120)],
        labels=rng.integers(0, 4, 120),
        features=(rng.random((120, len(FEATURES))) < 0.1).astype(np.float32),
        groups=["g"] * 120,
    )
    torch.manual_seed(seed)
    net = ClefNet(300, 4, len(FEATURES), d=32, window=16, ffn=64)
    train(net, data, TrainConfig(epochs=1.0, seed=seed, warmup_steps=2, tokens_per_batch=512, log_every_s=1e9, **config))
    return {k: v.clone() for k, v in net.state_dict().items()}


def test_the_attention_s_training_path_gives_the_gradients_of_its_stacked_form():
    """Training splits the qkv projection into views (engine/train/net.py, a tenth of a step faster); the form it
    replaced indexed one stacked tensor. Both must give the same gradients bit for bit, or the recipe's weights
    (and clef-default 0.11.2's, with --network-threads 2) would move."""
    import math

    from torch.nn import functional as F

    from engine.train.net import WindowAttention

    def stacked(self, x, key_bias):  # the training path before the change, verbatim
        w, h, d = self.window, self.heads, self.d
        qkv = self.qkv(self.norm(x)).reshape(-1, w, 3, h, d // h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=key_bias).permute(0, 2, 1, 3)
        return x + self.out(y.reshape(-1, w, d))

    def grads(forward):
        torch.manual_seed(4)
        net = ClefNet(300, 4, len(FEATURES), d=32, window=16, ffn=64)
        ids = torch.randint(4, 300, (3, 64))
        ids[1, 40:] = 0
        net.train()
        net.attn.forward = forward.__get__(net.attn, WindowAttention)
        labels, feats = net.logits(ids)
        (labels.logsumexp(-1).sum() + math.pi * feats.sum()).backward()
        return {n: p.grad.clone() for n, p in net.named_parameters()}

    new, old = grads(WindowAttention.forward), grads(stacked)
    assert new.keys() == old.keys()
    assert all(torch.equal(new[n], old[n]) for n in new), [n for n in new if not torch.equal(new[n], old[n])]
    assert old["attn.qkv.weight"].abs().sum() > 0


def test_a_rerun_with_the_same_seed_gives_the_same_weights():
    """What makes `python -m engine.train` reproducible: the step count comes from the epochs (not the clock),
    and every draw (initial weights, batch order) from the seed."""
    a, b, c = tiny_run(1), tiny_run(1), tiny_run(2)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_the_training_steps_import_neither_the_serving_runtime_nor_the_corpus_reader():
    """bench/recipe_sweep.py trains on ids encoded elsewhere, on a machine with PyTorch and a GPU but not the serving
    runtime: engine.train.loop and engine.train.net must import with torch and numpy alone."""
    import subprocess
    import sys

    code = ("import sys, engine.train.loop, engine.train.net; "
            "print(sorted(m for m in ('onnxruntime', 'tokenizers', 'libinjection', 'cachetools', 'engine.model') if m in sys.modules))")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_networks_take_the_init_seeds_their_own_runs_would():
    from engine.train.__main__ import member_seed, parse_args

    plain = parse_args(["--networks", "3"])
    assert [member_seed(plain, k) for k in range(3)] == [None, 2, 3]  # the plain command, then --init-seed 2 and 3
    other = parse_args(["--networks", "2", "--seed", "7", "--init-seed", "4"])
    assert [member_seed(other, k) for k in range(2)] == [4, 5]
    with pytest.raises(SystemExit):
        parse_args(["--networks", "0"])


def test_the_mixed_dev_split_leaves_no_generator_family_out_of_training():
    from engine.train.__main__ import split_dev

    records = [{"group": f"gen:family{i % 4}"} for i in range(4000)] + [{"group": f"tpl{i}"} for i in range(400)]
    train, dev = split_dev(records, 0.05, seed=1, how="mixed")
    assert {r["group"] for r in train} >= {f"gen:family{i}" for i in range(4)}
    assert 100 <= sum(r["group"].startswith("gen:") for r in dev) <= 300  # records, not families
    templates_dev = {r["group"] for r in dev if not r["group"].startswith("gen:")}
    assert templates_dev and not templates_dev & {r["group"] for r in train}  # templates stay whole
    assert split_dev(records, 0.05, seed=1, how="mixed") == (train, dev)


def test_the_int8_format_does_not_flip_on_timing_noise():
    from engine.train.calibrate import choose

    def m(ba: float, ms: float) -> dict:
        return {"figures": {"balanced_accuracy": ba}, "p50_ms": ms}

    fp32 = {"balanced_accuracy": 0.963}
    # a rerun of 0.3.1's recipe timed static 15 % faster; the first run had timed dynamic faster
    assert choose({"dynamic": m(0.9633, 0.564), "static": m(0.9634, 0.478)}, fp32) == "dynamic"
    assert choose({"dynamic": m(0.9633, 0.60), "static": m(0.9634, 0.40)}, fp32) == "static"  # clearly faster
    assert choose({"dynamic": m(0.950, 0.40), "static": m(0.9634, 0.60)}, fp32) == "static"  # dynamic loses accuracy
    assert choose({"dynamic": m(0.90, 0.40), "static": m(0.91, 0.60)}, fp32) == "static"  # none close: most accurate


def test_dev_scores_near_the_threshold_are_replaced_by_the_requests_own():
    """calibrate.settle with the packaged int8 model: rows in the band get exactly the scores the gateway's
    Model.run gives the request alone; the others keep the batch's."""
    from engine.model import near
    from engine.train.calibrate import BLOCK, alone_scorer, settle
    from engine.train.data import Encoded, pad

    b = bundles.load()
    model = Model(b)
    rng = random.Random(5)
    recs = [record(rng, i % 3 == 0) for i in range(24)]
    encs = [model.encode(Features.build(r["method"], r["path"], r["query"], r["headers"])) for r in recs]
    ids = [e.ids for e in encs]
    data = Encoded(ids, np.zeros(len(ids), dtype=np.int64), np.zeros((len(ids), len(FEATURES)), np.float32), [""] * len(ids))
    window = b.manifest["window"]
    batched = model.session.run(None, {"input_ids": pad(ids, list(range(len(ids))), window)})[0]
    alone = alone_scorer(b.model_path, data, window)
    threshold = float(np.median(batched[:, BLOCK]))  # a band with rows in it and rows outside it
    rows = near(batched[:, BLOCK], threshold)
    assert 0 < len(rows) < len(ids)
    settled, n = settle(batched, threshold, alone)
    assert n == len(rows)
    for i in range(len(ids)):
        want = model.run([encs[i]])[0][0] if i in rows else batched[i]
        assert np.array_equal(settled[i], want), i
    assert any(not np.array_equal(batched[i], settled[i]) for i in rows)  # the batch did move some scores


def test_the_threshold_is_set_again_on_the_settled_scores():
    """A benign dev request that its batch pushed to 0.985 scores 0.975 alone: with no benign request to be
    blocked, the threshold sits just above 0.975, where the gateway's settled score puts it, not 0.985."""
    from engine.train.calibrate import BLOCK, block_threshold, settled_threshold

    def row(p: float) -> list[float]:
        return [p, (1 - p) / 3, (1 - p) / 3, (1 - p) / 3]

    batched = np.array([row(0.985), row(0.2), row(0.6), row(0.999), row(0.01), row(0.98)], dtype=np.float32)
    labels = np.array([1, 2, 3, BLOCK, 3, 2])  # the fourth is an attack
    alone_scores = {0: np.array(row(0.975), dtype=np.float32), 5: np.array(row(0.97), dtype=np.float32)}
    asked: list[int] = []

    def alone(i: int) -> np.ndarray:
        asked.append(i)
        return alone_scores.get(i, batched[i])

    assert block_threshold(batched, labels, 0.0) > 0.985
    threshold, settled = settled_threshold(batched, labels, 0.0, None, alone, log=lambda msg: None)
    assert 0.975 < threshold < 0.976
    assert settled[0, BLOCK] == np.float32(0.975) and sorted(asked) == [0, 5]  # only the rows near 0.985
    assert threshold == block_threshold(settled, labels, 0.0)


def test_calibration_reads_the_rules_as_the_second_look_does():
    """Training counts the rules' own blocks of dev requests as the gateway serves them: a large page save the
    model reads whole is read as its fields (no block), one it saw only the head and tail of is read whole."""
    from engine.train.calibrate import rules_blocks
    from engine.train.data import encode_records
    from tests.factories import cms_page_save

    page = cms_page_save()
    rec = {"method": "POST", "path": page.path, "query": "", "headers": [list(h) for h in page.headers],
           "body": page.body.decode(), "label": "origin", "attack_class": None}  # fmt: skip
    assert rules_blocks([rec]).tolist() == [True]  # as the rules decide alone
    assert rules_blocks([rec, rec], [False, True]).tolist() == [False, True]
    attack = {**rec, "query": "id=1' UNION SELECT password FROM users--", "label": "block"}
    many = [rec, attack] * 3
    cut = [False, False, True, True, False, True]
    assert rules_blocks(many, cut, procs=2).tolist() == rules_blocks(many, cut).tolist() == [False, True, True, True, False, True]
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(bundles.load().tokenizer_path))
    assert encode_records([rec], tokenizer, 65536, log=lambda m: None).cut.tolist() == [False]
    assert encode_records([rec], tokenizer, 4096, log=lambda m: None).cut.tolist() == [True]


def test_cached_canonical_texts_follow_the_reading_code(tmp_path, monkeypatch, capsys):
    """The texts kept beside a corpus are keyed on the code that reads requests, not only on the canonical
    version: after a change to engine/fields.py a run computes them again instead of training on the old reading."""
    import argparse

    from engine.train import __main__ as train_cli

    source = tmp_path / "train.jsonl"
    recs = [record(random.Random(i), i % 2 == 0) for i in range(4)]
    source.write_text("".join(json.dumps(r) + "\n" for r in recs))
    args = argparse.Namespace(seed=1, dev_split=0.05, limit=None, threads=1)
    first = train_cli.canonical_cached(source, "sha", recs, args, "train")
    assert len(list(tmp_path.glob(".canonical-train-*.pkl"))) == 1
    assert "read from" not in capsys.readouterr().err
    assert train_cli.canonical_cached(source, "sha", recs, args, "train") == first  # the same code: read back
    assert f"train split's canonical texts read from {tmp_path}" in capsys.readouterr().err  # a timed run can tell
    monkeypatch.setattr(train_cli, "reading_hash", lambda: "another reading")
    assert train_cli.canonical_cached(source, "sha", recs, args, "train") == first
    assert len(list(tmp_path.glob(".canonical-train-*.pkl"))) == 2


def test_a_run_without_the_canonical_cache_neither_reads_nor_keeps_one(tmp_path, capsys):
    """`--no-canonical-cache` (a run timed from the corpus alone): the texts are computed even where a cache for them
    lies beside the corpus, and none is written; `sources` (bundle.json's trained_on.canonical_texts) says which."""
    import argparse

    from engine.train import __main__ as train_cli

    source = tmp_path / "train.jsonl"
    recs = [record(random.Random(i), i % 2 == 0) for i in range(4)]
    source.write_text("".join(json.dumps(r) + "\n" for r in recs))
    args = argparse.Namespace(seed=1, dev_split="mixed", limit=None, threads=1, canonical_cache=False)
    sources = {}
    first = train_cli.canonical_cached(source, "sha", recs, args, "train", sources)
    assert sources == {"train": "computed"} and not list(tmp_path.glob(".canonical-*"))
    args.canonical_cache = True  # the default: computed and kept, then read
    assert train_cli.canonical_cached(source, "sha", recs, args, "train", sources) == first
    assert sources == {"train": "computed"} and len(list(tmp_path.glob(".canonical-train-*.pkl"))) == 1
    assert train_cli.canonical_cached(source, "sha", recs, args, "train", sources) == first
    assert sources == {"train": "read from a cache"}
    capsys.readouterr()
    args.canonical_cache = False  # the cache is there now, and still not read
    assert train_cli.canonical_cached(source, "sha", recs, args, "train", sources) == first
    assert sources == {"train": "computed"} and "read from" not in capsys.readouterr().err
    assert train_cli.parse_args(["--no-canonical-cache"]).canonical_cache is False
    assert train_cli.parse_args([]).canonical_cache is True


def test_the_tail_term_pairs_every_attack_with_the_highest_scoring_benign_requests():
    """`--tail-weight`: softplus(benign - attack) on the block log-odds, over each attack and the batch's top
    `share` of benign requests; the other benign requests get no gradient from it."""
    from torch.nn import functional as F

    from engine.train.loop import block_log_odds, tail_loss

    torch.manual_seed(0)
    logits = torch.randn(10, 4, requires_grad=True)
    y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, 1, 0])  # block is label 0: three attacks, seven benign
    z = block_log_odds(logits, 0)
    p = torch.softmax(logits, 1)[:, 0]
    assert torch.allclose(z, torch.log(p / (1 - p)), atol=1e-5)
    loss = tail_loss(logits, y, 0, 0.3)  # ceil(0.3 * 7) = 3 benign requests
    benign = [i for i in range(10) if y[i] != 0]
    top = sorted(benign, key=lambda i: float(z[i]), reverse=True)[:3]
    want = torch.stack([F.softplus(z[j] - z[i]) for i in (0, 4, 9) for j in top]).mean()
    assert torch.isclose(loss, want)
    loss.backward()
    grad = logits.grad[:, 0]
    assert all(grad[i] < 0 for i in (0, 4, 9))  # descent raises each attack's block logit
    assert all(grad[j] > 0 for j in top)  # and lowers the highest benign ones'
    assert all(grad[j] == 0 for j in benign if j not in top)
    # a batch without one of the two sides adds nothing, and still back-propagates
    for only in (torch.tensor([0, 0, 0]), torch.tensor([1, 2, 3])):
        lone = torch.randn(3, 4, requires_grad=True)
        none = tail_loss(lone, only, 0, 0.1)
        none.backward()
        assert none.item() == 0.0 and lone.grad is not None and not lone.grad.any()


def test_the_tail_weight_is_off_in_the_recipe_and_changes_the_weights_when_set():
    from engine.train.__main__ import parse_args
    from engine.train.loop import TrainConfig

    assert parse_args([]).tail_weight == 0.0 and TrainConfig().tail_weight == 0.0
    for bad in (["--tail-weight", "-1"], ["--tail-weight", "1", "--tail-share", "0"], ["--tail-share", "1.5"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
    off, on = tiny_run(1, tail_weight=0.0), tiny_run(1, tail_weight=1.0)
    assert not all(torch.equal(off[k], on[k]) for k in off)


def test_the_threshold_may_pass_0_99_up_to_the_ceiling():
    """Benign dev requests scoring 0.995 set a threshold above them (0.99 used to cap it, leaving them blocked); one
    scoring over the ceiling leaves the threshold on the ceiling, which calibration reports as such."""
    from engine.train.calibrate import BLOCK, at_ceiling, block_threshold, settled_threshold

    def rows(ps: list[float]) -> np.ndarray:
        return np.array([[p, (1 - p) / 3, (1 - p) / 3, (1 - p) / 3] for p in ps], dtype=np.float32)

    def settled(probs: np.ndarray) -> tuple[float, str]:
        said: list[str] = []
        threshold, _ = settled_threshold(probs, labels, 0.001, None, lambda i: probs[i], log=said.append)
        return threshold, said[0]

    labels = np.array([2] * 1000 + [BLOCK])
    high = rows([0.1] * 998 + [0.995, 0.996] + [0.9999])
    t = block_threshold(high, labels, 0.001)  # one benign request may be blocked: the 0.996
    assert 0.995 < t <= 0.996 and not at_ceiling(t)
    t_high, said_high = settled(high)
    assert t_high == t and "ceiling" not in said_high
    over = rows([0.1] * 998 + [0.99999, 0.99999] + [1.0])
    assert block_threshold(over, labels, 0.001) == CEILING
    t, said = settled(over)
    assert t == CEILING and at_ceiling(t) and "the ceiling" in said  # the run's log says the threshold is a cap


def test_the_run_names_the_family_the_threshold_rests_on():
    """0.24.1's dev split: one OAuth family held 18 of the 20 highest benign scores and set the threshold at 0.9974
    where the same recipe's 0.24.0 set 0.9297. threshold_basis reads the requests the threshold is set on (the
    budget's and the one at the cut, among those the rules let through) and says when one family holds most."""
    from engine.train.calibrate import BLOCK, threshold_basis

    def rows(ps: list[float]) -> np.ndarray:
        return np.array([[p, (1 - p) / 3, (1 - p) / 3, (1 - p) / 3] for p in ps], dtype=np.float32)

    labels = np.array([2] * 1000 + [BLOCK])  # 0.2 % of 1,000 benign: 2 may be blocked, the 3rd sets the cut
    scores = [0.1] * 994 + [0.998, 0.997, 0.996, 0.6, 0.5, 0.4] + [0.9999]
    groups = [f"g{i}" for i in range(994)] + ["oauth"] * 3 + ["a", "b", "c"] + ["attack"]
    basis = threshold_basis(rows(scores), labels, groups, 0.002)
    assert basis == {"benign_top": 3, "groups": 1, "largest_group": "oauth", "largest_group_requests": 3, "one_family": True}
    spread = groups[:994] + ["oauth", "x", "y"] + groups[997:]
    assert threshold_basis(rows(scores), labels, spread, 0.002)["one_family"] is False
    # the rules block two of the family: the threshold is set on what they let through (the attack is never counted)
    ruled = np.zeros(len(labels), dtype=bool)
    ruled[[994, 995]] = True
    basis = threshold_basis(rows(scores), labels, groups, 0.002, ruled)
    assert basis["benign_top"] == 3 and basis["largest_group_requests"] == 1 and basis["one_family"] is False


def test_the_stored_threshold_is_rounded_up():
    """bundle.json keeps six decimals; rounding to nearest could put the threshold under the benign score it was set
    just above, and the gateway would block that request."""
    from engine.train.calibrate import stored, threshold_allowing

    scores = np.array([0.1, 0.3, np.float32(0.96543201)], dtype=np.float32)
    t = threshold_allowing(scores, 0)
    assert stored(t) >= t > scores.max() and stored(t) == 0.965433
    assert stored(0.949277) == 0.949277 and stored(0.5) == 0.5  # the default's threshold stays as it is


@pytest.mark.slow
def test_a_limited_run_evaluates_as_few_records_and_says_so(tmp_path):
    """`--limit N` is a smoke run: it trains on N records and reads only the first N of each held-out split (the whole
    splits took 9 minutes of a 3,000-record run), and bundle.json says its figures are of those N."""
    corpus = labelled_corpus(tmp_path / "corpus", random.Random(5), train=300, test=240)
    (corpus / "evasion.jsonl").write_text((corpus / "test.jsonl").read_text())
    out = tmp_path / "bundle"
    assert train_main(["--corpus", str(corpus), "--out", str(out), "--limit", "160", "--no-canonical-cache", *TINY_TRAINING]) == 0
    m = bundles.load(out).manifest
    assert m["trained_on"]["records"] <= 160
    assert m["trained_on"]["canonical_texts"] == {"train": "computed", "dev": "computed"}
    assert not list(corpus.glob(".canonical-*"))  # none kept beside the corpus
    for split in ("test", "evasion"):
        assert m["eval"][split]["records"] == 160 and m["eval"][split]["limit"] == 160
    # the same bundle evaluated whole (--finish without --limit): all 240 records, and no limit recorded
    assert train_main(["--corpus", str(corpus), "--out", str(out), "--finish"]) == 0
    m = bundles.load(out).manifest
    assert m["eval"]["test"]["records"] == 240 and "limit" not in m["eval"]["test"]


def test_the_exported_convolution_is_the_trained_one():
    """ConvBlock trains its depthwise convolution as Conv1d over a transposed copy and exports it as a 1 x k conv2d
    over [b, d, 1, L] in x's own (channels-last) memory order, which ONNX Runtime runs with its depthwise kernel.
    The two must compute the same convolution, in value and in every gradient (to rounding: they sum in another
    order; training with the second, 0.11.10, made a network of its own: bench/RESULTS.md)."""
    from engine.train.net import ConvBlock

    torch.manual_seed(3)
    block = ConvBlock(16, 5, "silu")
    x = torch.randn(3, 40, 16)
    x[1, 30:] = 0  # padding rows, as the embedding gives them

    def run(training: bool):
        block.train(training)
        block.zero_grad()
        xi = x.clone().requires_grad_()
        y = block(xi)
        (y * torch.linspace(-1, 2, y.numel()).reshape(y.shape)).sum().backward()
        return y.detach(), xi.grad, block.conv.weight.grad.clone(), block.conv.bias.grad.clone()

    trained, exported = run(True), run(False)
    for a, b in zip(trained, exported):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_the_bf16_steps_convolution_is_conv1d_s_in_value_and_every_gradient():
    """bf16 training steps run the depthwise convolution in float32 with a backward of their own (DepthwiseConv);
    in float64 it must be nn.Conv1d's convolution, and its gradients the true ones (torch.autograd.gradcheck)."""
    from engine.train.net import DepthwiseConv

    torch.manual_seed(5)
    conv = torch.nn.Conv1d(6, 6, 5, padding=2, groups=6).double()
    x = torch.randn(3, 17, 6, dtype=torch.float64)
    x[1, 12:] = 0  # padding rows, as the embedding gives them
    weight, bias = conv.weight.detach().clone().requires_grad_(), conv.bias.detach().clone().requires_grad_()
    mine = DepthwiseConv.apply(x.clone().requires_grad_(), weight, bias)
    theirs = conv(x.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(DepthwiseConv.apply, (x.clone().requires_grad_(), weight, bias))


def test_a_bf16_step_computes_the_fp32_step_s_function_to_bf16_rounding():
    """Under bf16 (engine.train.loop's autocast) the products run in bfloat16, the convolution in float32 with a backward
    of its own and the attention written out (bf16 products, float32 softmax): the same network, so logits and
    gradients agree with the fp32 step's to bfloat16's rounding, and a batch with whole windows of padding stays finite."""
    torch.manual_seed(6)
    net = ClefNet(300, 4, len(FEATURES), d=32, window=16, ffn=64).train()
    ids = torch.randint(4, 300, (3, 64))
    ids[1, 40:] = 0  # a window half filled, then one of padding
    ids[2, 10:] = 0

    def step(bf16: bool):
        net.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            labels, feats = net.logits(ids)
        labels, feats = labels.float(), feats.float()
        (labels.logsumexp(-1).sum() + 0.5 * feats.sum()).backward()
        return labels.detach(), torch.cat([p.grad.flatten() for p in net.parameters()])

    (l32, g32), (l16, g16) = step(False), step(True)
    assert torch.isfinite(l16).all() and torch.isfinite(g16).all()
    assert not torch.equal(l32, l16)  # bf16 products did run
    torch.testing.assert_close(l16, l32, rtol=0.05, atol=0.05)
    assert torch.nn.functional.cosine_similarity(g16, g32, dim=0) > 0.99


def test_a_bf16_rerun_gives_the_same_weights_and_other_ones_than_fp32():
    """bf16 steps are as reproducible as fp32 ones on one machine, and make a network of their own."""
    a, b, c = tiny_run(1, precision="bf16"), tiny_run(1, precision="bf16"), tiny_run(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_auto_precision_is_bf16_only_where_bf16_products_are_fast(monkeypatch):
    from engine.train import loop
    from engine.train.__main__ import parse_args

    monkeypatch.setattr(loop.torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(loop.torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert loop.resolve_precision("auto") == "fp32"  # an AVX2 CPU: PyTorch would emulate bf16 products
    assert parse_args([]).precision == "fp32"
    monkeypatch.setattr(loop.torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert loop.resolve_precision("auto") == "bf16"
    assert parse_args([]).precision == "bf16" and parse_args(["--precision", "fp32"]).precision == "fp32"
    with pytest.raises(ValueError, match="precision"):
        loop.resolve_precision("fp16")
    with pytest.raises(SystemExit):
        parse_args(["--precision", "fp16"])
    with pytest.raises(ValueError, match="precision"):
        tiny_run(1, precision="fp8")


@pytest.mark.parametrize(
    "module, argv",
    [("ensemble", ["--member", "a", "--member", "b", "--out", "o"]),
     ("requantize", ["--bundle", "b", "--corpus", "c", "--out", "o"]),
     ("recalibrate", ["--bundle", "b", "--corpus", "c", "--out", "o"])],
)  # fmt: skip
def test_every_command_that_reads_a_training_file_takes_no_canonical_cache(module, argv):
    """engine.train's --no-canonical-cache on the commands that read the corpus's dev split again (canonical_cached
    reads args.canonical_cache)."""
    import importlib

    parse = importlib.import_module(f"engine.train.{module}").parse_args
    assert parse(argv).canonical_cache is True
    assert parse([*argv, "--no-canonical-cache"]).canonical_cache is False
