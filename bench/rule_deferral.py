"""Should the model overrule the rules' noisiest blocks? Rules that block benign training requests, deferred to the model.

    python bench/rule_deferral.py --bundle DEFAULT --corpus work/corpus [--min-benign 3] [--below 0.01] [--test] [--out DIR]

Served, a rules block stands beside the model (engine.decide's ensemble), so every benign request a rule blocks is a
false positive whatever the model thinks. This benchmark asks what it would cost to let the model overrule the
rules that are known to misfire: a rule is *noisy* when it blocks at least `--min-benign` benign requests of the
training split outside the bundle's own dev split; a block that only noisy rules make gives way when the model's
block score is below `--below`. Settings are chosen on the bundle's dev split (never trained on); `--test` then
reads them once on `corpus/test.jsonl`. `--min-benign` and `--below` take comma-separated lists: every pair is
measured. Prints a table of false positives and attacks kept per setting, and writes rule_deferral.json and
rule_deferral.png under --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from multiprocessing import Pool
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine import bundle as bundles  # noqa: E402
from engine.eval import features_of, predict, truth  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.train.calibrate import BLOCK  # noqa: E402

_rules = None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _scan(records: list[dict]) -> list[tuple[str, ...]]:
    global _rules
    from rules.engine import RuleEngine

    if _rules is None:
        _rules = RuleEngine.load()
    return [res.rules if res.blocked else () for res in (_rules.scan(features_of(r)) for r in records)]


def scan(records: list[dict], procs: int) -> list[tuple[str, ...]]:
    """The ids of the rules that match each record the rules block (empty when they do not block it)."""
    chunks = [records[i : i + 2000] for i in range(0, len(records), 2000)]
    if procs <= 1:
        parts = [_scan(c) for c in chunks]
    else:
        with Pool(procs) as pool:
            parts = pool.map(_scan, chunks)
    return [rules for part in parts for rules in part]


def noisy_counts(blocked_by: list[tuple[str, ...]], attack: np.ndarray) -> Counter:
    """Benign requests each rule blocks (with others or alone)."""
    c: Counter = Counter()
    for rules, a in zip(blocked_by, attack):
        if not a:
            c.update(rules)
    return c


def decide(score: np.ndarray, threshold: float, blocked_by: list[tuple[str, ...]], noisy: set[str], below: float) -> np.ndarray:
    """Served blocks with deferral: the model's, plus the rules' unless only noisy rules block and the model's
    block score is under `below`. `noisy` empty (or `below` 0) is today's ensemble."""
    ruled = np.array([bool(r) for r in blocked_by])
    only_noisy = np.array([bool(r) and all(x in noisy for x in r) for r in blocked_by])
    return (score >= threshold) | (ruled & ~(only_noisy & (score < below)))


def figures(blocked: np.ndarray, attack: np.ndarray, classes: np.ndarray, base: np.ndarray) -> dict:
    lost = base & ~blocked & attack
    return {"tpr": round(float(blocked[attack].mean()), 5), "fp": int((blocked & ~attack).sum()),
            "fpr": round(float((blocked & ~attack).sum() / max(1, (~attack).sum())), 5),
            "attacks_lost": int(lost.sum()), "lost_by_class": dict(Counter(classes[lost].tolist()).most_common())}  # fmt: skip


def scored(model: Model, records: list[dict], procs: int) -> dict:
    feats = [features_of(r) for r in records]
    _, probs, _ = predict(model, feats)
    return {"score": np.asarray(probs)[:, BLOCK].astype(np.float32),
            "attack": np.array([truth(r, f) == "block" for r, f in zip(records, feats)], dtype=bool),
            "class": np.array([str(r.get("attack_class") or "") for r in records]),
            "blocked_by": scan(records, procs)}  # fmt: skip


def measure(s: dict, threshold: float, counts: Counter, settings: list[tuple[int, float]]) -> list[dict]:
    base = decide(s["score"], threshold, s["blocked_by"], set(), 0.0)
    rows = [{"min_benign": None, "below": None, "noisy_rules": 0, **figures(base, s["attack"], s["class"], base)}]
    for m, b in settings:
        noisy = {r for r, c in counts.items() if c >= m}
        blk = decide(s["score"], threshold, s["blocked_by"], noisy, b)
        rows.append({"min_benign": m, "below": b, "noisy_rules": len(noisy), **figures(blk, s["attack"], s["class"], base)})
    return rows


