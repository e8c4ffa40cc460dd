"""Training, export and quantisation of decision-model bundles (needs the `train` extra: torch, onnx, optimum).

Only argparse-level helpers live here, so a CLI can build its parser without torch."""

from __future__ import annotations

import argparse


def add_int8_argument(parser: argparse.ArgumentParser) -> None:
    """`--int8`, for every command that quantises (engine.train, engine.train.ensemble, fine-tuning)."""
    parser.add_argument("--int8", choices=("auto", "dynamic", "static"), default="auto",
                        help="int8 format: the one measured better on the dev split (auto, the default; the measurement "
                             "reads timings, which a loaded machine can tip), or this one")  # fmt: skip
    parser.add_argument("--int8-layout", choices=("s8", "u8"), default="s8",  # engine.train.export.LAYOUTS (no torch here)
                        help="weights of a dynamic int8 model: s8 (the default: signed 7-bit linear weights, convolutions "
                             "in fp32; faster on CPUs with int8 dot products, the same scores everywhere) or u8 (every "
                             "weight unsigned 8-bit, as bundles up to 0.11.0 were made)")  # fmt: skip
