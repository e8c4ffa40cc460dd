"""A cascade's second network trained for the requests its first network hands to it (tried twice, not kept).

    python bench/stage2.py --corpus work/corpus-svg --out work/bundles/s2 --lr 1e-3 --epochs 1        # 13 min
    python -m engine.train.requantize --bundle work/bundles/s2 --corpus work/corpus-svg --out work/bundles/s2q --version V

The default serves its two networks as a cascade (engine/train/cascade.py): the first, F, alone for the requests
it scores under the cutoff; the average of both for the rest, where every block is decided. So the second network,
S, only ever matters in that region. This asks whether S does better there when it is trained for it: on the
bundle's own training split (its dev split left out: the threshold is set there), every request F scores over
`--select` (a margin under the cutoff); S trained so that the average of F's logits (F frozen) and its own gets
them right, with the recipe's loss (`engine.train.loop.train`: hard labels, benign errors weighted 2), the
region's benign requests repeated `--benign-repeat` times, a fine-tuning learning rate, `--epochs` passes at most
`--minutes`. F's weights are left as they were, byte for byte.

`--fresh` asks it the other way: S drawn anew (its shape, `--seed`) and trained alone on the region as the recipe
trains a network (its own labels, learning rate 2e-3, 200 warm-up steps, 3 epochs), since a network that has
already fitted the region's requests has little left to learn from them.

    python bench/stage2.py --corpus work/corpus-svg --out work/bundles/s2f --fresh                        # 25 min

Writes OUT/weights.pt, tokenizer.json and bundle.json (with a `stage2` record: what was selected and how it was
trained) and the base's model.onnx as a placeholder: `python -m engine.train.requantize` then makes the int8
graph, sets the block threshold on the dev split, chooses the cascade again and evaluates the held-out files.
Measured once each (bench/RESULTS.md): the fine-tuned S blocks more held-out attacks and more benign requests at its
own threshold and fewer attacks at every matched false-positive rate; the fresh S, which saw few benign requests,
loses 1-3 points at every matched rate. Neither is part of the recipe.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def staged(first, second):
    """A module whose logits are the average of `first`'s (frozen, in eval mode always) and `second`'s: what the
    cascade serves over its cutoff, with only `second` to train."""
    import torch

    from engine.train.net import Ensemble

    class Staged(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.second = first, second
            for p in self.first.parameters():
                p.requires_grad_(False)
            self.window = second.window

        def logits(self, ids):
            with torch.no_grad():
                f = self.first.logits(ids)
            return Ensemble.combine([f, self.second.logits(ids)])

        def train(self, mode: bool = True):
            super().train(mode)
            self.first.eval()
            return self

    return Staged()


def region(data, keep: np.ndarray, benign_repeat: int, block: int):
    """The records of `data` where `keep`, each benign one `benign_repeat` times."""
    from engine.train.data import Encoded

    idx = np.flatnonzero(keep)
    idx = np.concatenate([idx, np.repeat(idx[data.labels[idx] != block], max(0, benign_repeat - 1))])
    return Encoded([data.ids[i] for i in idx], data.labels[idx], data.features[idx], [data.groups[i] for i in idx])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default=None, help="a two-network bundle (default: the packaged default)")
    ap.add_argument("--corpus", default="work/corpus-svg", help="the corpus the bundle was trained on")
    ap.add_argument("--out", required=True, help="the folder to write (must not exist)")
    ap.add_argument("--first", type=int, default=0, help="the first network where the bundle records no cascade")
    ap.add_argument("--select", type=float, default=0.02, help="train on the requests the first network scores over this")
    ap.add_argument("--benign-repeat", type=int, default=3)
    ap.add_argument("--lr", type=float, default=None, help="default 1e-3; with --fresh the recipe's 2e-3")
    ap.add_argument("--epochs", type=float, default=None, help="default 1; with --fresh the recipe's 3")
    ap.add_argument("--minutes", type=float, default=None, help="training time at most (default 20; with --fresh 60)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fresh", action="store_true",
                    help="draw the second network anew (seed --seed) and train it alone on the region, the recipe's way "
                         "(its labels, not the average's); --lr, --epochs and warm-up then default to the recipe's")
    ap.add_argument("--seed", type=int, default=1, help="with --fresh: the seed its initial weights are drawn from")
    ap.add_argument("--limit", type=int, default=None, help="only the first N training records (smoke runs)")
    args = ap.parse_args(argv)
    args.lr = args.lr if args.lr is not None else (2e-3 if args.fresh else 1e-3)
    args.epochs = args.epochs if args.epochs is not None else (3.0 if args.fresh else 1.0)
    args.minutes = args.minutes if args.minutes is not None else (60.0 if args.fresh else 20.0)
    out = Path(args.out)
    if out.exists():
        ap.error(f"{out} exists")

    import torch
    from tokenizers import Tokenizer

    from engine import bundle as bundles
    from engine.train import weights
    from engine.train.__main__ import bundle_split, canonical_cached
    from engine.train.data import encode_records
    from engine.train.loop import TrainConfig, predict, train
    from engine.verdict import LABELS

    block = LABELS.index("block")
    t0 = time.time()
    torch.set_num_threads(args.threads)
    base = bundles.load(args.bundle)
    net = weights.load(base)
    if len(getattr(net, "members", ())) != 2:
        ap.error(f"{base.id} is not a two-network bundle")
    first = int(base.manifest.get("cascade", {}).get("first", args.first))
    F, S = net.members[first], net.members[1 - first]
    run = base.manifest["trained_on"]
    source = Path(args.corpus) / "train.jsonl"
    train_recs, _ = bundle_split(base, source, args.limit, log=log)
    cache = argparse.Namespace(seed=int(run["seed"]), dev_split=run.get("dev_split", "mixed"), limit=None,
                               threads=args.threads, canonical_cache=args.limit is None)  # fmt: skip
    parts = canonical_cached(source, run["train_sha256"], train_recs, cache, "train")
    tokenizer = Tokenizer.from_file(str(base.tokenizer_path))
    data = encode_records(train_recs, tokenizer, int(run.get("train_max_tokens", 8192)), args.threads, log, parts)
    del parts, train_recs
    log(f"scoring {len(data.ids):,} training requests with the first network (member {first})")
    keep = predict(F, data)[0][:, block] > args.select
    attack = data.labels == block
    picked = {"attacks": int((keep & attack).sum()), "of_attacks": int(attack.sum()),
              "benign": int((keep & ~attack).sum()), "of_benign": int((~attack).sum())}  # fmt: skip
    log(f"over {args.select}: {picked['attacks']:,} of {picked['of_attacks']:,} attacks, {picked['benign']:,} of "
        f"{picked['of_benign']:,} benign requests")  # fmt: skip
    if not keep.any():
        log(f"error: the first network scores no training request over {args.select}: nothing to train on")
        return 2
    sub = region(data, keep, args.benign_repeat, block)
    del data
    if args.fresh:  # a network of S's shape, drawn anew: it has not fitted the region's requests already
        from engine.train.loop import set_seed
        from engine.train.net import ClefNet

        set_seed(args.seed)
        S = net.members[1 - first] = ClefNet(**S.config)
        cfg = TrainConfig(epochs=args.epochs, lr=args.lr, seed=args.seed, max_seconds=args.minutes * 60)
        result = train(S, sub, cfg, log=log)
    else:
        cfg = TrainConfig(epochs=args.epochs, lr=args.lr, warmup_steps=50, seed=1, max_seconds=args.minutes * 60)
        result = train(staged(F, S), sub, cfg, log=log)

    out.mkdir(parents=True)
    weights.save(net, out)  # F as it was, S trained in place
    shutil.copyfile(base.tokenizer_path, out / "tokenizer.json")
    shutil.copyfile(base.model_path, out / "model.onnx")  # a placeholder until requantize makes S's graph
    manifest = {k: v for k, v in base.manifest.items() if k not in ("sha256", "eval", "cascade", "quantization")}
    manifest["version"] = f"{base.version}+stage2"
    manifest["stage2"] = {"from": base.id, "first": first, "trained": 1 - first, "fresh": args.fresh, "select": args.select,
                          "benign_repeat": args.benign_repeat, "lr": args.lr, "selected": picked, **result,
                          "model_onnx": "the base's graph, unchanged: requantize this folder before serving these weights"}  # fmt: skip
    bundles.write_manifest(out, manifest)
    log(f"wrote {out}: {result['steps']:,} steps in {result['seconds']:.0f} s, {time.time() - t0:.0f} s in all; "
        f"next: python -m engine.train.requantize --bundle {out} --corpus {args.corpus} --out DIR")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
