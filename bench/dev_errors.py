"""Where a bundle's errors on its own dev split sit: by group (payload template, benign source).

    python bench/dev_errors.py [--bundle DIR] [--corpus work/corpus] [--top 60] [--out bench/results/dev-errors]
    python bench/dev_errors.py --bundle DIR --data work/corpus/test.jsonl --out DIR     # a held-out file instead

The dev split is the part of `corpus/train.jsonl` that the bundle's own run held out (its seed and dev-split mode:
engine.train's `bundle_split`), so the bundle never trained on it, and reading it never touches the test split.
Every dev request is scored once by the model alone and decided by the rules as the gateway's second look reads
it; served, a request is blocked when the model's block score reaches the bundle's threshold or the rules block it.

Prints, and writes to dev_errors.json (counts, classes and group ids; the example requests only print, so that
a results file committed beside the benchmarks holds no corpus text):

- served misses (attacks neither blocks) and served false positives, by group, the largest groups first, with
  one request of each group (its request line and body: a payload in a header or a cookie does not show);
- how concentrated they are: the share of the misses that the 1, 2, 4 and 8 largest groups hold;
- the groups among the `--top` highest-scoring benign requests (those that set the calibrated threshold: training
  lets the model block 0.1 % of the dev benign requests the rules let through).

A class's figure that rests on a few templates moves by whole templates: read per-class figures with that in mind.
`--data FILE` reads a request-shaped file instead of the dev split, the same way: where a candidate's errors on a
held-out test split sit, read after the candidate was judged (a diagnosis: nothing is to be chosen by it).
Writes dev_errors.png: the share of served misses against the number of groups, largest first.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import pyplot, save  # noqa: E402
from engine import bundle as bundles  # noqa: E402
from engine.model import Model  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_threshold_noise", ROOT / "bench" / "threshold_noise.py")
noise = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(noise)
log = noise.log
SHARES = (1, 2, 4, 8)


def example(rec: dict, width: int = 140) -> str:
    """One line that shows where a request carries its payload: the request line, then the body's start."""
    query = f"?{rec['query']}" if rec.get("query") else ""
    body = (rec.get("body") or "").replace("\r", "").replace("\n", " ")
    return f"{rec.get('method', 'GET')} {rec.get('path', '/')}{query} {body}"[:width]


def by_group(rows: np.ndarray, dev: list[dict], groups: np.ndarray) -> list[dict]:
    """The groups of `rows`, largest first: group, class, count and one example each."""
    counts = Counter(groups[rows])
    first = {}
    for i in rows:
        first.setdefault(groups[i], int(i))
    return [{"group": g, "class": dev[first[g]].get("attack_class"), "gen": dev[first[g]].get("gen"), "n": n,
             "example": example(dev[first[g]])} for g, n in counts.most_common()]  # fmt: skip


def shares(groups: list[dict], total: int) -> dict[str, float]:
    """The share of `total` that the 1, 2, 4 and 8 largest of `groups` (largest first) hold."""
    sizes = [sum(g["n"] for g in groups[:k]) for k in SHARES]
    return {str(k): round(n / total, 4) if total else 0.0 for k, n in zip(SHARES, sizes)}


def analyse(s: dict[str, np.ndarray], dev: list[dict], threshold: float, top: int) -> dict:
    """The figures above from scored dev requests (`bench/threshold_noise.score`'s arrays)."""
    blocked = (s["score"] >= threshold) | s["ruled"]
    att, groups = s["attack"], s["group"]
    misses, fps = np.where(att & ~blocked)[0], np.where(~att & blocked)[0]
    benign = np.where(~att)[0]
    highest = benign[np.argsort(-s["score"][benign], kind="stable")[:top]]
    miss_groups = by_group(misses, dev, groups)
    return {
        "threshold": threshold,
        "attacks": int(att.sum()), "attack_groups": int(len(set(groups[att]))),
        "benign": int((~att).sum()), "benign_groups": int(len(set(groups[~att]))),
        **{f"served_{k}": v for k, v in noise.served(s, threshold).items()},
        "misses": int(len(misses)), "miss_groups": miss_groups,
        "miss_share_of_largest_groups": shares(miss_groups, len(misses)),
        "false_positives": int(len(fps)), "false_positives_by_model": int((~att & (s["score"] >= threshold)).sum()),
        "false_positives_by_rules": int((~att & s["ruled"]).sum()), "false_positive_groups": by_group(fps, dev, groups),
        "highest_benign": {"top": int(len(highest)), "lowest_score": float(s["score"][highest].min()) if len(highest) else None,
                           "groups": by_group(highest, dev, groups)},
    }  # fmt: skip


