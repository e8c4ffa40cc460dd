"""Bundles compared at matched false-positive rates: the model's block score on held-out files, as a ROC.

    python bench/roc.py --bundle DEFAULT --bundle work/bundles/candidate \\
        --data work/corpus/test.jsonl [--benign work/independent.jsonl] [--out bench/results/roc]

A bundle's own figures depend on its block threshold, which each training run calibrates on its own dev
split; two bundles at their own thresholds can trade detection for false positives without either ranking
requests better. This benchmark takes the threshold out: for each bundle (DEFAULT is the packaged default)
it scores every request of `--data` once with the model alone (no rules, no cache), then prints

- the attack TPR at fixed benign false-positive rates of that file (0.05, 0.1, 0.2, 0.5 and 1 %),
- TPR and FPR at fixed thresholds (0.95 ... 0.998 and the bundle's own),
- the attack TPR of each attack class at one of those rates (`--class-fpr`, 0.1 % unless told): which
  classes a candidate gives up, or gains, at the same operating point,
- for each `--benign` file (benign only, such as bench/independent.py's probe), the FPR at the threshold
  that gives each fixed FPR on `--data` — what the other text would cost at the same operating point —
  and at the fixed thresholds.

With `--served`, each request of `--data` is also decided by the default rules as the gateway's second look
reads it, and the bundles are compared as served (a block by the model at a threshold, or by the rules; a model
block of a page asset as a probe is the rules' to decide, as in the gateway): the
served attack TPR at served benign FPRs the rules leave room for (the rules' own false positives are a floor no
threshold goes under), and at the served false positives of the first bundle at its own threshold, so that a
candidate is read at the operating point of the default whatever threshold its training calibrated, and at the
first bundle's threshold itself (two runs of one recipe at one fixed threshold).

Writes roc.json and roc.png (TPR against FPR, log scale) under --out. A threshold read off this output
is read off held-out data: use it to compare bundles, never to set a bundle's threshold.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import pyplot  # noqa: E402
from engine import bundle as bundles  # noqa: E402
from engine.eval import features_of, predict, truth  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.train.calibrate import rules_blocks, threshold_allowing  # noqa: E402
from engine.verdict import LABELS  # noqa: E402

BLOCK = LABELS.index("block")
FPRS = (0.0005, 0.001, 0.002, 0.005, 0.01)
SERVED_FPRS = (0.002, 0.0025, 0.003, 0.005, 0.01)  # served, the rules' own false positives come first (0.16 % held out)
SERVED_FPRS_LABELS = [f"{100 * f:g}%" for f in SERVED_FPRS]
THRESHOLDS = (0.95, 0.977, 0.99, 0.995, 0.998)


def scores(model: Model, path: Path, served: bool = False, procs: int = 2):
    """Block probability, is-attack and attack class ("" for benign), per record of a request-shaped JSONL file;
    with `served`, also whether the default rules block each record as the gateway's second look reads it."""
    recs = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    feats = [features_of(r) for r in recs]
    verdicts, probs, _ = predict(model, feats)
    attack = np.array([truth(r, f) == "block" for r, f in zip(recs, feats)], dtype=bool)
    classes = np.array([(r.get("attack_class") or "other") if a else "" for r, a in zip(recs, attack)], dtype=object)
    p = np.asarray(probs)[:, BLOCK].astype(np.float64)
    if not served:
        return p, attack, classes
    from rules.engine import probe_of_asset

    # a model block of a page asset as a probe is the rules' to decide (RuleEngine.second_look): the tags do not
    # depend on the threshold, so whether a block would be handed over is known before the threshold moves
    handed = np.array([probe_of_asset(dataclasses.replace(v, label="block"), f) for v, f in zip(verdicts, feats)], dtype=bool)
    return p, attack, classes, rules_blocks(recs, [v.truncated for v in verdicts], procs=procs), handed


def served_threshold(p: np.ndarray, attack: np.ndarray, ruled: np.ndarray, allowed: int,
                     handed: np.ndarray | None = None) -> float | None:  # fmt: skip
    """The lowest threshold at which the model and the rules together block at most `allowed` benign requests;
    None when the rules alone block more. `handed`: requests whose model block the rules decide instead."""
    room = allowed - int(ruled[~attack].sum())
    if room < 0:
        return None
    mine = ~attack & ~ruled if handed is None else ~attack & ~ruled & ~handed
    return threshold_allowing(p[mine], room)


def served_rates(p: np.ndarray, attack: np.ndarray, ruled: np.ndarray, t: float, handed: np.ndarray | None = None) -> dict:
    model = p >= t if handed is None else (p >= t) & ~handed
    blocked = model | ruled
    return {"threshold": t, "tpr": float(blocked[attack].mean()), "fp": int(blocked[~attack].sum()),
            "fpr": float(blocked[~attack].mean())}  # fmt: skip


