"""Training, export and quantisation of decision-model bundles (needs the `train` extra: torch, onnx, optimum).

Only argparse-level helpers live here, so a CLI can build its parser without torch."""

from __future__ import annotations

import argparse


def add_int8_argument(parser: argparse.ArgumentParser) -> None:
    """`--int8`, `--int8-layout` and `--no-cascade`, for every command that quantises (engine.train,
    engine.train.ensemble, engine.train.requantize, fine-tuning)."""
    parser.add_argument("--int8", choices=("auto", "dynamic", "static"), default="auto",
                        help="int8 format: the one measured better on the dev split (auto, the default; the measurement "
                             "reads timings, which a loaded machine can tip), or this one")  # fmt: skip
    parser.add_argument("--int8-layout", choices=("s8", "u8"), default="s8",  # engine.train.export.LAYOUTS (no torch here)
                        help="weights of a dynamic int8 model: s8 (the default: signed 7-bit linear weights, convolutions "
                             "in fp32; faster on CPUs with int8 dot products, the same scores everywhere) or u8 (every "
                             "weight unsigned 8-bit, as bundles up to 0.11.0 were made)")  # fmt: skip
    parser.add_argument("--no-cascade", dest="cascade", action="store_false",
                        help="serve an ensemble's networks together on every request, rather than one network first and "
                             "the others only where its block score passes a cutoff chosen on the dev split so that no dev "
                             "decision changes (engine/train/cascade.py; dynamic int8 only)")  # fmt: skip


def add_canonical_cache_argument(parser: argparse.ArgumentParser) -> None:
    """`--no-canonical-cache`, for every command that reads a corpus's training file (engine.train,
    engine.train.ensemble, engine.train.requantize, engine.train.recalibrate)."""
    parser.add_argument("--no-canonical-cache", dest="canonical_cache", action="store_false",
                        help="compute the requests' canonical texts and keep no copy: by default they are kept beside the "
                             "corpus (hidden .canonical-*.pkl files) and a later run with the same corpus, seed and reading "
                             "code reads them instead (the default corpus on 2 cores: 3 s against 77 computed); a run timed "
                             "from the corpus alone wants this flag")  # fmt: skip


def add_threshold_arguments(parser: argparse.ArgumentParser) -> None:
    """`--target-fpr` and `--block-threshold`, for every command that sets a bundle's block threshold (engine.train,
    engine.train.ensemble, engine.train.recalibrate, engine.train.requantize)."""
    parser.add_argument("--target-fpr", type=float, default=0.001, help="benign FPR the block threshold is calibrated to")
    parser.add_argument("--block-threshold", type=threshold_number, default=None, metavar="T",
                        help="set the block threshold to T instead of calibrating it: a fixed operating point that runs of "
                             "one recipe on one corpus share. The threshold --target-fpr would set, and the dev figures at "
                             "T, are recorded in bundle.json (calibration.fixed, dev_with_rules)")  # fmt: skip


def threshold_number(text: str) -> float:
    """A --block-threshold value: a block score strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {text}")
    return value
