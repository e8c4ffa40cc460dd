"""Train a bundle: `python -m engine.train --corpus work/corpus --out work/bundles/candidate`.

    corpus/train.jsonl ─┬─ dev split (5 % of groups): early figures and threshold calibration
                        └─ canonical text → BPE tokenizer → ids → ClefNet (PyTorch, CPU)
    → ONNX (fp32) → int8 with optimum's quantiser (dynamic and static, both measured on dev)
    → the better int8 model, calibrated block threshold, manifest with figures and the data hash
    → evaluation on corpus/test.jsonl and corpus/evasion.jsonl (never trained on), written to bundle.json
    → weights.pt: the PyTorch weights, so `clef-gateway train --from-bundle` can fine-tune the bundle

`--networks 3` trains three networks at the same time, each in its own process (the others as `--init-seed 2` and
`3` would; `--one-at-a-time` trains the same weights one after the other), on one tokenizer, encoding and dev split,
and packages them averaged in one graph, served as a cascade: the default bundle's recipe in one command
(`--precision auto`: bf16 matrix products where the CPU has bf16 dot products, which is what fits it in the hour).
`--calibration FILE` sets the block threshold on more benign requests than the dev split's, held out of the run
the same way (engine/train/calibration.py makes them from other builds of the corpus).
`--install` copies the result over the packaged default bundle (engine/bundles/default).
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import random
import shutil
import sys
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer

from engine import bundle as bundles
from engine.canonical import VERSION as CANONICAL_VERSION
from engine.labels import FEATURES
from engine.train import add_canonical_cache_argument, add_int8_argument, add_threshold_arguments, calibrate, cascade, weights
from engine.train.calibration import DEV_SHARE, CalibrationError, group_key, in_dev, load
from engine.train.data import Encoded, canonical_parts, corpus_routing, encode_records, progress, read_jsonl
from engine.train.loop import PRECISIONS, TrainConfig, predict_each, resolve_precision, set_seed, train
from engine.train.net import ClefNet, Ensemble
from engine.train.parallel import Member, train_together
from engine.train.parallel import build as build_member
from engine.train.tokenizer import train_tokenizer
from engine.verdict import LABELS


def file_sha256(path: Path) -> str:
    return bundles.sha256_file(path) if path.exists() else ""


def split_dev(records: list[dict], share: float, seed: int, how: str = "mixed") -> tuple[list[dict], list[dict]]:
    """Hold out about `share` of the training file for calibration. `groups`: whole groups (payload templates,
    text sources, generator families). `mixed`: whole groups, except that generator families (`gen:…`, which
    the corpus already splits into train and test page variants) give single records, so no family of
    benign traffic is left out of training altogether."""
    train, dev = [], []
    for i, r in enumerate(records):
        (dev if in_dev(group_key(r), i, seed, how, share) else train).append(r)
    return train, dev


def bundle_split(bundle: bundles.Bundle, train_path: Path, limit: int | None = None,
                 log=progress) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """The training and dev records a bundle's own run made of `train_path` (its seed and dev-split mode, so the
    bundle never trained on the dev ones), saying so when the file is not the one it was trained on. For the
    benchmarks that read a bundle's dev split (bench/threshold_noise.py, dev_evasions.py, rule_deferral.py)."""
    run = bundle.manifest.get("trained_on", {})
    if run.get("train_sha256") and run["train_sha256"] != bundles.sha256_file(train_path):
        log(f"warning: {bundle.id} was trained on another train.jsonl: this dev split is not its own")
    return split_dev(list(read_jsonl(train_path, limit)), DEV_SHARE, int(run.get("seed", 1)), run.get("dev_split", "mixed"))


def reading_hash() -> str:
    """A hash of the code that reads a request into its canonical text: a change there (how a multipart part or a
    charset is read) changes the texts of some records without a new CANONICAL_VERSION, and a cache keyed on
    the version alone would hand a run the texts of the old reading."""
    import engine.canonical
    import engine.fields

    h = hashlib.blake2b(digest_size=8)
    for module in (engine.canonical, engine.fields):
        h.update(Path(module.__file__).read_bytes())
    return h.hexdigest()


