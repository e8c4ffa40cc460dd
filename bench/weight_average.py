"""Weight averaging, read from one training run: the weights a run ends on against moving averages of them.

    python bench/weight_average.py --corpus work/corpus-svg --epochs 1 --out bench/results/weight-average

One network of the recipe (d = 64, window 64, seed 1) is trained on the corpus's training split as `engine.train`
trains it, while exponential moving averages of its weights with each `--decays` value are kept beside it
(`engine.train.loop.WeightAverage`). The last weights and each average are
then scored on the run's own dev split (never trained on; no held-out file is read), so the comparison is paired:
one run, one batch order, one seed, and no run-to-run noise between the rows. Figures per row: the model's attack
TPR at a benign FPR of 0.05 / 0.1 / 0.2 / 0.5 %, the model alone and served (beside the default rules: a request
the rules block counts as blocked, and the rules' own false positives count against the budget), and the calibrated
operating point training would choose (`calibrate.block_threshold`, target 0.1 %, its ceiling). Scores are read
as -log(1 - p(block)), summed from the three benign probabilities, so scores near 1 keep their order. Writes
weight_average.json and weight_average.png (served TPR against FPR) to `--out`.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import pyplot, save  # noqa: E402

FPRS = (0.0005, 0.001, 0.002, 0.005)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def score_of(probs: np.ndarray, block: int) -> np.ndarray:
    """-log(1 - p(block)), from the benign probabilities, so that scores near 1 keep their order."""
    rest = np.delete(probs, block, axis=1).astype(np.float64).sum(axis=1)
    return -np.log(np.clip(rest, 1e-300, None))


def tpr_at(score: np.ndarray, attack: np.ndarray, fpr: float, ruled: np.ndarray | None = None) -> float:
    """Attack TPR (the rules' blocks counted, when `ruled` is given) at the lowest threshold whose benign false
    positives, the rules' included, stay within `fpr` of the benign requests."""
    ruled = np.zeros(len(score), dtype=bool) if ruled is None else ruled
    benign = ~attack
    budget = int(np.floor(fpr * benign.sum())) - int((ruled & benign).sum())
    free = np.sort(score[benign & ~ruled])[::-1]
    if budget < 0:
        return float("nan")  # the rules alone are over the budget
    threshold = free[budget] if budget < len(free) else -np.inf
    return float(((score > threshold) | ruled)[attack].mean())


def rows_of(name: str, probs: np.ndarray, labels: np.ndarray, ruled: np.ndarray, block: int) -> dict:
    from engine.train import calibrate

    attack = labels == block
    score = score_of(probs, block)
    threshold = calibrate.block_threshold(probs, labels, 0.001, ruled)
    at = calibrate.figures(probs, labels, threshold, ruled)
    return {
        "weights": name,
        "model": {f"{100 * f:g}": round(100 * tpr_at(score, attack, f), 2) for f in FPRS},
        "served": {f"{100 * f:g}": round(100 * tpr_at(score, attack, f, ruled), 2) for f in FPRS},
        "calibrated": {"threshold": round(threshold, 5), "served_tpr": round(100 * at["tpr"], 2),
                       "served_fpr": round(100 * at["fpr"], 3)},  # fmt: skip
    }


def run(args) -> dict:
    import torch

    from engine.train import calibrate
    from engine.labels import FEATURES
    from engine.train.__main__ import encode_corpus, parse_args
    from engine.train.loop import TrainConfig, WeightAverage, predict, set_seed, train
    from engine.train.net import ClefNet
    from engine.verdict import LABELS

    t0 = time.time()
    decays = [float(d) for d in args.decays.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        targs = parse_args(["--corpus", args.corpus, "--out", tmp, "--seed", str(args.seed), "--threads", str(args.threads),
                           "--vocab", str(args.vocab)] + (["--limit", str(args.limit)] if args.limit else []))  # fmt: skip
        torch.set_num_threads(args.threads)
        set_seed(args.seed)
        train_data, dev_data, dev_recs, tokenizer, train_sha256 = encode_corpus(Path(args.corpus), Path(tmp) / "tokenizer.json", targs)
    log("rules on the dev split")
    ruled = calibrate.rules_blocks(dev_recs, dev_data.cut)
    del dev_recs
    set_seed(args.seed)
    net = ClefNet(vocab=tokenizer.get_vocab_size(), n_labels=len(LABELS), n_features=len(FEATURES), d=targs.dim,
                  ffn=targs.ffn, window=targs.window)  # fmt: skip
    averages = [WeightAverage(net, d) for d in decays]
    log(f"training one network, {args.epochs} epochs, averages with decays {', '.join(map(str, decays))}")
    result = train(net, train_data, TrainConfig(epochs=args.epochs, seed=args.seed), averages=tuple(averages))
    block = LABELS.index("block")
    labels = dev_data.labels
    rows = [rows_of("last", predict(net, dev_data)[0], labels, ruled, block)]
    for d, avg in zip(decays, averages):
        other = copy.deepcopy(net)
        other.load_state_dict(avg.state_dict(net))
        rows.append(rows_of(f"average {d}", predict(other, dev_data)[0], labels, ruled, block))
        log(f"  scored the average with decay {d}")
    return {
        "corpus": args.corpus, "train_sha256": train_sha256, "seed": args.seed, "epochs": args.epochs,
        "steps": result["steps"], "train_seconds": result["seconds"], "dev_attacks": int((labels == block).sum()),
        "dev_benign": int((labels != block).sum()), "rules_dev_false_positives": int((ruled & (labels != block)).sum()),
        "fprs_percent": [100 * f for f in FPRS], "rows": rows, "seconds": round(time.time() - t0, 1),
    }  # fmt: skip


def table(res: dict) -> str:
    head = " / ".join(f"{f:g}" for f in res["fprs_percent"])
    lines = [f"dev split: {res['dev_attacks']:,} attacks, {res['dev_benign']:,} benign (rules block {res['rules_dev_false_positives']} "
             f"of them); one network, {res['epochs']} epochs, {res['steps']:,} steps, seed {res['seed']}",  # fmt: skip
             f"| weights | model TPR at {head} % FPR | served TPR at {head} % FPR | calibrated: threshold, served TPR / FPR |",
             "|---|---|---|---|"]  # fmt: skip
    for r in res["rows"]:
        cal = r["calibrated"]
        lines.append(f"| {r['weights']} | " + " / ".join(f"{v:.2f}" for v in r["model"].values()) + " | "
                     + " / ".join(f"{v:.2f}" for v in r["served"].values())
                     + f" | {cal['threshold']:.4f}, {cal['served_tpr']:.2f} % / {cal['served_fpr']:.3f} % |")  # fmt: skip
    return "\n".join(lines)


def chart(res: dict, path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, view, name in zip(axes, ("model", "served"), ("the model alone", "served (beside the rules)")):
        for r in res["rows"]:
            ax.plot(res["fprs_percent"], list(r[view].values()), marker="o", label=r["weights"])  # NaN: rules over the budget
        ax.set_xscale("log")
        ax.set_xticks(res["fprs_percent"], [f"{f:g}" for f in res["fprs_percent"]])
        ax.minorticks_off()
        ax.set_xlabel("benign FPR on the dev split (%)")
        ax.set_ylabel("attack TPR (%)")
        ax.set_title(name)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"Last weights against moving averages of them: one run, {res['epochs']:g} epochs, {res['steps']:,} steps")
    save(plt, fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="work/corpus-svg")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--decays", default="0.99,0.998,0.999,0.9995")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=8192, help="the tokenizer's vocabulary (the recipe's 8,192)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N training records (smoke runs)")
    ap.add_argument("--out", default="work/weight-average")
    args = ap.parse_args(argv)
    res = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "weight_average.json").write_text(json.dumps(res, indent=1) + "\n")
    chart(res, out / "weight_average.png")
    print(table(res))
    print(f"{res['seconds']:.0f} s; {out / 'weight_average.json'}, {out / 'weight_average.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
