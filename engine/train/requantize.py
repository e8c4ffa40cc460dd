"""Make a bundle's int8 model again from its weights, unchanged:
`python -m engine.train.requantize --bundle DIR --corpus C --out DIR [--version V]`.

    the bundle's weights.pt (what its int8 model was made from; not retrained)
    → the dev split of its own training run (corpus, seed and split as its bundle.json records them: held out
      from those weights)
    → int8 (the current `--int8-layout` unless another is asked), block threshold and bundle.json exactly as
      `python -m engine.train` makes them ([5/6])
    → evaluation on corpus/test.jsonl and corpus/evasion.jsonl ([6/6])

What it is for: a bundle trained before an export or quantisation change (an int8 layout, an operator set)
gets that change without an hour of training, and its figures are measured again rather than assumed. The
corpus must be the one the bundle was trained on (its train.jsonl's sha256 is checked), else its dev split would
not be held out. bundle.json keeps the bundle's `trained_on` and says which bundle's weights it requantised.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from engine import bundle as bundles
from engine.errors import BundleError
from engine.train import add_canonical_cache_argument, add_int8_argument, add_threshold_arguments
from engine.train.data import progress


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m engine.train.requantize", description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", required=True, help="the bundle whose weights.pt to quantise again")
    ap.add_argument("--corpus", required=True, help="the corpus the bundle was trained on")
    ap.add_argument("--out", required=True, help="bundle folder to write")
    ap.add_argument("--name", default=None, help="default: the bundle's")
    ap.add_argument("--version", default=None, help="default: the bundle's")
    add_threshold_arguments(ap)
    ap.add_argument("--threads", type=int, default=2)
    add_int8_argument(ap)
    add_canonical_cache_argument(ap)
    ap.add_argument("--install", action="store_true", help="copy the bundle over engine/bundles/default")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from engine.train import weights
    from engine.train.__main__ import announce, file_sha256
    from engine.train.ensemble import repackage, training_run

    t_start = time.time()
    corpus = Path(args.corpus)
    try:
        bundle = bundles.load(args.bundle)
        run = training_run(bundle, file_sha256(corpus / "train.jsonl"))
        net = weights.load(bundle)
    except (BundleError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args.name, args.version = args.name or bundle.name, args.version or bundle.version
    args.seed, args.dev_split, args.max_tokens, args.limit = int(run["seed"]), run.get("dev_split", "mixed"), bundle.max_tokens, None
    trained_on = {**run, "corpus": str(corpus),
                  "requantized_from": {"id": bundle.id, "sha256": bundle.manifest.get("sha256", {})}}  # fmt: skip
    progress(f"[1/6] {bundle.id}'s weights ({bundle.path / weights.FILE}); reading {corpus / 'train.jsonl'}")
    choice, threshold = repackage(net, bundle.tokenizer_path, args, trained_on, "[4/6] no training: the bundle's weights")
    announce(Path(args.out), args, t_start)
    print(f"  int8 {choice}" + (f" ({args.int8_layout})" if choice == "dynamic" else "") + f"; block threshold {threshold:.4f} "
          f"({bundle.id}: {bundle.thresholds.get('block', 0.5):.4f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