def canonical_cached(source: Path, source_sha256: str, records: list[dict], args, name: str,
                     sources: dict | None = None) -> list[tuple[str, str]]:
    """Canonical texts are the slow part of a run and depend only on the corpus, the split, the canonical
    version and the reading code (reading_hash): keep them beside the corpus so reruns (other seeds, sizes, epochs) skip them.
    `source_sha256` is the caller's hash of `source` (0.9 GB for the default corpus: hashed once per run).
    `args.canonical_cache` False (`--no-canonical-cache`): computed, neither read nor kept, as a timed run from the
    corpus alone needs. `sources`, where given, gets `name` -> "computed" or "read from a cache"."""
    sources = {} if sources is None else sources
    path = None  # --no-canonical-cache: no key to hash, nothing to read or keep
    if getattr(args, "canonical_cache", True):  # every command has the flag (add_canonical_cache_argument); scripts may not
        key = hashlib.blake2b(
            f"{source_sha256}:{CANONICAL_VERSION}:{reading_hash()}:{args.seed}:{args.dev_split}:{args.limit}:{name}:{len(records)}".encode(),
            digest_size=10,
        ).hexdigest()
        path = source.parent / f".canonical-{name}-{key}.pkl"
    if path is not None and path.exists():
        # said in the log: a timed run must start from the corpus alone, and these files are hidden from a plain `ls`
        progress(f"  {name} split's canonical texts read from {path} (delete it to compute them again)")
        sources[name] = "read from a cache"
        with open(path, "rb") as f:
            return pickle.load(f)
    parts = canonical_parts(records, args.threads)
    sources[name] = "computed"
    if path is not None:
        with open(path, "wb") as f:
            pickle.dump(parts, f, protocol=pickle.HIGHEST_PROTOCOL)
    return parts


def encode_corpus(corpus: Path, tokenizer_path: Path, args, train_sha256: str | None = None,
                  sources: dict | None = None) -> tuple[Encoded, Encoded, list[dict], Tokenizer, str]:  # fmt: skip
    """Steps [1/6]-[3/6] of a run: read `corpus`/train.jsonl, hold out the dev split, canonical texts (cached),
    train the tokenizer (saved to `tokenizer_path`) and encode both splits. Reads from `args`: seed, dev_split,
    limit, threads, vocab, train_max_tokens, max_tokens. `train_sha256`: the file's, where the caller hashed it
    already. `sources`: canonical_cached's, for both splits. (train, dev, dev records, tokenizer, train.jsonl's
    sha256); bench/recipe_sweep.py encodes its corpus with it too."""
    source = corpus / "train.jsonl"
    progress(f"[1/6] reading {source}")
    train_sha256 = train_sha256 or file_sha256(source)
    records = list(read_jsonl(source, args.limit))
    train_recs, dev_recs = split_dev(records, DEV_SHARE, args.seed, args.dev_split)
    del records
    progress(f"  {len(train_recs):,} train, {len(dev_recs):,} dev (held out by group)")

    progress("[2/6] canonical text and tokenizer")
    t0 = time.time()
    train_parts = canonical_cached(source, train_sha256, train_recs, args, "train", sources)
    dev_parts = canonical_cached(source, train_sha256, dev_recs, args, "dev", sources)
    progress(f"  canonical text for {len(train_parts) + len(dev_parts):,} records in {time.time() - t0:.0f}s")
    rng = random.Random(args.seed)
    sample = rng.sample(range(len(train_parts)), min(len(train_parts), 60000))
    tokenizer = train_tokenizer([train_parts[i][0] + "\n" + train_parts[i][1] for i in sample], vocab_size=args.vocab)
    tokenizer.save(str(tokenizer_path))
    progress(f"  vocabulary {tokenizer.get_vocab_size():,}")

    progress("[3/6] encoding")
    train_data = encode_records(train_recs, tokenizer, args.train_max_tokens, args.threads, progress, train_parts)
    dev_data = encode_records(dev_recs, tokenizer, args.max_tokens, args.threads, progress, dev_parts)
    return train_data, dev_data, dev_recs, tokenizer, train_sha256


