"""`python -m engine.train.requantize`: a bundle's int8 model made again from its unchanged weights, on its own dev
split, and refused on a corpus it was not trained on."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine import bundle as bundles  # noqa: E402
from engine.features import Features  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.train.__main__ import main as train_main  # noqa: E402
from engine.train.calibrate import CEILING  # noqa: E402
from engine.train.requantize import main as requantize_main  # noqa: E402
from tests.factories import TINY_TRAINING, labelled_corpus, labelled_record  # noqa: E402


@pytest.mark.slow
def test_a_bundle_is_quantised_again_from_its_weights(tmp_path, capsys):
    import onnx

    rng = random.Random(7)
    corpus = labelled_corpus(tmp_path / "corpus", rng)
    assert train_main(["--corpus", str(corpus), "--out", str(tmp_path / "old"), *TINY_TRAINING, "--int8-layout", "u8", "--version", "1.0.0"]) == 0
    old = bundles.load(tmp_path / "old")
    assert old.manifest["quantization"]["layout"] == "u8"

    out = tmp_path / "new"
    assert requantize_main(["--bundle", str(old.path), "--corpus", str(corpus), "--out", str(out), "--threads", "1",
                            "--int8", "dynamic", "--version", "1.0.1"]) == 0  # fmt: skip
    new = bundles.load(out)  # sha256 verified
    m, run = new.manifest, old.manifest["trained_on"]
    assert new.id == "clef-default@1.0.1" and m["quantization"]["format"] == "dynamic" and m["quantization"]["layout"] == "s8"
    # the same weights, tokenizer and dev split; only the int8 graph (and the threshold calibrated on it) is new
    assert (out / "weights.pt").read_bytes() == (old.path / "weights.pt").read_bytes()
    assert new.tokenizer_path.read_bytes() == old.tokenizer_path.read_bytes()
    assert {k: m["trained_on"][k] for k in ("seed", "dev_split", "records", "dev_records", "train_sha256", "steps")} == \
        {k: run[k] for k in ("seed", "dev_split", "records", "dev_records", "train_sha256", "steps")}  # fmt: skip
    assert m["trained_on"]["requantized_from"]["id"] == old.id
    assert m["quantization"]["fp32_dev"] == old.manifest["quantization"]["fp32_dev"]  # same weights, same dev split
    assert 0.5 <= m["thresholds"]["block"] <= CEILING and set(m["eval"]["test"]) >= {"tpr", "fpr", "per_class"}
    ops = {n.op_type for n in onnx.load(str(new.model_path)).graph.node}
    assert "ConvInteger" not in ops and "ConvInteger" in {n.op_type for n in onnx.load(str(old.model_path)).graph.node}
    request = Features.build("GET", "/search", "q=shoes")
    a, b = Model(old), Model(new)
    assert np.abs(a.run([a.encode(request)])[0] - b.run([b.encode(request)])[0]).max() < 0.1
    assert "int8 dynamic (s8)" in capsys.readouterr().out

    # another corpus: its dev split would not be the bundle's own
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.jsonl").write_text((corpus / "train.jsonl").read_text() + json.dumps(labelled_record(rng, True)) + "\n")
    assert requantize_main(["--bundle", str(old.path), "--corpus", str(other), "--out", str(tmp_path / "bad")]) == 2
    assert "not trained on this corpus" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    assert requantize_main(["--bundle", str(tmp_path / "nowhere"), "--corpus", str(corpus), "--out", str(tmp_path / "bad")]) == 2
