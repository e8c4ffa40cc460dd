"""How far a bundle's block threshold could have landed: training's calibration, bootstrapped.

    python bench/threshold_noise.py --bundle DEFAULT --corpus work/corpus [--rounds 1000] [--group-cap 1,3] [--out bench/results/threshold-noise]

Training sets the block threshold on its dev split (engine.train.calibrate.block_threshold): the lowest threshold at
which the model adds at most 0.1 % of the dev benign requests to those the rules block anyway. With a few thousand
dev benign requests that share is a handful of requests, so the threshold rests on a handful of scores. This
benchmark rebuilds the bundle's own dev split (the records of `corpus/train.jsonl` that `split_dev` holds out with
the bundle's seed and dev-split mode, so the bundle never trained on them), scores it with the bundle alone, then
resamples the dev benign requests `--rounds` times (with replacement; by request, and by whole group) and sets the
threshold again by the same rule each time. It prints the spread of those thresholds and, on `corpus/test.jsonl`,
what each one would block served (the rules beside the model) and the threshold the test split itself would want.
With `--calibration FILE` (engine.train.calibration: benign requests from other builds, held out of the bundle's
run as its dev split is), they join the dev benign requests, as `python -m engine.train --calibration` reads them:
the spread then shows what a calibration set ten times larger pins, resampled by request, and what it cannot,
resampled by group (its requests render the dev split's own groups again). With `--group-cap K`, the threshold set
with each group's benign requests counted at most K times against the budget, and what it would block on the test
split: whether one family of near-copies at the top of the dev scores (the oauthlib token requests that set 0.11.4's
and 0.22.1's) decides the threshold.

Writes threshold_noise.json and threshold_noise.png under --out. The test figures explain a calibration; they must
never set one (the test split is held out for measuring).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import pyplot, save  # noqa: E402
from engine import bundle as bundles  # noqa: E402
from engine.eval import features_of, predict, read_records, truth  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.train.calibrate import BLOCK, CEILING, block_threshold, rules_blocks, threshold_allowing  # noqa: E402
from engine.verdict import LABELS  # noqa: E402

PERCENTILES = (5, 25, 50, 75, 95)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def score(model: Model, records: list[dict]) -> dict[str, np.ndarray]:
    """Block score (model alone), is-attack, blocked-by-the-rules and group, per record."""
    feats = [features_of(r) for r in records]
    verdicts, probs, _ = predict(model, feats)
    return {
        "score": np.asarray(probs)[:, BLOCK].astype(np.float32),
        "attack": np.array([truth(r, f) == "block" for r, f in zip(records, feats)], dtype=bool),
        "ruled": rules_blocks(records, [v.truncated for v in verdicts]),  # as the gateway's second look reads them
        "group": np.array([str(r.get("group") or i) for i, r in enumerate(records)]),
    }


def threshold(s: dict[str, np.ndarray], idx: np.ndarray, target_fpr: float) -> float:
    """Training's rule on the rows `idx` of a scored set."""
    probs = np.zeros((len(idx), len(LABELS)), dtype=np.float32)
    probs[:, BLOCK] = s["score"][idx]
    labels = np.where(s["attack"][idx], BLOCK, (BLOCK + 1) % len(LABELS))  # any label but block: benign
    return block_threshold(probs, labels, target_fpr, s["ruled"][idx])


def capped_threshold(s: dict[str, np.ndarray], target_fpr: float, cap: int) -> float:
    """Training's rule, except that a group's benign requests count at most `cap` times against the budget, so a
    family of near-copies (one template rendered many times) cannot set the threshold by itself. The family's other
    requests above it are blocked all the same: the share blocked may exceed the target. A diagnostic, not a rule
    training uses."""
    benign = ~s["attack"]
    free = np.where(benign & ~s["ruled"])[0]
    counted: dict[str, int] = {}
    kept = []
    for i in free[np.argsort(-s["score"][free], kind="stable")]:
        counted[s["group"][i]] = counted.get(s["group"][i], 0) + 1
        if counted[s["group"][i]] <= cap:
            kept.append(i)
    t = threshold_allowing(s["score"][np.array(kept, dtype=int)], int(np.floor(target_fpr * benign.sum())))
    return float(min(CEILING, max(0.5, t)))