def load_calibration(path: Path, train_sha256: str, args) -> tuple[list[dict], dict]:
    """The benign requests of `path` (engine.train.calibration) and their record, checked to be made for this run
    (train.jsonl, seed, dev split): CalibrationError otherwise. Cheap next to a run: callers check before writing."""
    records, record = load(path, train_sha256, args.seed, args.dev_split)
    progress(f"  {len(records):,} calibration requests ({path}, from the builds with seeds "
             f"{', '.join(str(b.get('seed')) for b in record.get('builds', []))})")  # fmt: skip
    return records, record


def calibration_requests(path: Path, records: list[dict], record: dict, tokenizer, args,
                         sources: dict | None = None) -> calibrate.Extra:
    """load_calibration's requests encoded as the dev split is, with the rules' verdicts beside them. `sources`:
    canonical_cached's."""
    parts = canonical_cached(path, record["sha256"], records, args, "calibration", sources)
    data = encode_records(records, tokenizer, args.max_tokens, args.threads, progress, parts)
    t0 = time.time()
    ruled = calibrate.rules_blocks(records, data.cut, procs=args.threads)
    progress(f"  rules on the calibration requests: {int(ruled.sum())} blocked ({time.time() - t0:.0f} s)")
    return calibrate.Extra(data, ruled, record)


def eval_figures(res: dict) -> dict:
    """What bundle.json keeps of an `engine.eval.evaluate(..., rules=True)` result: the model's own figures,
    and under "with_rules" the gateway's default decision (the model, then the rules)."""
    alone = res["model"]
    out = {"records": res["records"], **{k: alone[k] for k in ("tpr", "fpr", "balanced_accuracy", "routing_accuracy", "per_class")},
           "latency": res["latency"]}  # fmt: skip
    out["with_rules"] = {k: res[k] for k in ("tpr", "fpr", "balanced_accuracy", "routing_accuracy", "per_class")}
    if "rules" in res:
        out["with_rules"]["rules"] = res["rules"]
    return out


def finish(out: Path, corpus: Path, install: bool, limit: int | None = None) -> dict:
    """Evaluate a written bundle on the held-out splits, record the figures in its bundle.json, and
    optionally install it as the packaged default. Also runs alone: `--finish` on an existing bundle.
    `limit` (a smoke run's `--limit`): only the first N records of each split, and the figures say so."""
    progress("[6/6] evaluation on held-out data")
    from engine.eval import evaluate, table

    manifest = bundles.load(out).manifest
    figures = {}
    for name in ("test", "evasion"):
        path = corpus / f"{name}.jsonl"
        if path.exists():
            res = evaluate(out, path, rules=True, limit=limit)
            figures[name] = {**eval_figures(res), **({"limit": limit} if limit else {})}
            print(table(res))
    manifest["eval"] = figures
    manifest = bundles.write_manifest(out, manifest)
    if install:
        dest = bundles.DEFAULT_BUNDLE
        dest.mkdir(parents=True, exist_ok=True)
        for old in dest.iterdir():
            old.unlink()
        for name in ("model.onnx", "tokenizer.json", weights.FILE, "bundle.json"):
            if (out / name).exists():
                shutil.copyfile(out / name, dest / name)
        progress(f"  installed as the default bundle ({dest})")
    return manifest


