"""Training, export and quantisation of decision-model bundles (needs the `train` extra: torch, onnx, optimum).

Only argparse-level helpers live here, so a CLI can build its parser without torch."""

from __future__ import annotations

import argparse


def add_int8_argument(parser: argparse.ArgumentParser) -> None:
    """`--int8`, for every command that quantises (engine.train, engine.train.ensemble, fine-tuning)."""
    parser.add_argument("--int8", choices=("auto", "dynamic", "static"), default="auto",
                        help="int8 format: the one measured better on the dev split (auto, the default; the measurement "
                             "reads timings, which a loaded machine can tip), or this one")  # fmt: skip
