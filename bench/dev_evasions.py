"""Evasions of a bundle's dev split: what encoding tricks cost the rules and the model, without the held-out files.

    python bench/dev_evasions.py [--bundle DIR] [--corpus work/corpus] [--data ../shared/data] [--total 8000]
                                 [--rules-only] [--out bench/results/dev-evasions]

The evasion set (`engine.corpus.evasion`) rewrites the payloads of held-out test groups: double percent-encoding,
mixed case, SQL comments, unicode escapes, HTML entities, base64, fullwidth forms, a payload deep in a 50 KB JSON
body. This benchmark makes the same rewrites of the payload groups of a bundle's own dev split (`split_dev` with
the bundle's seed and dev-split mode, so the bundle never trained on them, and no test group is among them),
carried by the training split's pools and page variants. A canonicalisation gap (a transform the rules or the model
do not undo) then shows, and can be fixed, before a held-out file is read. Each request is decided by the rules
alone (as with the model down) and, unless --rules-only, as served (the model, then the rules' second look). The dev
split's own attacks of the same classes, as sent, are the plain reference. Prints the block rate per transform and
per class, writes JSON and a PNG chart.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import DECIDERS, pyplot, save  # noqa: E402
from engine import bundle as bundles  # noqa: E402
from engine.eval import features_of, predict, truth  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.train.calibrate import rules_blocks  # noqa: E402




def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def evasions(data_dir: str, groups: set[str], total: int, seed: int) -> list[dict]:
    """Evasion records of the payload records whose group is in `groups`, built as the evasion set is."""
    from engine.corpus import evasion, sources
    from engine.corpus.build import prepare
    from engine.corpus.rand import Rng

    prep = prepare(sources.load(data_dir))
    picked = {c: [r for r in recs if r["group"] in groups] for c, recs in prep.attacks["train"].items()}
    picked = {c: recs for c, recs in picked.items() if recs}
    return list(evasion.generate(Rng(seed, "dev-evasions"), prep.pools["train"], picked, total, split="train"))


def decide(records: list[dict], model: Model | None) -> dict[str, np.ndarray]:
    """Rules alone and, with a model, the model alone and served (the model's block, else the rules' second look)."""
    alone = rules_blocks(records)
    if model is None:
        return {"rules": alone}
    verdicts, _, _ = predict(model, [features_of(r) for r in records])
    blocked = np.array([v.blocked for v in verdicts], dtype=bool)
    return {"rules": alone, "model": blocked, "served": blocked | rules_blocks(records, [v.truncated for v in verdicts])}


def rates(keys: list[str], decided: dict[str, np.ndarray]) -> dict[str, dict]:
    by: dict[str, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        by[k].append(i)
    return {k: {"n": len(idx), **{how: round(float(d[idx].mean()), 4) for how, d in decided.items()}} for k, idx in sorted(by.items())}


def chart(result: dict, out: Path) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    rows = result["by_transform"]
    names = ["plain (dev, as sent)"] + list(rows)
    series = [how for how in ("rules", "model", "served") if how in result["plain"]]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(series)
    for k, how in enumerate(series):
        vals = [100 * result["plain"][how]] + [100 * rows[t][how] for t in rows]
        ax.bar([i + k * width for i in range(len(names))], vals, width, label=DECIDERS[how])
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(names))], names, rotation=30, ha="right")
    low = min([100 * result["plain"][s] for s in series] + [100 * rows[t][s] for t in rows for s in series])
    ax.set_ylim(max(0.0, low - 5), 100.5)
    ax.set_ylabel("attacks blocked (%)")
    ax.set_title(f"{result['bundle']}, {result['rules']}: evasions of {result['evasions']:,} dev-split attacks")
    ax.legend(loc="lower left")
    return save(plt, fig, out / "dev_evasions.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default="DEFAULT", help="bundle folder (DEFAULT: the packaged default)")
    ap.add_argument("--corpus", default="work/corpus", help="the corpus the bundle was trained on")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"), help="the shared data the corpus was built from")
    ap.add_argument("--total", type=int, default=8000, help="evasion requests to build")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rules-only", action="store_true", help="decide by the rules alone (no model)")
    ap.add_argument("--out", default="bench/results/dev-evasions")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    from engine.train.__main__ import bundle_split
    from rules.engine import RuleEngine

    t0 = time.time()
    bundle = bundles.load(None if args.bundle == "DEFAULT" else args.bundle, allow_rejected=True)
    _, dev = bundle_split(bundle, Path(args.corpus) / "train.jsonl", log=log)
    feats = [features_of(r) for r in dev]
    attacks = [r for r, f in zip(dev, feats) if truth(r, f) == "block"]
    groups = {r["group"] for r in attacks if r.get("group")}
    log(f"[1/3] {bundle.id}: its dev split holds {len(attacks):,} attacks of {len(groups):,} groups ({time.time() - t0:.0f}s)")
    records = evasions(args.data, groups, args.total, args.seed)
    if not records:
        log("no payload group of the dev split has a transform that applies: nothing to measure")
        return 1
    classes = {r["attack_class"] for r in records}
    plain = [r for r in attacks if r.get("attack_class") in classes]
    log(f"[2/3] {len(records):,} evasion requests of {len(classes)} classes; deciding them and {len(plain):,} plain dev attacks ({time.time() - t0:.0f}s)")
    model = None if args.rules_only else Model(bundle, threads=args.threads)
    ev, pl = decide(records, model), decide(plain, model)
    result = {
        "bundle": bundle.id,
        "rules": RuleEngine.load().model,
        "evasions": len(records),
        "plain_attacks": len(plain),
        "plain": {how: round(float(d.mean()), 4) for how, d in pl.items()},
        "evasion": {how: round(float(d.mean()), 4) for how, d in ev.items()},
        "by_transform": rates([r["gen"].split("/")[1] for r in records], ev),
        "by_class": rates([r["attack_class"] for r in records], ev),
        "plain_by_class": rates([r["attack_class"] for r in plain], pl),
        "seconds": round(time.time() - t0, 1),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dev_evasions.json").write_text(json.dumps(result, indent=1) + "\n")
    log(f"[3/3] writing {out} ({time.time() - t0:.0f}s)")
    png = chart(result, out)

    hows = list(result["plain"])
    head = "".join(f"{DECIDERS[h].split(' (')[0]:>13s}" for h in hows)
    print(f"\n{bundle.id}, {result['rules']}: {len(records):,} evasions of dev-split attacks (never trained on)")
    print(f"{'':28s}{'n':>7s}{head}")
    print(f"{'plain (dev, as sent)':28s}{len(plain):7,d}" + "".join(f"{100 * result['plain'][h]:12.2f}%" for h in hows))
    print(f"{'all evasions':28s}{len(records):7,d}" + "".join(f"{100 * result['evasion'][h]:12.2f}%" for h in hows))
    for t, row in result["by_transform"].items():
        print(f"{'  ' + t:28s}{row['n']:7,d}" + "".join(f"{100 * row[h]:12.2f}%" for h in hows))
    print("by class (evasions / plain):")
    for c, row in result["by_class"].items():
        ref = result["plain_by_class"].get(c, {})
        cells = "".join(f"{100 * row[h]:8.2f}% /{100 * ref[h]:7.2f}%" if h in ref else f"{100 * row[h]:8.2f}% /      -" for h in hows)
        print(f"{'  ' + c:28s}{row['n']:7,d}  {cells}")
    print(f"results: {out / 'dev_evasions.json'}" + (f", {png}" if png else "") + f"  ({result['seconds']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