def served(s: dict[str, np.ndarray], t: float) -> dict[str, float]:
    blocked = (s["score"] >= t) | s["ruled"]
    a = s["attack"]
    return {"tpr": round(float(blocked[a].mean()), 5) if a.any() else None,
            "fpr": round(float(blocked[~a].mean()), 5) if (~a).any() else None}  # fmt: skip


def bootstrap(dev: dict[str, np.ndarray], rounds: int, target_fpr: float, by: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    attacks, benign = np.where(dev["attack"])[0], np.where(~dev["attack"])[0]
    groups: dict[str, list[int]] = {}
    for i in benign:
        groups.setdefault(dev["group"][i], []).append(int(i))
    members = list(groups.values())
    out = np.empty(rounds)
    for k in range(rounds):
        if by == "request":
            picked = rng.choice(benign, len(benign)) if len(benign) else benign
        else:
            picked = np.array([i for g in rng.integers(0, len(members), len(members)) for i in members[g]], dtype=int)
        out[k] = threshold(dev, np.concatenate([attacks, picked]).astype(int), target_fpr)
    return out


def chart(result: dict, draws: dict[str, np.ndarray], test: dict[str, np.ndarray] | None, out: Path) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    # 1 - threshold on a log scale: the thresholds that matter crowd just under the ceiling (calibrate.CEILING)
    floor = 0.99 * (1 - CEILING)  # a threshold on the ceiling shows just right of it
    gap = {by: np.maximum(1 - d, floor) for by, d in draws.items()}
    widest = max(float(max(g.max() for g in gap.values())), 1 - result["dev_threshold"], 0.02)
    bins = np.geomspace(floor, widest * 1.05, 50)
    for by, g in gap.items():
        ax.hist(g, bins=bins, alpha=0.5, label=f"dev threshold, resampled by {by}")
    ax.axvline(1 - result["dev_threshold"], color="black", lw=1, label="the bundle's dev threshold")
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("1 - block threshold (log scale; stricter to the right)")
    ax.set_ylabel("bootstrap rounds")
    handles, labels = ax.get_legend_handles_labels()
    if test is not None:
        ax2 = ax.twinx()
        ts = 1 - np.geomspace(floor, widest * 1.05, 200)
        ax2.plot(1 - ts, [100 * served(test, t)["fpr"] for t in ts], color="crimson", label="served FPR on the test split")
        ax2.set_ylabel("served benign FPR on test (%)", color="crimson")
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, loc="upper left", fontsize=8)
    what = "dev and calibration benign" if result.get("calibration") else "dev benign"
    ax.set_title(f"{result['bundle']}: where its threshold could have landed ({result['dev_benign']:,} {what})")
    return save(plt, fig, out / "threshold_noise.png", dpi=120)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default="DEFAULT", help="bundle folder (DEFAULT: the packaged default)")
    ap.add_argument("--corpus", default="work/corpus", help="the corpus the bundle was trained on")
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--out", default="bench/results/threshold-noise")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calibration", default=None, metavar="FILE", help="more held-out benign requests beside the dev split's")
    ap.add_argument("--group-cap", default="", metavar="K[,K...]",
                    help="also set the threshold with each dev group's benign requests counted at most K times (a diagnostic)")
    args = ap.parse_args(argv)
    from engine.train.__main__ import bundle_split, file_sha256

    t0 = time.time()
    bundle = bundles.load(None if args.bundle == "DEFAULT" else args.bundle, allow_rejected=True)
    target = 0.001  # training's default --target-fpr: the model's share of the dev benign requests
    model = Model(bundle, threads=args.threads)
    corpus = Path(args.corpus)
    _, dev_recs = bundle_split(bundle, corpus / "train.jsonl", log=log)
    log(f"[1/3] {bundle.id}: scoring its dev split ({len(dev_recs):,} requests) ({time.time() - t0:.0f}s)")
    dev = score(model, dev_recs)
    if args.calibration:
        from engine.train.calibration import load

        run = bundle.manifest.get("trained_on", {})
        extra, _ = load(Path(args.calibration), file_sha256(corpus / "train.jsonl"), int(run.get("seed", 1)), run.get("dev_split", "mixed"))
        log(f"      and {len(extra):,} calibration requests ({args.calibration}) ({time.time() - t0:.0f}s)")
        more = score(model, extra)
        dev = {k: np.concatenate([dev[k], more[k]]) for k in dev}
    test = None
    if (corpus / "test.jsonl").exists():
        log(f"[2/3] scoring {corpus / 'test.jsonl'} ({time.time() - t0:.0f}s)")
        test = score(model, read_records(corpus / "test.jsonl"))
    everything = np.arange(len(dev["score"]))
    result = {
        "bundle": bundle.id,
        "bundle_threshold": bundle.manifest.get("thresholds", {}).get("block"),
        "dev_threshold": threshold(dev, everything, target),
        "dev_benign": int((~dev["attack"]).sum()),  # with --calibration, its requests too
        "calibration": args.calibration,
        "dev_benign_the_model_may_block": int(np.floor(target * (~dev["attack"]).sum())),
        "rounds": args.rounds,
    }
    caps = [int(k) for k in args.group_cap.split(",") if k.strip()]
    result["group_capped"] = [{"cap": k, "dev_threshold": capped_threshold(dev, target, k)} for k in caps]
    if test is not None:
        result["test_at_dev_threshold"] = served(test, result["dev_threshold"])
        result["test_threshold"] = threshold(test, np.arange(len(test["score"])), target)
        for row in result["group_capped"]:
            row["test_served"] = served(test, row["dev_threshold"])
    log(f"[3/3] {args.rounds} bootstrap rounds, by request and by group ({time.time() - t0:.0f}s)")
    draws = {by: bootstrap(dev, args.rounds, target, by) for by in ("request", "group")}
    for by, d in draws.items():
        q = [float(x) for x in np.percentile(d, PERCENTILES)]
        row = {"percentiles": list(PERCENTILES), "thresholds": [round(x, 5) for x in q], "share_at_ceiling": round(float((d >= CEILING).mean()), 3)}
        if test is not None:
            row["test_served"] = [served(test, x) for x in q]
        result[f"by_{by}"] = row
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "threshold_noise.json").write_text(json.dumps(result, indent=1) + "\n")
    png = chart(result, draws, test, out)

    what = "dev and calibration" if args.calibration else "dev"
    print(f"\n{bundle.id}: dev threshold {result['dev_threshold']:.4f} from {result['dev_benign']:,} {what} benign requests "
          f"(the model may add {result['dev_benign_the_model_may_block']} of them)")  # fmt: skip
    if test is not None:
        at = result["test_at_dev_threshold"]
        print(f"  test split, served at it: TPR {100 * at['tpr']:.2f} %  FPR {100 * at['fpr']:.3f} %; "
              f"the test split's own threshold by the same rule: {result['test_threshold']:.4f}")  # fmt: skip
    for row in result["group_capped"]:
        at = row.get("test_served")
        print(f"  each group capped at {row['cap']} benign requests: dev threshold {row['dev_threshold']:.4f}"
              + (f"; test split, served at it: TPR {100 * at['tpr']:.2f} %  FPR {100 * at['fpr']:.3f} %" if at else ""))
    for by in draws:
        row = result[f"by_{by}"]
        line = "  ".join(f"p{p} {t:.4f}" for p, t in zip(PERCENTILES, row["thresholds"]))
        print(f"  resampled by {by:7s}: {line}  (at the ceiling, {CEILING}: {100 * row['share_at_ceiling']:.0f} %)")
        if test is not None:
            print("  " + " " * 22 + "  ".join(f"FPR {100 * s['fpr']:.3f} %" for s in row["test_served"]) + "  (test, served)")
    print(f"results: {out / 'threshold_noise.json'}" + (f", {png}" if png else "") + f"  ({time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
