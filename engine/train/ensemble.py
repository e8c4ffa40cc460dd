"""Join trained bundles into one whose graph averages their logits:
`python -m engine.train.ensemble --member work/bundles/a --member work/bundles/b --corpus work/corpus --out DIR`.

    members' weights.pt → engine.train.net.Ensemble (their logits averaged, one graph)
    → the dev split of the members' own training run (same corpus, seed and split: held out from every member)
    → int8, block threshold and bundle.json exactly as `python -m engine.train` makes them ([5/6])
    → evaluation on corpus/test.jsonl and corpus/evasion.jsonl ([6/6])

Members must share the tokenizer (the same `--seed`: train the second with `--init-seed`, which changes only
the initial weights and the batch order) and the corpus; the command checks both and says what differs.
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
    ap = argparse.ArgumentParser(prog="python -m engine.train.ensemble", description=__doc__.split("\n")[0])
    ap.add_argument("--member", action="append", required=True, metavar="DIR", help="a trained bundle (twice or more)")
    ap.add_argument("--corpus", default="work/corpus", help="the corpus the members were trained on")
    ap.add_argument("--out", required=True, help="bundle folder to write")
    ap.add_argument("--name", default="clef-default")
    ap.add_argument("--version", default="0.1.0")
    add_threshold_arguments(ap)
    ap.add_argument("--threads", type=int, default=2)
    add_int8_argument(ap)
    add_canonical_cache_argument(ap)
    ap.add_argument("--install", action="store_true", help="copy the bundle over engine/bundles/default")
    return ap.parse_args(argv)


def training_run(bundle: bundles.Bundle, train_sha256: str) -> dict:
    """The bundle's `trained_on`, checked against the corpus whose train.jsonl has `train_sha256`: BundleError when
    the dev split made from it would not be the bundle's own (held out from its weights)."""
    run = dict(bundle.manifest.get("trained_on") or {})
    if run.get("train_sha256") != train_sha256:
        raise BundleError(f"{bundle.path} was not trained on this corpus's train.jsonl (sha256 differs): its dev split "
                          "would not be held out")  # fmt: skip
    if "seed" not in run:
        raise BundleError(f"{bundle.path} does not record the seed of the run that trained it (trained_on.seed): its "
                          "dev split cannot be found again")  # fmt: skip
    return run


def check_members(members: list[bundles.Bundle], train_sha256: str) -> dict:
    """What the members share (their training run's seed, dev split, token budget); BundleError naming what
    differs when they cannot be joined."""
    if len(members) < 2:
        raise BundleError("an ensemble needs at least two --member bundles")
    first = members[0]
    for b in members[1:]:
        if bundles.sha256_file(b.tokenizer_path) != bundles.sha256_file(first.tokenizer_path):
            raise BundleError(f"{b.path} and {first.path} have different tokenizers: train the members with the same "
                              "--seed (and --init-seed for the second)")  # fmt: skip
        if b.window != first.window or b.serialization != first.serialization:
            raise BundleError(f"{b.path} and {first.path} differ in window or canonical-text version")
    runs = [training_run(b, train_sha256) for b in members]
    for b, run in zip(members, runs):
        for key in ("seed", "dev_split"):
            if run.get(key) != runs[0].get(key):
                raise BundleError(f"{b.path} and {first.path} differ in {key}: their dev splits differ")
    return {"seed": int(runs[0]["seed"]), "dev_split": runs[0].get("dev_split", "mixed"),
            "max_tokens": first.max_tokens}  # fmt: skip


def main(argv=None) -> int:
    args = parse_args(argv)
    from engine.train import weights
    from engine.train.__main__ import announce, file_sha256
    from engine.train.net import Ensemble

    t_start = time.time()
    corpus = Path(args.corpus)
    try:
        members = [bundles.load(m) for m in args.member]
        train_sha256 = file_sha256(corpus / "train.jsonl")  # 0.9 GB for the default corpus: read once
        shared = check_members(members, train_sha256)
        net = Ensemble([weights.load(b) for b in members]).eval()
    except BundleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args.seed, args.dev_split, args.max_tokens, args.limit = shared["seed"], shared["dev_split"], shared["max_tokens"], None
    trained_on = {
        "corpus": str(corpus), "train_sha256": train_sha256, "seed": args.seed, "dev_split": args.dev_split,
        "members": [{"id": b.id, "sha256": b.manifest.get("sha256", {}), "trained_on": b.manifest.get("trained_on", {})}
                    for b in members],
    }  # fmt: skip
    progress(f"[1/6] {len(members)} bundles, {len(net.members)} networks: {', '.join(b.id for b in members)}; reading {corpus / 'train.jsonl'}")
    choice, threshold = repackage(net, members[0].tokenizer_path, args, trained_on, "[4/6] no training: the members' weights, averaged in one graph")
    announce(Path(args.out), args, t_start)
    print(f"  {len(net.members)} networks from {len(members)} bundles; int8 {choice}; block threshold {threshold:.4f}")
    return 0


def repackage(net, tokenizer: Path, args, trained_on: dict, step4: str) -> tuple[str, float]:
    """The rest of steps [1/6] to [6/6] for weights trained before: the dev split of their training run (`args.seed` and
    `args.dev_split` over `args.corpus`'s train.jsonl), their tokenizer, int8, block threshold and bundle.json
    as training makes them (package), then the held-out evaluation (finish). `trained_on` gets the split's sizes."""
    from engine.train import calibrate
    from engine.train.__main__ import canonical_cached, finish, package, split_dev
    from engine.train.calibration import DEV_SHARE
    from engine.train.data import encode_records, read_jsonl
    from engine.train.loop import predict
    from tokenizers import Tokenizer

    corpus, out = Path(args.corpus), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = list(read_jsonl(corpus / "train.jsonl"))
    train_recs, dev_recs = split_dev(records, DEV_SHARE, args.seed, args.dev_split)
    progress(f"  {len(dev_recs):,} dev requests (held out from the weights' training)")
    progress("[2/6] canonical text; the weights' tokenizer")
    dev_parts = canonical_cached(corpus / "train.jsonl", trained_on["train_sha256"], dev_recs, args, "dev")
    (out / "tokenizer.json").write_bytes(Path(tokenizer).read_bytes())
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    progress("[3/6] encoding")
    dev_data = encode_records(dev_recs, tok, args.max_tokens, args.threads, progress, dev_parts)
    dev_ruled = calibrate.rules_blocks(dev_recs, dev_data.cut)
    trained_on.update(records=len(train_recs), dev_records=len(dev_recs))
    del records, train_recs, dev_parts
    progress(step4)
    dev_probs, _ = predict(net, dev_data)
    fp32_dev = calibrate.figures(dev_probs, dev_data.labels, 0.5)
    choice, threshold = package(net, dev_data, dev_ruled, fp32_dev, out, args, trained_on)
    finish(out, corpus, args.install)
    return choice, threshold


if __name__ == "__main__":
    sys.exit(main())