def served_figures(p: np.ndarray, attack: np.ndarray, ruled: np.ndarray, own: float, first_fp: int | None,
                   handed: np.ndarray | None = None, first_threshold: float | None = None) -> dict:  # fmt: skip
    """Served figures: at the bundle's own threshold, at each of SERVED_FPRS (None where the rules alone exceed
    it), at `first_fp` served false positives (the first bundle's at its own threshold), and at the first bundle's
    threshold itself (`first_threshold`; the own threshold for the first): whether two runs of a recipe land
    closer at one fixed threshold than at the thresholds each one's dev split set. `handed`: requests whose model
    block would be the rules' to decide (a page asset called a probe)."""
    n_ben = int((~attack).sum())
    out = {"rules_benign": int(ruled[~attack].sum()), "rules_attacks": int(ruled[attack].sum()),
           "own": served_rates(p, attack, ruled, own, handed), "at_fpr": {}}  # fmt: skip
    for f in SERVED_FPRS:
        t = served_threshold(p, attack, ruled, int(np.floor(f * n_ben)), handed)
        out["at_fpr"][f"{100 * f:g}%"] = None if t is None else served_rates(p, attack, ruled, t, handed)
    k = out["own"]["fp"] if first_fp is None else first_fp
    t = served_threshold(p, attack, ruled, k, handed)
    out["at_first_fp"] = None if t is None else {**served_rates(p, attack, ruled, t, handed), "matched_fp": k}
    out["at_first_threshold"] = served_rates(p, attack, ruled, own if first_threshold is None else first_threshold, handed)
    return out


def by_class(att: np.ndarray, classes: np.ndarray, thresholds: dict[str, float]) -> dict[str, dict]:
    """Per attack class: its count and its TPR at each named threshold."""
    out = {}
    for cls in sorted(set(classes)):
        s = att[classes == cls]
        out[cls] = {"n": len(s), "at_fpr": {k: rate(s, t) for k, t in thresholds.items()}}
    return out


def threshold_at(benign: np.ndarray, fpr: float) -> float:
    """The lowest threshold that blocks at most `fpr` of `benign` (training's calibration, unclamped)."""
    return threshold_allowing(benign, int(np.floor(fpr * len(benign))))


def rate(s: np.ndarray, t: float) -> float:
    return float((s >= t).mean()) if len(s) else float("nan")


def curve(p: np.ndarray, attack: np.ndarray) -> tuple[list[float], list[float]]:
    """ROC points (FPR, TPR): at each of the 400 highest benign scores (the low-FPR end, where a WAF runs) and
    at 100 quantiles of the rest; values rounded to 6 decimals."""
    ben = np.sort(p[~attack])[::-1]
    att = np.sort(p[attack])
    ts = np.unique(np.concatenate([ben[: min(len(ben), 400)], np.quantile(ben, np.linspace(0, 1, 100))]))
    fpr = [1.0 - np.searchsorted(ben[::-1], t, side="left") / len(ben) for t in ts]
    tpr = [1.0 - np.searchsorted(att, t, side="left") / len(att) for t in ts]
    return [round(float(x), 6) for x in fpr], [round(float(x), 6) for x in tpr]