def package(net, dev_data, dev_ruled, fp32_dev: dict, out: Path, args, trained_on: dict,
            extra: calibrate.Extra | None = None) -> tuple[str, float]:  # fmt: skip
    """[5/6]: export `net` (a ClefNet or an Ensemble), quantise it to int8 (the better format on the dev split),
    calibrate the block threshold on the dev split (and `extra`'s benign requests) beside the rules, and write
    model.onnx, weights.pt and bundle.json to `out` (tokenizer.json is already there). Training and
    `engine.train.ensemble` both end here."""
    progress("[5/6] export and int8 quantisation")
    choice, measured = calibrate.int8(net, dev_data, fp32_dev, out / "model.onnx", args.seed, form=args.int8, layout=args.int8_layout)
    threshold, union, calibration = calibrate.set_threshold(out / "model.onnx", net.window, dev_data, measured[choice]["probs"],
                                                            dev_ruled, args.target_fpr, extra, fixed=args.block_threshold)  # fmt: skip
    share = "fixed" if args.block_threshold is not None else f"model's share of benign FPR: {args.target_fpr}"
    progress(f"  chose {choice} int8; block threshold {threshold:.4f} ({share}); dev with the rules: "
             f"TPR {union['tpr']:.4f} FPR {union['fpr']:.4f}")
    routing = corpus_routing(Path(args.corpus) / "train.jsonl", args.limit)
    staged = None  # an ensemble's networks one after another (engine/train/cascade.py): dynamic int8 only
    if choice == "dynamic" and getattr(args, "cascade", True):
        staged = cascade.attach(net, dev_data, threshold, out / "model.onnx", args.int8_layout,
                                plain=measured[choice]["probs"][:, calibrate.BLOCK], routing=routing)  # fmt: skip
    manifest = {
        "name": args.name,
        "version": args.version,
        "labels": list(LABELS),
        "features": list(FEATURES),
        "max_tokens": args.max_tokens,
        "window": net.window,
        "serialization": CANONICAL_VERSION,
        "inputs": {"input_ids": "int64 [batch, length], length a multiple of window, 0 = padding"},
        "outputs": {"label_probs": "softmax over labels", "feature_probs": "sigmoid per feature"},
        "architecture": net.config,
        "quantization": calibrate.quantization_record(choice, measured, fp32_dev, args.int8_layout),
        "thresholds": {"block": calibrate.stored(threshold)},
        **({"cascade": staged} if staged else {}),
        "routing": routing,
        "dev_with_rules": union,
        **({"calibration": calibration} if calibration else {}),
        "trained_on": trained_on,
        "sha256": {},
    }
    weights.save(net, out)  # not served: what fine-tuning starts from (its sha256 goes in the manifest)
    bundles.write_manifest(out, manifest)
    return choice, threshold


