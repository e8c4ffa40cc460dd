"""Fine-tune a bundle on a site's own traffic: `clef-gateway train --from-bundle default|DIR --feedback
journal.db --out bundles/site-v2 [--corpus work/corpus] [--minutes N]`.

    base bundle: weights.pt (engine/train/weights.py) and tokenizer.json, kept as they are
    journal: the marked examples (engine/feedback.py); a quarter of each label held out for the gate
    corpus/train.jsonl: a replay sample, so the model does not forget the attacks it knew; its targets are
      the base model's own label distributions (learning without forgetting), not the hard labels: the
      served threshold sits near 1 (0.9493 in the default), where a model that merely grows less sure of its
      blocks loses them
    → the mix (site examples repeated to `--site-share` of it) → a few epochs at a low learning rate,
      on CPU, within `--minutes` → int8 exactly as training makes it (calibrate.int8); the base's block
      threshold is kept (a few hundred dev requests cannot calibrate a 0.1 % false-positive target)
    → the gate (engine/train/gate.py) on corpus/test.jsonl (or --test) and the held-out site examples
    → OUT when accepted (exit 0); OUT.rejected, marked rejected so that nothing serves it, when not (exit 1)

The replay needs the base corpus on disk: the packaged bundle carries no training data, because the corpus
mixes sources whose licences do not let us ship it (CSIC 2010's is unclear). Without `--corpus`, work/corpus
is used when it exists; otherwise the command says so and stops (exit 2). Bundles are never overwritten:
a running gateway, or a rollback, may need the old one.

Only argparse is imported at module level: the CLI builds its parser from `add_arguments` without torch.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from engine.train import add_int8_argument

DEFAULT_CORPUS = Path("work/corpus")


class FinetuneError(Exception):
    """Something the operator must fix first; the message says what."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-bundle", required=True, metavar="default|DIR", help="the bundle to start from")
    p.add_argument("--feedback", required=True, metavar="JOURNAL", help="the decision journal with marked examples")
    p.add_argument("--out", required=True, metavar="DIR", help="the new bundle's folder (must not exist)")
    p.add_argument("--corpus", metavar="DIR", help=f"the base corpus: train.jsonl replayed, test.jsonl for the gate "
                                                  f"(default {DEFAULT_CORPUS} when it exists)")  # fmt: skip
    p.add_argument("--test", metavar="FILE", help="held-out requests for the gate (default CORPUS/test.jsonl)")
    p.add_argument("--replay", type=int, default=4000, metavar="N", help="corpus records replayed (default 4000)")
    p.add_argument("--gate-limit", type=int, default=5000, metavar="N", help="held-out requests sampled for the gate")
    p.add_argument("--max-tpr-drop", type=float, default=0.002,
                   help="largest held-out attack TPR drop accepted (0.002 = 0.2 point)")
    p.add_argument("--minutes", type=float, default=10.0, help="training time at most (default 10)")
    p.add_argument("--epochs", type=float, default=3.0, help="passes over the mix at most (default 3)")
    p.add_argument("--site-share", type=float, default=0.25, help="share of the mix that is the site's examples")
    p.add_argument("--lr", type=float, default=5e-4, help="peak learning rate (default 5e-4: a nudge, not a retrain)")
    p.add_argument("--name", help="bundle name (default: the base's)")
    p.add_argument("--version", help="bundle version (default: the base's + site.<hash of the marks>)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    add_int8_argument(p)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.train.finetune", description=__doc__.split("\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except FinetuneError as err:
        print(f"clef-gateway train: {err}", file=sys.stderr)
        return 2


def sample_lines(path: Path, n: int, seed: int) -> list[dict]:
    """`n` records drawn evenly from a JSONL file (reservoir sampling: one pass, only the sample parsed)."""
    rng, keep, seen = random.Random(seed), [], 0
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            seen += 1
            if len(keep) < n:
                keep.append(line)
            elif (j := rng.randrange(seen)) < n:
                keep[j] = line
    return [json.loads(line) for line in keep]


def split_site(records: list[dict], seed: int) -> tuple[list[dict], list[dict], bool]:
    """(train, held out, held_out?): a quarter of each label's distinct requests held out (one when it has 2-7),
    with every mark of each; with a single request of every label nothing can be, and the gate reads the training
    marks instead.

    The split goes by what was requested (method, path, query, body), not by the journal's ids: a request
    marked twice falls on one side, so the gate never reads a copy of a training example as held out, and
    the same marks give the same split, and so the same bundle, whichever requests carried them."""
    def content(r: dict) -> str:
        body = r.get("body") or ""
        return json.dumps([r["method"], r["path"], r.get("query") or "", body if isinstance(body, str) else repr(body)])

    def rank(key: str) -> str:
        return hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).hexdigest()

    train, held = [], []
    for label in sorted({r["label"] for r in records}):
        groups: dict[str, list[dict]] = {}
        for r in records:
            if r["label"] == label:
                groups.setdefault(content(r), []).append(r)
        keys = sorted(groups, key=rank)
        k = max(1, len(keys) // 4) if len(keys) >= 2 else 0
        held += [r for key in keys[:k] for r in groups[key]]
        train += [r for key in keys[k:] for r in groups[key]]
    return (train, held, True) if held else (records, records, False)


def _corpus(args: argparse.Namespace) -> tuple[Path, Path]:
    corpus = Path(args.corpus) if args.corpus else DEFAULT_CORPUS
    if not (corpus / "train.jsonl").is_file():
        where = f"{corpus}/train.jsonl does not exist" if args.corpus else f"no --corpus given and no {DEFAULT_CORPUS}"
        raise FinetuneError(
            f"{where}. Fine-tuning replays a sample of the base corpus so the model does not forget attacks; build it "
            "with `python -m engine.corpus --data ../shared/data --out work/corpus` and pass --corpus. (Bundles carry "
            "no training data: the corpus mixes sources whose licences do not allow shipping it.)"
        )
    test = Path(args.test) if args.test else corpus / "test.jsonl"
    if not test.is_file():
        raise FinetuneError(f"{test} does not exist: the gate needs held-out requests (--test FILE)")
    return corpus, test


def _inputs(args: argparse.Namespace) -> tuple[Any, Any, list[dict]]:
    from engine import bundle as bundles
    from engine.errors import BundleError
    from engine.feedback import export
    from engine.journal import Journal, JournalError
    from engine.train import weights

    out = Path(args.out)
    for taken in (out, out.with_name(out.name + ".rejected")):
        if taken.exists():
            raise FinetuneError(f"{taken} exists: bundles are never overwritten (a gateway or a rollback may use it)")
    try:
        base = bundles.load(None if args.from_bundle == "default" else args.from_bundle)
        net = weights.load(base)
    except BundleError as err:
        raise FinetuneError(str(err)) from None
    try:
        with Journal(args.feedback, create=False) as j:
            marks = export(j)
    except JournalError as err:
        raise FinetuneError(str(err)) from None
    if not marks:
        raise FinetuneError(f"{args.feedback} has no marked examples: mark some first (`clef-gateway feedback mark`)")
    return base, net, marks


def routing_after(base_routing: str, marks: list[dict[str, Any]]) -> str:
    """The fine-tuned bundle's `routing` (engine/bundle.py): the base's, unless a mark routes a request otherwise
    than the written policy does. Such a mark must reach the gateway, and only the routing head learned it."""
    from engine.train.data import follow_policy

    return base_routing if follow_policy(marks) else "model"


def _run(args: argparse.Namespace) -> int:
    base, net, marks = _inputs(args)
    corpus, test_path = _corpus(args)
    import numpy as np
    import torch
    from tokenizers import Tokenizer

    from engine import bundle as bundles
    from engine.train import calibrate, cascade, gate, weights
    from engine.train.__main__ import split_dev
    from engine.train.data import encode_records, progress
    from engine.train.loop import TrainConfig, predict, set_seed, train

    t_start = time.time()
    torch.set_num_threads(args.threads)
    set_seed(args.seed)
    site_train, site_held, held_apart = split_site(marks, args.seed)
    replay_train, dev = split_dev(sample_lines(corpus / "train.jsonl", args.replay, args.seed), 0.1, args.seed)
    reps = max(1, round(args.site_share / (1 - args.site_share) * len(replay_train) / len(site_train)))
    progress(f"fine-tuning {base.id}: {len(site_train)} marked examples (x{reps}), {len(site_held)} held out for the "
             f"gate; {len(replay_train):,} corpus records replayed, {len(dev):,} for dev")  # fmt: skip
    tokenizer = Tokenizer.from_file(str(base.tokenizer_path))
    max_tokens = int(base.manifest.get("trained_on", {}).get("train_max_tokens", 2048))
    data = encode_records(replay_train + site_train * reps, tokenizer, max_tokens, args.threads, progress)
    data.soft = predict(weights.load(base), data)[0]  # the base's own answers for the replay (a second copy)
    data.soft[len(replay_train):] = np.eye(data.soft.shape[1], dtype=np.float32)[data.labels[len(replay_train):]]
    dev_data = encode_records(dev, tokenizer, base.max_tokens, args.threads, progress)
    # smaller batches than a full training's: a few thousand sequences still make a few hundred steps
    cfg = TrainConfig(epochs=args.epochs, lr=args.lr, warmup_steps=20, tokens_per_batch=8192, seed=args.seed,
                      max_seconds=args.minutes * 60)  # fmt: skip
    run = train(net, data, cfg)
    fp32_dev = calibrate.figures(predict(net, dev_data)[0], dev_data.labels, 0.5)

    out = Path(args.out)
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        shutil.copyfile(base.tokenizer_path, partial / "tokenizer.json")
        choice, measured = calibrate.int8(net, dev_data, fp32_dev, partial / "model.onnx", args.seed, form=args.int8, layout=args.int8_layout)
        routing = routing_after(base.routing, marks)
        staged = None  # an ensemble as a cascade, at the base's threshold (engine/train/cascade.py)
        if choice == "dynamic" and args.cascade:
            staged = cascade.attach(net, dev_data, base.thresholds.get("block", 0.5), partial / "model.onnx", args.int8_layout,
                                    plain=measured[choice]["probs"][:, calibrate.BLOCK], routing=routing)  # fmt: skip
        weights.save(net, partial)
        marked = json.dumps([args.seed, sorted((r["id"], r["label"]) for r in marks)]).encode()
        digest = hashlib.blake2b(marked, digest_size=4).hexdigest()
        manifest = {k: v for k, v in base.manifest.items() if k not in ("sha256", "eval", "gate", "cascade")}
        if staged:
            manifest["cascade"] = staged
        manifest.update(
            name=args.name or base.name,
            version=args.version or f"{base.version}+site.{digest}",
            quantization=calibrate.quantization_record(choice, measured, fp32_dev, args.int8_layout),
            thresholds={"block": base.thresholds.get("block", 0.5)},
            routing=routing,
            fine_tuned={"from": base.id, "from_sha256": base.manifest["sha256"].get("model.onnx", ""),
                        "feedback": str(args.feedback), "site_examples": len(site_train), "site_repeats": reps,
                        "site_held_out": len(site_held) if held_apart else 0, "replay": len(replay_train),
                        "corpus": str(corpus), "lr": args.lr, **run},  # fmt: skip
        )
        bundles.write_manifest(partial, manifest)
        progress(f"gate: {len(site_held)} site examples, held-out sample of {test_path}")
        held_out = sample_lines(test_path, args.gate_limit, args.seed)
        report = gate.check(base, bundles.load(partial), held_out, str(test_path), site_held, held_apart,
                            args.max_tpr_drop)  # fmt: skip
        manifest["gate"] = report
        manifest["eval"] = {"test_sample": report["held_out"]["candidate"]}
        bundles.write_manifest(partial, manifest)
        dest = out if report["accepted"] else out.with_name(out.name + ".rejected")
        partial.rename(dest)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    print(gate.table(report))
    print(f"\nbundle {manifest['name']}@{manifest['version']} → {dest}  ({run['steps']} steps in "
          f"{run['seconds']:.0f} s of training, {time.time() - t_start:.0f} s in all)")  # fmt: skip
    return 0 if report["accepted"] else 1


if __name__ == "__main__":
    sys.exit(main())