def chart(results: list[dict], out: Path) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        fpr, tpr = r["curve"]
        ax.plot([max(x, 1e-5) for x in fpr], [100 * y for y in tpr], label=r["bundle"])
    ax.set_xscale("log")
    ax.set_xlim(1e-4, 0.05)
    ax.set_xlabel("benign false-positive rate (log)")
    ax.set_ylabel("attack TPR, %")
    ax.set_title(f"model alone on {results[0]['data']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = out / "roc.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def print_classes(results: list[dict], at: str, min_n: int) -> None:
    """Per-class TPR of every bundle at the benign FPR `at`; later bundles also as a difference to the first."""
    first = results[0]["by_class"]
    rows = [c for c, v in first.items() if v["n"] >= min_n]
    print(f"attack TPR per class at a benign FPR of {at} (classes with at least {min_n} attacks)")
    head = " ".join(f"{r['bundle'][-22:]:>22s}" for r in results)
    print(f"  {'class':22s} {'n':>6s} {head}")
    for c in rows:
        base = first[c]["at_fpr"][at]
        cells = [f"{100 * base:22.2f}"]
        for r in results[1:]:
            v = r["by_class"].get(c, {"at_fpr": {at: float("nan")}})["at_fpr"][at]
            cells.append(f"{100 * v:6.2f} ({100 * (v - base):+6.2f})".rjust(22))
        print(f"  {c:22s} {first[c]['n']:6d} " + " ".join(cells))


def print_served(results: list[dict]) -> None:
    first = results[0]
    print(f"served (the model at a threshold, or the default rules): the rules alone block {first['served']['rules_benign']} "
          f"benign requests and {first['served']['rules_attacks']:,} attacks")  # fmt: skip
    print(f"  {'bundle':24s} {'own threshold':>24s} " + " ".join(f"{k:>10s}" for k in SERVED_FPRS_LABELS)
          + f" {'at the first bundle FP':>26s} {'its threshold':>22s}")  # fmt: skip
    for r in results:
        s = r["served"]
        own = f"{100 * s['own']['tpr']:.2f} % / {s['own']['fp']} FP"
        cells = [f"{100 * v['tpr']:.2f}" if v else "-" for v in s["at_fpr"].values()]
        m = s["at_first_fp"]
        matched = f"{100 * m['tpr']:.2f} % / {m['fp']} FP" if m else "-"
        ft = s["at_first_threshold"]
        fixed = f"{100 * ft['tpr']:.2f} % / {ft['fp']} FP"
        print(f"  {r['bundle']:24s} {own:>24s} " + " ".join(f"{c:>10s}" for c in cells) + f" {matched:>26s}"
              + f" {fixed:>22s}")  # fmt: skip
    print(f"  (attack TPR at a served benign FPR; '-': the rules alone block more; last column: at the first bundle's "
          f"threshold, {first['own_threshold']:g})")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", action="append", required=True, help="bundle folder, or DEFAULT (repeatable)")
    ap.add_argument("--data", required=True, type=Path, help="request-shaped JSONL with attacks and benign")
    ap.add_argument("--benign", action="append", default=[], type=Path, help="benign-only JSONL (repeatable)")
    ap.add_argument("--out", default=ROOT / "bench" / "results" / "roc", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--class-fpr", default="0.1%", choices=[f"{100 * f:g}%" for f in FPRS],
                    help="the benign FPR at which the per-class table is printed (all are in roc.json)")
    ap.add_argument("--min-class", type=int, default=50, help="print classes with at least this many attacks")
    ap.add_argument("--served", action="store_true",
                    help="also compare as served: the model at a threshold or the default rules (second look)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    results = []
    for name in args.bundle:
        t0 = time.time()
        b = bundles.load(None if name == "DEFAULT" else name)
        model = Model(b, threads=args.threads)
        p, attack, classes, *served = scores(model, args.data, args.served, args.threads)  # served: (ruled, handed)
        if not attack.any() or attack.all():
            sys.exit(f"{args.data} needs both attacks and benign requests")
        ben, att = p[~attack], p[attack]
        own = float(b.thresholds.get("block", 0.5))
        row: dict = {"bundle": b.id, "path": str(b.path), "data": str(args.data), "attacks": int(attack.sum()),
                     "benign": int((~attack).sum()), "own_threshold": own}  # fmt: skip
        at = {f"{100 * f:g}%": threshold_at(ben, f) for f in FPRS}
        row["at_fpr"] = {k: {"threshold": t, "tpr": rate(att, t), "fpr": rate(ben, t)} for k, t in at.items()}
        row["at_threshold"] = {f"{t:g}": {"tpr": rate(att, t), "fpr": rate(ben, t)} for t in (*THRESHOLDS, own)}
        row["by_class"] = by_class(att, classes[attack], at)
        row["benign_files"] = {}
        for path in args.benign:
            q, _, _ = scores(model, path)
            row["benign_files"][str(path)] = {
                "n": len(q),
                "at_data_fpr": {k: rate(q, v["threshold"]) for k, v in row["at_fpr"].items()},
                "at_threshold": {f"{t:g}": rate(q, t) for t in (*THRESHOLDS, own)},
            }
        if args.served:
            first_fp = results[0]["served"]["own"]["fp"] if results else None
            first_t = results[0]["own_threshold"] if results else None
            ruled, handed = served
            row["served"] = served_figures(p, attack, ruled, own, first_fp, handed, first_t)
        row["curve"] = curve(p, attack)
        row["seconds"] = round(time.time() - t0, 1)
        results.append(row)
        print(f"scored {b.id} in {row['seconds']} s", file=sys.stderr, flush=True)

    print(f"\nmodel alone on {args.data} ({results[0]['attacks']:,} attacks, {results[0]['benign']:,} benign)")
    print("attack TPR at a fixed benign FPR of that file" + "".join(f"; FPR on {p.name} there" for p in args.benign))
    print(f"  {'bundle':24s} " + " ".join(f"{k:>16s}" for k in results[0]["at_fpr"]))
    for r in results:
        cells = []
        for k, v in r["at_fpr"].items():
            extra = "".join(f"/{100 * bf['at_data_fpr'][k]:.2f}" for bf in r["benign_files"].values())
            cells.append(f"{100 * v['tpr']:6.2f}{extra}")
        print(f"  {r['bundle']:24s} " + " ".join(f"{c:>16s}" for c in cells))
    print("TPR / FPR at fixed thresholds" + "".join(f" (FPR on {p.name})" for p in args.benign))
    for r in results:
        cells = []
        for k, v in r["at_threshold"].items():
            extra = "".join(f" ({100 * bf['at_threshold'][k]:.2f})" for bf in r["benign_files"].values())
            mark = "*" if float(k) == r["own_threshold"] else ""
            cells.append(f"{k}{mark}: {100 * v['tpr']:.2f} / {100 * v['fpr']:.3f}{extra}")
        print(f"  {r['bundle']:24s} " + " | ".join(cells))
    print("  (* the bundle's own threshold)")
    print_classes(results, args.class_fpr, args.min_class)
    if args.served:
        print_served(results)
    (args.out / "roc.json").write_text(json.dumps(results, indent=1) + "\n")
    png = chart(results, args.out)
    print(f"results: {args.out / 'roc.json'}" + (f", {png}" if png else ""))


if __name__ == "__main__":
    main()
