"""Export the trained network to ONNX and quantise it to int8 with optimum's ONNX Runtime quantiser.

Two int8 variants are made and measured: dynamic (weights int8, activations quantised on the fly) and
static (activations calibrated on corpus samples, QDQ format). The caller keeps the one that measures best
on held-out data and speed.

A dynamic model's weights come in one of two layouts (`LAYOUTS`):
- `s8` (since 0.11.1): the linear layers' weights signed 8-bit held to 7 bits (ONNX Runtime's `reduce_range`),
  the depthwise convolutions left in fp32. ONNX Runtime multiplies unsigned activations by signed weights with the
  CPU's int8 dot-product instructions (AVX-512 VNNI, AVX-VNNI) where it has them; on CPUs without them the
  products are summed in pairs in 16 bits, where full-range signed weights could saturate and 7-bit ones cannot
  (255 · 64 · 2 < 32,768), so the same file scores the same with VNNI and without (bench/cpu_paths.py). Its integer
  convolution with signed weights is slow (seven times the unsigned one's, five to seven times fp32's, for the
  default's 64 channels at 256 tokens), so the convolutions stay fp32: 320 weights each. Measured on a 2-core EPYC (AVX-512 VNNI), 0.11.0's weights, one thread: 0.742 ->
  0.590 ms at 256 tokens, 2.75 -> 2.15 ms at 1,024 (bench/RESULTS.md).
- `u8` (0.11.0 and earlier): every weight unsigned 8-bit, convolutions included.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from engine.train.net import ClefNet


class _Logits(torch.nn.Module):
    """A network whose outputs are its logits (label_logits, feature_logits): what a cascade joins."""

    def __init__(self, net: ClefNet):
        super().__init__()
        self.net = net

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.net.logits(ids)


def export_onnx(net: ClefNet, path: Path, opset: int = 17, logits: bool = False) -> Path:
    """`net`'s graph, returning probabilities (label_probs, feature_probs), or with `logits` its logits
    (label_logits, feature_logits: one network of a cascade, engine/train/cascade.py)."""
    net.eval()
    outputs = ["label_logits", "feature_logits"] if logits else ["label_probs", "feature_probs"]
    dummy = torch.randint(4, 100, (2, 2 * net.window), dtype=torch.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Logits(net) if logits else net,
            (dummy,),
            str(path),
            input_names=["input_ids"],
            output_names=outputs,
            dynamic_axes={"input_ids": {0: "batch", 1: "length"}, **{name: {0: "batch"} for name in outputs}},
            opset_version=opset,
            dynamo=False,
        )
    return path


def _quantizer(fp32: Path):
    from optimum.onnxruntime import ORTQuantizer

    return ORTQuantizer.from_pretrained(fp32.parent, file_name=fp32.name)


def activation_matmuls(fp32: Path) -> list[str]:
    """MatMul nodes with no constant operand (attention's q·kᵀ and att·v): they have no weights to
    quantise, and ONNX Runtime's integer kernels reject per-channel parameters on them."""
    import onnx

    graph = onnx.load(str(fp32)).graph
    consts = {i.name for i in graph.initializer}
    consts |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    return [n.name for n in graph.node if n.op_type == "MatMul" and not any(i in consts for i in n.input)]


LAYOUTS = ("s8", "u8")  # dynamic int8 weight layouts, the default first (see the module's docstring)


def convolutions(fp32: Path) -> list[str]:
    import onnx

    return [n.name for n in onnx.load(str(fp32)).graph.node if n.op_type == "Conv"]


def quantize_dynamic(fp32: Path, out: Path, per_channel: bool = True, layout: str = LAYOUTS[0], full_range: bool = False) -> Path:
    """`full_range`: an s8 model's weights over all 8 bits, which can saturate on CPUs without VNNI; only
    bench/cpu_paths.py makes one, as the control that shows its check can fail."""
    from onnxruntime.quantization import QuantType
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    if layout not in LAYOUTS:
        raise ValueError(f"unknown int8 layout {layout!r}: one of {', '.join(LAYOUTS)}")
    signed = layout == "s8"
    qconfig = AutoQuantizationConfig.avx2(
        is_static=False, per_channel=per_channel, reduce_range=signed and not full_range,
        nodes_to_exclude=activation_matmuls(fp32) + (convolutions(fp32) if signed else []),
    )  # fmt: skip
    if signed:
        qconfig.weights_dtype = QuantType.QInt8
    return _save(_quantizer(fp32), qconfig, out)


def quantize_static(fp32: Path, out: Path, samples: list[np.ndarray], window: int) -> Path:
    """Static int8 (QDQ), activations calibrated (min-max) on `samples` (token id arrays)."""
    from datasets import Dataset
    from optimum.onnxruntime.configuration import AutoCalibrationConfig, AutoQuantizationConfig

    qconfig = AutoQuantizationConfig.avx2(is_static=True, per_channel=True, nodes_to_exclude=activation_matmuls(fp32))
    length = max(window, -(-max(len(s) for s in samples) // window) * window)
    rows = [np.pad(s.astype(np.int64), (0, length - len(s))).tolist() for s in samples]
    quantizer = _quantizer(fp32)
    ds = Dataset.from_dict({"input_ids": rows})
    calib = AutoCalibrationConfig.minmax(ds)
    with tempfile.TemporaryDirectory() as tmp:
        ranges = quantizer.fit(
            dataset=ds,
            calibration_config=calib,
            onnx_augmented_model_name=Path(tmp) / "augmented_model.onnx",
            operators_to_quantize=qconfig.operators_to_quantize,
        )
    return _save(quantizer, qconfig, out, ranges)


def _save(quantizer, qconfig, out: Path, ranges=None) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        quantizer.quantize(save_dir=tmp, quantization_config=qconfig, calibration_tensors_range=ranges)
        produced = [p for p in Path(tmp).glob("*.onnx")]
        if len(produced) != 1:
            raise RuntimeError(f"quantiser wrote {produced}")
        shutil.copyfile(produced[0], out)
    return out