def network_threads(args) -> int:
    """The threads each network trains with: --network-threads, or --threads shared among the networks (two
    networks on two cores: one thread each, bench/RESULTS.md). A network's weights depend on its thread count (the
    order of its sums), so the same count gives the same weights whether the networks train together or in turn."""
    if args.network_threads is not None:
        return args.network_threads
    return max(1, args.threads // args.networks)


def member_seed(args, k: int) -> int | None:
    """The --init-seed of network k of a `--networks N` run: the first is the plain command's (None: --seed's), each
    next one the one after, so `--networks 2` trains what `--init-seed` runs of one recipe train one at a time."""
    if k == 0:
        return args.init_seed
    return (args.seed if args.init_seed is None else args.init_seed) + k


def announce(out: Path, args, t_start: float) -> None:
    """The bundle's first summary line: where it is, what it serves (model, tokenizer, manifest), how long it took."""
    size = sum((out / n).stat().st_size for n in ("model.onnx", "tokenizer.json", "bundle.json"))
    print(f"\nbundle {args.name}@{args.version} → {out}  ({size / 1e6:.2f} MB, {time.time() - t_start:.0f} s in all)")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m engine.train", description="Train a clef-gateway model bundle.")
    ap.add_argument("--corpus", default="work/corpus", help="folder with train.jsonl (and test.jsonl, evasion.jsonl)")
    ap.add_argument("--out", default="work/bundles/candidate", help="bundle folder to write")
    ap.add_argument("--name", default="clef-default")
    ap.add_argument("--version", default="0.1.0")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--init-seed", type=int, default=None,
                    help="draw the initial weights and the batch order from this seed instead of --seed, keeping --seed's "
                         "dev split and tokenizer: a second member for `python -m engine.train.ensemble`")
    ap.add_argument("--networks", type=int, default=1,
                    help="train this many networks (init seeds --init-seed or --seed, then the next ones) on one tokenizer, "
                         "encoding and dev split, and serve them averaged in one graph: what training each with --init-seed "
                         "and joining them with `python -m engine.train.ensemble` makes, in one command")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="with --networks: train the networks one after the other in this process, rather than at the "
                         "same time in a process each (the same weights either way; at the same time is about a tenth "
                         "faster on 2 cores and holds about 2 GB more per network: engine/train/parallel.py)")
    ap.add_argument("--epochs", type=float, default=3.0, help="passes over the training split (default 3: the default bundle's)")
    ap.add_argument("--tail-weight", type=float, default=0.0, metavar="W",
                    help="add a pairwise loss term of weight W between each batch's attacks and its highest-scoring "
                         "benign requests (engine/train/loop.py; default 0: off, the documented recipe)")
    ap.add_argument("--tail-share", type=float, default=0.1, metavar="Q",
                    help="with --tail-weight: the share of a batch's benign requests paired with its attacks (default 0.1)")
    ap.add_argument("--dev-split", choices=("groups", "mixed"), default="mixed",
                    help="how the calibration split is held out: whole groups (payload templates, text sources) but "
                         "single records of generator families (mixed, the default), or whole groups throughout")
    ap.add_argument("--limit", type=int, default=None,
                    help="use only the first N training records, and the first N of each held-out split (smoke runs)")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--ffn", type=int, default=128, help="hidden width of the feed-forward layer (default 128)")
    ap.add_argument("--window", type=int, default=64, help="tokens per attention window (default 64)")
    ap.add_argument("--train-max-tokens", type=int, default=8192,
                    help="longer training sequences keep the head, the body's head and its tail (default 8192)")
    ap.add_argument("--max-tokens", type=int, default=65536, help="the bundle's serving token budget")
    add_threshold_arguments(ap)
    ap.add_argument("--calibration", default=None, metavar="FILE",
                    help="more benign requests held out of this run to set the threshold on, beside the dev split's: "
                         "what `python -m engine.train.calibration` writes for this corpus, seed and dev split")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--network-threads", type=int, default=None, metavar="N",
                    help="threads each network trains with (default: --threads shared among the networks, at least one "
                         "each: on 2 cores two networks train with one thread each, about a tenth faster than with two "
                         "each). The weights depend on it, not on whether the networks train together or in turn; "
                         "clef-default 0.11.x was trained with 2")
    ap.add_argument("--precision", choices=("auto", *PRECISIONS), default="auto",
                    help="the training steps' matrix products: bf16 (bfloat16, the rest of the step in float32) or fp32; "
                         "auto (the default): bf16 where the CPU has bf16 dot products (AVX512-BF16 or AMX; a GPU that "
                         "supports bf16), about 1.5 times as many steps a second on a 2-core EPYC, fp32 elsewhere, where "
                         "PyTorch would emulate them. The weights depend on it; bundle.json records it. Bundles up to "
                         "0.11.14 were trained with fp32")
    ap.add_argument("--device", default="cpu",
                    help="where the training steps run: cpu (the documented recipe) or a PyTorch device such as cuda; "
                         "export, int8 and calibration run on the CPU either way, and a GPU run's weights are not bit "
                         "for bit a CPU run's")
    add_int8_argument(ap)
    add_canonical_cache_argument(ap)
    ap.add_argument("--install", action="store_true", help="copy the bundle over engine/bundles/default")
    ap.add_argument("--finish", action="store_true", help="no training: evaluate the bundle at --out (and --install it)")
    args = ap.parse_args(argv)
    if args.networks < 1:
        ap.error("--networks must be 1 or more")
    if args.tail_weight < 0 or not 0 < args.tail_share <= 1:
        ap.error("--tail-weight must be 0 or more and --tail-share above 0 and at most 1")
    if args.network_threads is not None and args.network_threads < 1:
        ap.error("--network-threads must be 1 or more")
    args.precision = resolve_precision(args.precision, args.device)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.finish:
        finish(Path(args.out), Path(args.corpus), args.install, args.limit)
        return 0
    t_start = time.time()
    torch.set_num_threads(args.threads)
    set_seed(args.seed)
    corpus = Path(args.corpus)
    out = Path(args.out)
    train_sha256, calibration = None, None
    if args.calibration:  # refused before anything is written
        train_sha256 = file_sha256(corpus / "train.jsonl")
        try:
            calibration = load_calibration(Path(args.calibration), train_sha256, args)
        except CalibrationError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    out.mkdir(parents=True, exist_ok=True)

    canonical_sources: dict[str, str] = {}
    train_data, dev_data, dev_recs, tokenizer, train_sha256 = encode_corpus(
        corpus, out / "tokenizer.json", args, train_sha256, canonical_sources
    )
    n_train, n_dev = len(train_data.ids), len(dev_recs)
    extra = calibration_requests(Path(args.calibration), *calibration, tokenizer, args, canonical_sources) if calibration else None
    progress("  rules on the dev split (the model serves beside them)")
    dev_ruled = calibrate.rules_blocks(dev_recs, dev_data.cut, procs=args.threads)
    del dev_recs  # only the ids are needed now

    together = args.networks > 1 and args.device == "cpu" and not args.one_at_a_time
    how = "at the same time" if together else "one after the other"
    progress(f"[4/6] training {args.networks} networks {how}" if args.networks > 1 else "[4/6] training")
    shape = dict(vocab=tokenizer.get_vocab_size(), n_labels=len(LABELS), n_features=len(FEATURES), d=args.dim, ffn=args.ffn, window=args.window)
    members, inits = [], [member_seed(args, k) for k in range(args.networks)]
    for k, init in enumerate(inits):
        seed = args.seed if init is None else init
        cfg = TrainConfig(epochs=args.epochs, seed=seed, tail_weight=args.tail_weight, tail_share=args.tail_share,
                          precision=args.precision)
        members.append(Member(net=shape, draw_seed=seed, config=cfg))
        if args.networks > 1:
            progress(f"  network {k + 1}: " + (f"--seed {seed}" if init is None else f"--init-seed {seed}"))
    with torch.device("meta"):  # counted without drawing weights
        size = sum(p.numel() for p in ClefNet(**shape).parameters())
    progress(f"  {size:,} parameters" + (" each" if args.networks > 1 else ""))
    threads = network_threads(args)
    progress(f"  {threads} thread{'s' if threads > 1 else ''}" + (" each" if args.networks > 1 else "") + f", {args.precision} matrix products")
    t_train = time.time()
    if together:
        trained = train_together(members, train_data, threads, scratch=out)  # the ids file beside the bundle, not in /tmp
    else:
        trained = []
        torch.set_num_threads(threads)
        for member in members:
            net = build_member(member).to(args.device)
            run = train(net, train_data, member.config)
            trained.append((net.cpu(), run))  # export, int8 and calibration run on the CPU
        torch.set_num_threads(args.threads)
    train_seconds = round(time.time() - t_train, 1)
    nets = [net for net, _ in trained]
    runs = [{**({"init_seed": init} if init is not None else {}), **run} for init, (_, run) in zip(inits, trained)]
    net = nets[0] if len(nets) == 1 else Ensemble(nets).eval()
    dev_probs, _, each = predict_each(net, dev_data)  # with two networks, each one's probabilities too
    for k, probs in enumerate(each):
        alone = calibrate.figures(probs, dev_data.labels, 0.5)
        progress(f"  network {k + 1}: dev fp32 at 0.5: TPR {alone['tpr']:.4f} FPR {alone['fpr']:.4f}")
    fp32_dev = calibrate.figures(dev_probs, dev_data.labels, 0.5)

    trained_on = {
        "corpus": str(corpus),
        "train_sha256": train_sha256,
        "records": n_train,
        "dev_records": n_dev,
        "seed": args.seed,
        "dev_split": args.dev_split,
        "train_max_tokens": args.train_max_tokens,
        "threads_per_network": threads,
        "precision": args.precision,  # the training steps' matrix products (--precision)
        "canonical_texts": canonical_sources,  # "read from a cache": the run's seconds are not a run from the corpus alone
        **({"tail_loss": {"weight": args.tail_weight, "share": args.tail_share}} if args.tail_weight > 0 else {}),
        **({"device": args.device} if args.device != "cpu" else {}),
    }
    if len(runs) == 1:
        trained_on.update(runs[0])  # one network: its init seed and run figures, as before
    else:  # the shape engine.train.ensemble writes: one entry per network
        trained_on["members"] = [{"trained_on": {**{k: trained_on[k] for k in ("seed", "dev_split", "train_max_tokens")}, **r}} for r in runs]
        trained_on["seconds"] = train_seconds  # wall clock: networks trained at the same time count once
        trained_on["networks_trained"] = how
    choice, threshold = package(net, dev_data, dev_ruled, fp32_dev, out, args, trained_on, extra)

    finish(out, corpus, args.install, args.limit)
    announce(out, args, t_start)
    for k, run in enumerate(runs):
        who = f"network {k + 1}: " if len(runs) > 1 else ""
        print(f"  {who}trained {run['steps']:,} steps, {run['sequences']:,} sequences in {run['seconds']:.0f} s")
    print(f"  int8 {choice}; block threshold {threshold:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