def without_examples(res: dict) -> dict:
    strip = lambda groups: [{k: v for k, v in g.items() if k != "example"} for g in groups]  # noqa: E731
    return {**res, "miss_groups": strip(res["miss_groups"]), "false_positive_groups": strip(res["false_positive_groups"]),
            "highest_benign": {**res["highest_benign"], "groups": strip(res["highest_benign"]["groups"])}}  # fmt: skip


def chart(res: dict, out: Path) -> Path | None:
    plt = pyplot()
    if plt is None or not res["misses"]:
        return None
    sizes = np.cumsum([g["n"] for g in res["miss_groups"]]) / res["misses"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.step(np.arange(1, len(sizes) + 1), 100 * sizes, where="post")
    ax.set_xscale("log")
    ax.set_xlabel("groups (payload templates), largest first")
    ax.set_ylabel(f"share of served misses on {Path(res['data']).name if res.get('data') else 'the dev split'}, %")
    ax.set_ylim(0, 100)
    ax.set_title(f"{res['bundle']}: {res['misses']} served misses in {len(sizes)} of {res['attack_groups']} attack groups")
    ax.grid(alpha=0.3)
    return save(plt, fig, out / "dev_errors.png")


def _pct(v: float | None, digits: int) -> str:
    """A rate as a percentage, or n/a where the file holds none of its requests (attacks alone: no FPR)."""
    return "n/a" if v is None else f"{100 * v:.{digits}f} %"


def report(res: dict, rows: int = 12) -> str:
    lines = [f"{res['bundle']} on {res.get('data') or 'its dev split'}: {res['attacks']:,} attacks in {res['attack_groups']} groups, "
             f"{res['benign']:,} benign in {res['benign_groups']} groups; threshold {res['threshold']:.4f}",
             f"served: TPR {_pct(res['served_tpr'], 2)}, FPR {_pct(res['served_fpr'], 3)} "
             f"({res['false_positives']} false positives: model {res['false_positives_by_model']}, rules {res['false_positives_by_rules']})",
             f"\n{res['misses']} served misses in {len(res['miss_groups'])} groups; the largest hold "
             + ", ".join(f"{k}: {100 * v:.0f} %" for k, v in res["miss_share_of_largest_groups"].items())]  # fmt: skip
    for g in res["miss_groups"][:rows]:
        lines.append(f"  {g['n']:4d}  {g['class'] or '-':16s} {g['example']}")
    lines.append(f"\nserved false positives by group ({len(res['false_positive_groups'])} groups)")
    for g in res["false_positive_groups"][:rows]:
        lines.append(f"  {g['n']:4d}  {g['gen'] or '-':32s} {g['example']}")
    hb = res["highest_benign"]
    if hb.get("lowest_score") is None:  # a file of attacks alone
        return "\n".join(lines)
    lines.append(f"\nthe {hb['top']} highest-scoring benign requests (down to {hb['lowest_score']:.4f}) by group")
    for g in hb["groups"][:rows]:
        lines.append(f"  {g['n']:4d}  {g['gen'] or '-':32s} {g['example']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default="DEFAULT", help="bundle folder (DEFAULT: the packaged default)")
    ap.add_argument("--corpus", default="work/corpus", help="the corpus the bundle was trained on")
    ap.add_argument("--data", default=None, help="a request-shaped file (a held-out test split) to read instead of the "
                    "bundle's dev split; --corpus is then not read")
    ap.add_argument("--top", type=int, default=60, help="how many of the highest-scoring benign requests to group")
    ap.add_argument("--out", default="bench/results/dev-errors")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    from engine.train.__main__ import bundle_split
    from engine.train.data import read_jsonl

    t0 = time.time()
    bundle = bundles.load(None if args.bundle == "DEFAULT" else args.bundle, allow_rejected=True)
    if args.data:
        dev, source = list(read_jsonl(Path(args.data))), {"data": args.data}
    else:
        _, dev = bundle_split(bundle, Path(args.corpus) / "train.jsonl", log=log)
        source = {"corpus": args.corpus}
    log(f"{bundle.id}: scoring {args.data or 'its dev split'} ({len(dev):,} requests)")
    s = noise.score(Model(bundle, threads=args.threads), dev)
    res = {"bundle": bundle.id, **source,
           **analyse(s, dev, float(bundle.manifest.get("thresholds", {}).get("block", 0.5)), args.top)}  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dev_errors.json").write_text(json.dumps(without_examples(res), indent=1, ensure_ascii=False) + "\n")
    png = chart(res, out)
    print(report(res))
    print(f"\nresults: {out / 'dev_errors.json'}" + (f", {png}" if png else "") + f"  ({time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
