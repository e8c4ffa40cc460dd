"""engine/bundle.py: the default bundle loads; missing, corrupt or incomplete bundles are named clearly."""

import json
import shutil

import pytest

from engine import bundle as bundles
from engine.errors import BundleError
from engine.model import Model


@pytest.fixture
def copy(tmp_path):
    dest = tmp_path / "b"
    shutil.copytree(bundles.DEFAULT_BUNDLE, dest)
    return dest


def test_default_bundle_loads_and_is_small():
    b = bundles.load()
    assert b.labels == ("block", "cache", "origin", "allow")
    assert b.max_tokens == 65536
    size = sum(p.stat().st_size for p in bundles.DEFAULT_BUNDLE.iterdir())
    assert size < 10_000_000
    assert b.id == f"{b.name}@{b.version}"


def test_the_default_model_scores_the_same_on_cpus_without_int8_dot_products():
    """Its integer weights are signed and within 7 bits (the s8 layout, engine/train/export.py): where a CPU has no
    VNNI, ONNX Runtime sums pairs of uint8 x int8 products in 16 bits, which 255 * 64 * 2 cannot overflow."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    b = bundles.load()
    assert b.manifest["quantization"] == b.manifest["quantization"] | {"format": "dynamic", "layout": "s8"}
    graph = onnx.load(str(b.model_path)).graph
    inits = {i.name: i for i in graph.initializer}
    integer = [n for n in graph.node if n.op_type in ("DynamicQuantizeMatMul", "MatMulInteger", "ConvInteger")]
    assert integer and not any(n.op_type == "ConvInteger" for n in integer)
    for node in integer:
        w = numpy_helper.to_array(inits[node.input[1]])
        assert w.dtype.name == "int8" and abs(int(w.min())) <= 64 and int(w.max()) <= 64, node.name


def test_corrupt_model_is_detected(copy):
    data = bytearray((copy / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "model.onnx").write_bytes(bytes(data))
    with pytest.raises(BundleError, match="model.onnx is corrupt"):
        bundles.load(copy)


def test_missing_file(copy):
    (copy / "tokenizer.json").unlink()
    with pytest.raises(BundleError, match="tokenizer.json is missing"):
        bundles.load(copy)


def test_missing_folder(tmp_path):
    with pytest.raises(BundleError, match="not a folder"):
        bundles.load(tmp_path / "nope")


@pytest.mark.parametrize("text, message", [("{not json", "not valid JSON"), ("[]", "must hold an object"),
                                           ('{"name": "x"}', "lacks version")])
def test_bad_manifest(copy, text, message):
    (copy / "bundle.json").write_text(text)
    with pytest.raises(BundleError, match=message):
        bundles.load(copy)


def test_truncated_model_with_matching_hash_fails_to_load(copy):
    """A model file that is broken yet matches its manifest (rewritten together) still fails clearly."""
    (copy / "model.onnx").write_bytes(b"not an onnx model")
    manifest = json.loads((copy / "bundle.json").read_text())
    bundles.write_manifest(copy, manifest)
    with pytest.raises(BundleError, match="cannot load"):
        Model(bundles.load(copy))


def test_routing_is_what_the_bundle_records_and_model_when_it_says_nothing(copy):
    assert bundles.load().routing == "policy"  # the default's routing labels are all the written policy's
    assert bundles.load().info()["routing"] == "policy"
    manifest = json.loads((copy / "bundle.json").read_text())
    del manifest["routing"]
    (copy / "bundle.json").write_text(json.dumps(manifest))
    assert bundles.load(copy).routing == "model"  # a bundle from before the key: its head routes, as it did
    assert bundles.routing_of("auto", bundles.load(copy)) == "model"
    assert bundles.routing_of("policy", bundles.load(copy)) == "policy"
    manifest["routing"] = "rules"
    (copy / "bundle.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="routing must be policy or model, got 'rules'"):
        bundles.load(copy)