def chart(result: dict, path: Path) -> None:
    from bench.plotting import pyplot

    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, len(result["splits"]), figsize=(6 * len(result["splits"]), 4.2), squeeze=False)
    for ax, (name, rows) in zip(axes[0], result["splits"].items()):
        base = rows[0]
        ax.scatter([base["fp"]], [100 * base["tpr"]], color="black", zorder=3, label="today: a rules block stands")
        for r in rows[1:]:
            ax.scatter([r["fp"]], [100 * r["tpr"]], color="tab:blue")
            ax.annotate(f"≥{r['min_benign']}, <{r['below']}", (r["fp"], 100 * r["tpr"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")  # fmt: skip
        ax.set_xlabel("benign requests blocked, served")
        ax.set_ylabel("attack TPR served (%)")
        ax.set_title(f"{name} split: deferring noisy rules to the model")
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default="DEFAULT", help="bundle folder (DEFAULT: the packaged default)")
    ap.add_argument("--corpus", default="work/corpus", help="the corpus the bundle was trained on")
    ap.add_argument("--min-benign", default="3", help="noisy: blocks at least this many benign training requests")
    ap.add_argument("--below", default="0.01", help="a noisy block gives way under this model block score")
    ap.add_argument("--test", action="store_true", help="also read the settings once on corpus/test.jsonl")
    ap.add_argument("--procs", type=int, default=2, help="processes for the rules scan")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, help="first N training records only (smoke runs)")
    ap.add_argument("--out", default="bench/results/rule-deferral")
    args = ap.parse_args(argv)
    from engine.train.__main__ import bundle_split
    from engine.train.data import read_jsonl

    settings = [(int(m), float(b)) for m in args.min_benign.split(",") for b in args.below.split(",")]
    t0 = time.time()
    bundle = bundles.load(None if args.bundle == "DEFAULT" else args.bundle, allow_rejected=True)
    threshold = float(bundle.manifest["thresholds"]["block"])
    corpus = Path(args.corpus)
    train, dev = bundle_split(bundle, corpus / "train.jsonl", args.limit, log=log)
    log(f"[1/3] rules over the {len(train):,} training requests outside {bundle.id}'s dev split ({time.time() - t0:.0f}s)")
    train_attack = np.array([r.get("label") == "block" for r in train])
    train_blocked_by = scan(train, args.procs)
    counts = noisy_counts(train_blocked_by, train_attack)
    benign_blocked = sum(1 for b, a in zip(train_blocked_by, train_attack) if b and not a)
    del train, train_blocked_by
    model = Model(bundle, threads=args.threads)
    log(f"[2/3] dev split: {len(dev):,} requests, model and rules ({time.time() - t0:.0f}s)")
    splits = {"dev": measure(scored(model, dev, args.procs), threshold, counts, settings)}
    if args.test:
        test = list(read_jsonl(corpus / "test.jsonl"))
        log(f"[3/3] test split: {len(test):,} requests, model and rules ({time.time() - t0:.0f}s)")
        splits["test"] = measure(scored(model, test, args.procs), threshold, counts, settings)
    result = {"bundle": bundle.id, "threshold": threshold, "benign_training_requests": int((~train_attack).sum()),
              "benign_training_blocked": benign_blocked, "benign_blocks_by_rule": dict(counts.most_common()),
              "splits": splits}  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rule_deferral.json").write_text(json.dumps(result, indent=1) + "\n")
    chart(result, out / "rule_deferral.png")
    print(f"\n{bundle.id} (block threshold {threshold:.4f}); the rules block {benign_blocked:,} of "
          f"{result['benign_training_requests']:,} benign training requests outside its dev split; by rule: "
          + ", ".join(f"{r} {c}" for r, c in counts.most_common(6)))  # fmt: skip
    for name, rows in splits.items():
        print(f"\n{name}: {'noisy rules':>12s} {'defer under':>12s} {'TPR':>8s} {'FP':>5s} {'FPR':>8s}  attacks lost")
        for r in rows:
            what = "(today)" if r["min_benign"] is None else f">= {r['min_benign']} ({r['noisy_rules']})"
            below = "" if r["below"] is None else f"{r['below']:g}"
            print(f"{'':5s} {what:>12s} {below:>12s} {100 * r['tpr']:7.2f}% {r['fp']:5d} {100 * r['fpr']:7.3f}%  "
                  f"{r['attacks_lost']} {r['lost_by_class'] or ''}")  # fmt: skip
    print(f"\nwrote {out / 'rule_deferral.json'} and {out / 'rule_deferral.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
