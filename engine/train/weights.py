"""The PyTorch weights a bundle carries so that it can be fine-tuned: `weights.pt` beside `model.onnx`.

Serving never reads them (it runs the int8 ONNX graph); `clef-gateway train --from-bundle` starts from
them. Why a state dict and not the fp32 ONNX graph: the exporter renames, transposes and folds
initializers, so mapping an ONNX graph back onto ClefNet's parameters would be fragile; a state dict
loads straight into the network, is the same size (~2.3 MB for the default's 577K parameters in fp32),
and keeps the fine-tuning start bit-identical to what the int8 model was quantised from.

The file is written with `torch.save` and read with `weights_only=True`: tensors, numbers and strings
only, so a bundle from elsewhere cannot run code when it is loaded. Its sha256 is recorded in
bundle.json (`sha256["weights.pt"]`, by engine.bundle.write_manifest) and checked on load.
"""

from __future__ import annotations

from pathlib import Path

import torch

from engine.bundle import Bundle, sha256_file
from engine.errors import BundleError
from engine.train.net import build, vocab_size

FILE = "weights.pt"
FORMAT = 1


def save(net: torch.nn.Module, folder: Path) -> Path:
    """A ClefNet's or an Ensemble's weights, with the config that rebuilds it."""
    path = Path(folder) / FILE
    state = {k: v.detach().to(torch.float32).cpu().clone() for k, v in net.state_dict().items()}
    torch.save({"format": FORMAT, "config": dict(net.config), "state_dict": state}, path)
    return path


def load(bundle: Bundle) -> torch.nn.Module:
    """The network of `bundle` (a ClefNet, or an Ensemble of them), in eval mode, with the weights its int8 model
    was made from."""
    path = bundle.path / FILE
    if not path.is_file():
        raise BundleError(
            f"model bundle {bundle.path} ({bundle.id}) has no {FILE}: it carries only the int8 model, which "
            "cannot be fine-tuned. Retrain it with `python -m engine.train` (which saves the weights), or "
            "fine-tune from a bundle that has them."
        )
    want = bundle.manifest.get("sha256", {}).get(FILE)
    if want and sha256_file(path) != want:
        raise BundleError(f"model bundle {bundle.path}: {FILE} is corrupt or was replaced (sha256 differs)")
    try:
        doc = torch.load(path, map_location="cpu", weights_only=True)
        net = build(doc["config"])
        net.load_state_dict(doc["state_dict"])
    except Exception as err:  # torch raises many types for a bad file
        raise BundleError(f"model bundle {bundle.path}: cannot read {FILE} ({err})") from None
    if vocab_size(net.config) != _vocab(bundle):
        raise BundleError(f"model bundle {bundle.path}: {FILE} does not match its tokenizer (vocabulary size)")
    return net.eval()


def _vocab(bundle: Bundle) -> int:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(bundle.tokenizer_path)).get_vocab_size()
