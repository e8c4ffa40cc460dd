"""Recipe variants side by side: several networks trained at once on one encoding of a corpus, compared on a dev
split that holds out whole groups.

    python bench/recipe_sweep.py encode --corpus work/corpus-xml --out work/sweep                  # canonical text, tokenizer, ids
    python bench/recipe_sweep.py train --data work/sweep --runs work/sweep/runs --configs base1,base2,win32 --device cuda
    python bench/recipe_sweep.py report --data work/sweep --runs work/sweep/runs --out work/sweep/report --compare base1,win32,base1+base2

`encode` needs the whole engine (it reads records, as `engine.train` does); `train` needs only PyTorch and numpy, so
its data can travel to a machine with a GPU (`--zstd` packs the ids for a size-capped copy; reading them back needs
the `zstandard` package). `train` runs one process per config, all at once, and prints their progress. A config is the
documented recipe (3 epochs, d = 64, window 64, lr 2e-3, benign weight 2, seed 1) with the changes CONFIGS names.
In `report`, `A+B` averages two networks' log probabilities, as `engine.train.net.Ensemble` averages logits.

The figures are the model's alone (no rules), on the dev split of `--dev-split groups` (5 % of the groups, seed 1): whole
payload templates and text sources, and whole benign generator families too. One held-out family can own the top of the
benign scores, so the attack TPR at a benign FPR of 0.1 / 0.2 / 0.5 / 1 % is given three ways: over all dev benign
requests, over those outside the generator families (real text and API bodies), and with every benign group weighing
the same. Block scores are read as -log(1 - p(block)), summed from the three benign probabilities, so scores near 1 keep
their order.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.plotting import pyplot, save  # noqa: E402

CONFIGS = {
    "base1": {}, "base2": {"seed": 2}, "base3": {"seed": 3},
    "d96": {"d": 96, "ffn": 192}, "d128": {"d": 128, "ffn": 256}, "d256": {"d": 256, "ffn": 512, "heads": 4},
    "lr1e3": {"lr": 1e-3}, "bw4": {"benign_weight": 4.0},
    "win32": {"window": 32}, "win32s2": {"window": 32, "seed": 2}, "win32s3": {"window": 32, "seed": 3},
    "ep2": {"epochs": 2.0}, "ep4": {"epochs": 4.0}, "ep4s2": {"epochs": 4.0, "seed": 2},
}  # fmt: skip
TRAIN_KEYS = ("lr", "benign_weight", "epochs")
FPRS = (0.001, 0.002, 0.005, 0.01)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# encode ---------------------------------------------------------------------------------------------------------


def save_ids(encoded, folder: Path, name: str, zstd: bool) -> None:
    offsets = np.cumsum([0] + [len(x) for x in encoded.ids]).astype(np.int64)
    tokens = np.concatenate(encoded.ids).astype(np.uint16)  # vocabularies up to 65,536
    meta = {"off": offsets, "labels": encoded.labels, "feats": np.packbits(encoded.features.astype(bool), axis=1),
            "nfeat": encoded.features.shape[1]}  # fmt: skip
    if zstd:
        import zstandard

        params = zstandard.ZstdCompressionParameters.from_level(19, window_log=27, enable_ldm=True, threads=2)
        (folder / f"{name}_tok.zst").write_bytes(zstandard.ZstdCompressor(compression_params=params).compress(tokens.tobytes()))
        np.savez_compressed(folder / f"{name}_meta.npz", **meta)
    else:
        np.savez_compressed(folder / f"{name}.npz", tok=tokens, **meta)


def encode(args) -> None:
    from types import SimpleNamespace

    from engine.train import calibrate
    from engine.train.__main__ import encode_corpus

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = SimpleNamespace(seed=args.seed, dev_split=args.dev_split, limit=args.limit, threads=args.threads,
                          vocab=args.vocab, train_max_tokens=8192, max_tokens=65536)  # the recipe's budgets
    train_data, dev_data, dev_recs, tokenizer, sha = encode_corpus(Path(args.corpus), out / "tokenizer.json", run)
    save_ids(train_data, out, "train", args.zstd)
    save_ids(dev_data, out, "dev", args.zstd)
    np.save(out / "dev_ruled.npy", calibrate.rules_blocks(dev_recs, dev_data.cut))
    info = {"corpus": str(args.corpus), "train_sha256": sha, "dev_split": args.dev_split, "seed": args.seed,
            "vocab": tokenizer.get_vocab_size(), "train": len(train_data.ids), "dev": len(dev_recs),
            "groups": dev_data.groups, "attack_class": [r.get("attack_class") or "" for r in dev_recs]}  # fmt: skip
    (out / "dev_meta.json").write_text(json.dumps(info))
    log(f"encoded into {out}: {sum(len(x) for x in train_data.ids):,} training tokens")


# train ----------------------------------------------------------------------------------------------------------


def load_ids(folder: Path, name: str):
    if (folder / f"{name}.npz").exists():
        z = np.load(folder / f"{name}.npz")
        tokens = z["tok"]
    else:
        import zstandard

        z = np.load(folder / f"{name}_meta.npz")
        raw = zstandard.ZstdDecompressor(max_window_size=2**31).decompress((folder / f"{name}_tok.zst").read_bytes())
        tokens = np.frombuffer(raw, dtype=np.uint16)
    tokens, off = tokens.astype(np.int32), z["off"]
    ids = [tokens[off[i] : off[i + 1]] for i in range(len(off) - 1)]
    feats = np.unpackbits(z["feats"], axis=1)[:, : int(z["nfeat"])].astype(np.float32)
    return ids, z["labels"].astype(np.int64), feats


def train_one(args) -> None:
    import torch

    from engine.train.data import Encoded
    from engine.train.loop import TrainConfig, planned_steps, predict, set_seed, train
    from engine.train.net import ClefNet

    data, runs = Path(args.data), Path(args.runs)
    change = dict(CONFIGS[args.config])
    seed = change.pop("seed", 1)
    cfg = {"epochs": 3.0, **{k: change.pop(k) for k in list(change) if k in TRAIN_KEYS}}
    if args.epochs is not None:
        cfg["epochs"] = args.epochs
    torch.set_num_threads(args.threads)
    training = Encoded(*load_ids(data, "train"), groups=[])
    dev = Encoded(*load_ids(data, "dev"), groups=[])
    vocab = json.loads((data / "dev_meta.json").read_text())["vocab"]
    set_seed(seed)
    net = ClefNet(vocab, 4, training.features.shape[1], **change).to(args.device)
    recipe = TrainConfig(seed=seed, max_seconds=args.max_seconds, **cfg)
    run = train(net, training, recipe)
    _, planned = planned_steps([len(x) for x in training.ids], net.window, recipe)
    probs, _ = predict(net, dev)
    np.save(runs / f"{args.config}.npy", probs.astype(np.float32))
    params = sum(p.numel() for p in net.parameters())
    (runs / f"{args.config}.json").write_text(json.dumps({**run, "planned_steps": planned, "params": params, "device": args.device}))


def train_all(args) -> None:
    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        sys.exit(f"unknown configs {unknown}; known: {', '.join(CONFIGS)}")
    extra = ["--device", args.device, "--threads", str(args.threads)]
    extra += ["--epochs", str(args.epochs)] if args.epochs is not None else []
    extra += ["--max-seconds", str(args.max_seconds)] if args.max_seconds is not None else []
    procs = {}
    for n in names:
        cmd = [sys.executable, __file__, "train-one", "--data", args.data, "--runs", args.runs, "--config", n, *extra]
        procs[n] = subprocess.Popen(cmd, stdout=open(runs / f"{n}.log", "w"), stderr=subprocess.STDOUT)
    t0 = time.time()
    while any(p.poll() is None for p in procs.values()):
        time.sleep(args.every)
        states = []
        for n in names:
            lines = (runs / f"{n}.log").read_text().strip().splitlines()
            steps = [ln.split()[1] for ln in lines if ln.lstrip().startswith("step ")]
            states.append(f"{n} {steps[-1] if steps else '-'}")
        log(f"[{time.time() - t0:.0f} s] " + "  ".join(states))
    failed = [n for n, p in procs.items() if p.returncode != 0]
    log(f"{len(names) - len(failed)} of {len(names)} configs trained in {time.time() - t0:.0f} s" + (f"; failed: {failed}" if failed else ""))
    if failed:
        sys.exit(1)


# report ---------------------------------------------------------------------------------------------------------


def block_score(probs: np.ndarray) -> np.ndarray:
    return -np.log(np.clip(probs[:, 1:].astype(np.float64).sum(1), 1e-12, None))


def load_probs(runs: Path, name: str) -> np.ndarray:
    if "+" in name:
        logp = np.mean([np.log(np.clip(load_probs(runs, m), 1e-9, 1)) for m in name.split("+")], axis=0)
        e = np.exp(logp - logp.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    return np.load(runs / f"{name}.npy")


def tpr_at(score: np.ndarray, attack: np.ndarray, weight: np.ndarray, fpr: float) -> float:
    """Attack TPR at the threshold above which benign requests of total `weight` at most `fpr` of the whole lie."""
    order = np.argsort(-score[weight > 0], kind="stable")
    s, w = score[weight > 0][order], weight[weight > 0][order]
    within = np.cumsum(w) / w.sum() <= fpr + 1e-12
    k = int(within.sum())  # the k highest benign scores fit in the budget
    threshold = s[k] if k < len(s) else -np.inf
    return float((score[attack] > threshold).mean())


def report(args) -> dict:
    data, runs = Path(args.data), Path(args.runs)
    meta = json.loads((data / "dev_meta.json").read_text())
    labels = np.load(data / ("dev.npz" if (data / "dev.npz").exists() else "dev_meta.npz"))["labels"]
    groups = np.array(meta["groups"], dtype=str)
    attack, benign = labels == 0, labels != 0
    sizes = Counter(groups[benign])
    weights = {
        "all benign": benign.astype(float),
        "benign outside the generator families": (benign & ~np.char.startswith(groups, "gen:")).astype(float),
        "each benign group weighing the same": np.array([1.0 / sizes[g] if b else 0.0 for g, b in zip(groups, benign)]),
    }
    names = args.compare.split(",") if args.compare else sorted(p.stem for p in runs.glob("*.npy"))
    res = {"data": str(data), "dev_split": meta["dev_split"], "attacks": int(attack.sum()), "benign": int(benign.sum()),
           "benign_outside_generator": int(weights["benign outside the generator families"].sum()), "benign_groups": len(sizes),
           "fprs": list(FPRS), "configs": {}}  # fmt: skip
    for name in names:
        score = block_score(load_probs(runs, name))
        row = {view: [round(100 * tpr_at(score, attack, w, f), 2) for f in FPRS] for view, w in weights.items()}
        runs_info = [json.loads((runs / f"{m}.json").read_text()) for m in name.split("+")]
        row["steps"] = [r["steps"] for r in runs_info]
        row["complete"] = all(r["steps"] >= r["planned_steps"] for r in runs_info)
        res["configs"][name] = row
    return res


def table(res: dict) -> str:
    views = list(next(iter(res["configs"].values())))[:3]
    head = " | ".join(f"{v}: TPR at " + " / ".join(f"{100 * f:g}" for f in res["fprs"]) + " % FPR" for v in views)
    lines = [f"dev split ({res['dev_split']}): {res['attacks']:,} attacks, {res['benign']:,} benign "
             f"({res['benign_outside_generator']:,} outside the generator families, {res['benign_groups']:,} groups); model alone",
             f"{'config':16s} {head}"]  # fmt: skip
    for name, row in res["configs"].items():
        cells = " | ".join(" ".join(f"{x:6.2f}" for x in row[v]) for v in views)
        lines.append(f"{name:16s} {cells}" + ("" if row["complete"] else "   (stopped before its last step)"))
    return "\n".join(lines)


def chart(res: dict, path: Path) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    names = list(res["configs"])
    views = list(next(iter(res["configs"].values())))[:3]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(names) + 2), 4))
    x = np.arange(len(names))
    for k, view in enumerate(views):
        ax.bar(x + (k - 1) * 0.27, [res["configs"][n][view][0] for n in names], 0.27, label=view)
    ax.set_xticks(x, names, rotation=45, ha="right")
    ax.set_ylabel("attack TPR at 0.1 % benign FPR (%)")
    ax.set_ylim(max(0, min(min(r[v][0] for v in views) for r in res["configs"].values()) - 5), 100)
    ax.set_title("Recipe variants on the dev split held out by whole groups (model alone)", pad=30)
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3)
    return save(plt, fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench/recipe_sweep.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("encode", help="canonical text, tokenizer and ids of a corpus's train.jsonl, with its dev split")
    e.add_argument("--corpus", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--dev-split", choices=("groups", "mixed"), default="groups")
    e.add_argument("--seed", type=int, default=1)
    e.add_argument("--vocab", type=int, default=8192)
    e.add_argument("--limit", type=int, default=None, help="only the first N records (smoke runs)")
    e.add_argument("--threads", type=int, default=2)
    e.add_argument("--zstd", action="store_true", help="pack the ids with zstandard (for a size-capped copy)")
    for name in ("train", "train-one"):
        t = sub.add_parser(name, help="train configs at once, one process each" if name == "train" else argparse.SUPPRESS)
        t.add_argument("--data", required=True)
        t.add_argument("--runs", required=True)
        t.add_argument("--configs" if name == "train" else "--config", required=True)
        t.add_argument("--device", default="cpu")
        t.add_argument("--threads", type=int, default=1, help="CPU threads per process")
        t.add_argument("--epochs", type=float, default=None, help="override every config's epochs (smoke runs)")
        t.add_argument("--max-seconds", type=float, default=None, help="stop each run after this long")
        t.add_argument("--every", type=float, default=30.0, help=argparse.SUPPRESS)
    r = sub.add_parser("report", help="the dev figures of trained configs, a table, report.json and sweep.png")
    r.add_argument("--data", required=True)
    r.add_argument("--runs", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--compare", default=None, help="configs and A+B pairs, comma-separated (default: every run)")
    args = ap.parse_args(argv)
    if args.cmd == "encode":
        encode(args)
    elif args.cmd == "train":
        train_all(args)
    elif args.cmd == "train-one":
        train_one(args)
    else:
        res = report(args)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(res, indent=1))
        chart(res, out / "sweep.png")
        print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
