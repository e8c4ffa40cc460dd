"""Set a bundle's block threshold again, its model unchanged:
`python -m engine.train.recalibrate --bundle DIR --corpus C [--calibration FILE] [--block-threshold T] --out DIR
[--version V] [--install]`.

    the bundle's model.onnx, tokenizer.json and weights.pt (copied as they are: the same scores)
    → the dev split of its own training run (corpus, seed and split as its bundle.json records them), and the
      calibration requests made for that run when given (engine.train.calibration)
    → the block threshold as `python -m engine.train [--calibration FILE]` sets it ([5/6]), beside the rules
      installed now
    → evaluation on corpus/test.jsonl and corpus/evasion.jsonl ([6/6])

What it is for: the threshold is the model's share of the benign false positives that the rules leave (engine.train
[5/6]), so it depends on the rules as well as on the model. After the rules change (a new rules version), a bundle
gets the threshold its training run would set beside them, without an hour of training; with `--calibration`, the
threshold a run with the calibration requests would have set; with `--block-threshold T`, the number T (a recipe's
fixed operating point), the threshold the dev split would have set recorded beside it. Its figures are measured
again. bundle.json keeps the bundle's `trained_on`, names the rules in `dev_with_rules`, and says which bundle it
recalibrated and what threshold it had.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from engine import bundle as bundles
from engine.errors import BundleError
from engine.train import add_canonical_cache_argument, add_threshold_arguments
from engine.train.calibration import DEV_SHARE, CalibrationError
from engine.train.data import progress


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m engine.train.recalibrate", description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", required=True, help="the bundle whose threshold to set again")
    ap.add_argument("--corpus", required=True, help="the corpus the bundle was trained on")
    ap.add_argument("--calibration", default=None, metavar="FILE",
                    help="benign requests held out of the bundle's training run (engine.train.calibration), beside the "
                         "dev split's; without it, the dev split's alone")
    ap.add_argument("--out", required=True, help="bundle folder to write")
    ap.add_argument("--name", default=None, help="default: the bundle's")
    ap.add_argument("--version", default=None, help="default: the bundle's")
    add_threshold_arguments(ap)
    ap.add_argument("--threads", type=int, default=2)
    add_canonical_cache_argument(ap)
    ap.add_argument("--install", action="store_true", help="copy the bundle over engine/bundles/default")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from tokenizers import Tokenizer

    from engine.train import calibrate
    from engine.train.__main__ import (
        announce,
        calibration_requests,
        canonical_cached,
        file_sha256,
        finish,
        load_calibration,
        split_dev,
    )
    from engine.train.data import encode_records, read_jsonl
    from engine.train.ensemble import training_run

    t_start = time.time()
    corpus, out = Path(args.corpus), Path(args.out)
    try:
        bundle = bundles.load(args.bundle)
        train_sha256 = file_sha256(corpus / "train.jsonl")
        run = training_run(bundle, train_sha256)
    except (BundleError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if out.resolve() == bundle.path.resolve():
        print("error: --out must be another folder than --bundle", file=sys.stderr)
        return 2
    args.name, args.version = args.name or bundle.name, args.version or bundle.version
    args.seed, args.dev_split, args.max_tokens, args.limit = int(run["seed"]), run.get("dev_split", "mixed"), bundle.max_tokens, None
    tok = Tokenizer.from_file(str(bundle.tokenizer_path))
    progress(f"[1/6] {bundle.id}: its int8 model as it is; reading {corpus / 'train.jsonl'}"
             + (f" and {args.calibration}" if args.calibration else ""))  # fmt: skip
    extra = None
    if args.calibration:
        try:
            records, record = load_calibration(Path(args.calibration), train_sha256, args)
        except CalibrationError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        extra = calibration_requests(Path(args.calibration), records, record, tok, args)
    _, dev_recs = split_dev(list(read_jsonl(corpus / "train.jsonl")), DEV_SHARE, args.seed, args.dev_split)
    progress(f"[2/6] {len(dev_recs):,} dev requests (held out from the bundle's training); canonical text")
    dev_parts = canonical_cached(corpus / "train.jsonl", train_sha256, dev_recs, args, "dev")
    progress("[3/6] encoding; the rules on the dev split")
    dev_data = encode_records(dev_recs, tok, args.max_tokens, args.threads, progress, dev_parts)
    dev_ruled = calibrate.rules_blocks(dev_recs, dev_data.cut)
    del dev_recs, dev_parts
    progress("[4/6] no training: the bundle's model")
    out.mkdir(parents=True, exist_ok=True)
    for name in (*bundles.FILES, *bundles.CARRIED):
        if (bundle.path / name).is_file():
            shutil.copyfile(bundle.path / name, out / name)
    progress("[5/6] block threshold")
    dev_probs = calibrate.score_onnx(out / "model.onnx", dev_data, bundle.window)
    before = float(bundle.thresholds.get("block", 0.5))
    threshold, union, calibration = calibrate.set_threshold(out / "model.onnx", bundle.window, dev_data, dev_probs,
                                                            dev_ruled, args.target_fpr, extra, fixed=args.block_threshold)  # fmt: skip
    progress(f"  block threshold {threshold:.4f} ({bundle.id}: {before:.4f}); dev with the rules ({union['rules']}): "
             f"TPR {union['tpr']:.4f} FPR {union['fpr']:.4f}")  # fmt: skip
    manifest = dict(bundle.manifest)
    manifest.update(name=args.name, version=args.version, thresholds={**manifest.get("thresholds", {}), "block": calibrate.stored(threshold)},
                    dev_with_rules=union, calibration={**(calibration or {}), "recalibrated_from": {"id": bundle.id, "block": before,
                                                                               "rules": bundle.manifest.get("dev_with_rules", {}).get("rules")}})  # fmt: skip
    manifest.pop("eval", None)  # measured again by finish()
    bundles.write_manifest(out, manifest)
    finish(out, corpus, args.install)
    announce(out, args, t_start)
    if args.block_threshold is not None:
        how = "fixed by --block-threshold"
    else:
        benign = calibration["benign_requests"] if calibration else int((dev_data.labels != calibrate.BLOCK).sum())
        how = f"on {benign:,} benign requests"
    print(f"  block threshold {threshold:.4f} ({bundle.id}: {before:.4f}) {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
