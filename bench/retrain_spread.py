"""How far retrained bundles land from the default, read off `bench/roc.py --served` results: issue 3's clause that a
retrain from scratch lands within 0.5 point of the default's figures, over every draw measured.

    python bench/retrain_spread.py --roc 0.11.4=bench/results/retrain/roc.json \\
        --roc 0.11.7=bench/results/retrain/0.11.7/roc-svg.json --title corpus-svg --out bench/results/retrain/spread-svg

Each `--roc LABEL=FILE` is one `bench/roc.py --bundle DEFAULT --bundle DRAW --data SPLIT --served` result: its first
bundle is the reference (the same bundle, counts and served figures at its own threshold in every file, or the run
stops with exit 2; the data's path may differ, a corpus folder renamed, and is noted), its second the draw. Nothing is scored again: the files hold each bundle's served TPR at the reference's own number of false
positives (`at_first_fp`), at fixed served FPRs (0.2 ... 1 %), and at the reference's threshold (`at_first_threshold`:
TPR and false positives; files from before bench/roc.py wrote it lack that column).

Prints a table of each draw's served TPR minus the reference's, in points, at every rate, and at the reference's
threshold the TPR and the false positives it adds; then, per rate, the draws' mean, spread (sample standard
deviation) and range. A draw holds the clause where no TPR falls by more than `--points` (0.5) and, at the reference's
threshold, the served FPR rises by at most `--fpr-points` (0.05), the reading the criteria files of
bench/results/retrain/ use. Writes spread.json and spread.png (each draw's line across the rates, the band of the
clause shaded).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import pyplot, save  # noqa: E402


class SpreadError(ValueError):
    """The results cannot be compared: another reference, another split, or not a served roc.json."""


def read(label: str, path: Path) -> dict:
    """One draw: the reference's and the draw's served figures from a `bench/roc.py --served` file."""
    try:
        runs = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SpreadError(f"{label}: cannot read {path}: {err}") from err
    if not isinstance(runs, list) or len(runs) != 2 or not all(isinstance(r, dict) and r.get("served") for r in runs):
        raise SpreadError(f"{label}: {path} is not a served run of two bundles (bench/roc.py --bundle DEFAULT --bundle DRAW --served)")
    ref, draw = runs
    return {"label": label, "path": str(path), "ref": ref, "draw": draw}


def same_reference(draws: list[dict]) -> list[str]:
    """Every file's first bundle, counts and served figures at its own threshold are the first file's: otherwise the
    deltas are not comparable. The data's path may differ (a corpus folder renamed); returns a note for each."""
    first, notes = draws[0]["ref"], []
    for d in draws[1:]:
        for key in ("bundle", "attacks", "benign"):
            if d["ref"].get(key) != first.get(key):
                raise SpreadError(f"{d['label']}: its reference's {key} is {d['ref'].get(key)!r}, "
                                  f"{draws[0]['label']}'s is {first.get(key)!r}")  # fmt: skip
        if d["ref"]["served"]["own"] != first["served"]["own"]:
            raise SpreadError(f"{d['label']}: its reference serves otherwise ({d['ref']['served']['own']} against "
                              f"{first['served']['own']}): another split or other rules")  # fmt: skip
        if d["ref"].get("data") != first.get("data"):
            notes.append(f"note: {d['label']} read {d['ref'].get('data')}, {draws[0]['label']} {first.get('data')}: "
                         "the same counts and reference figures")  # fmt: skip
    return notes


def points(ref: float, draw: float) -> float:
    return round(100 * (draw - ref), 2)


def deltas(d: dict) -> dict:
    """The draw's served TPR minus the reference's at each rate (points), and at the reference's threshold."""
    ref, draw = d["ref"]["served"], d["draw"]["served"]
    rows = {}
    if ref.get("at_first_fp") and draw.get("at_first_fp"):
        rows[f"{ref['at_first_fp']['fp']} FP"] = points(ref["at_first_fp"]["tpr"], draw["at_first_fp"]["tpr"])
    for rate, r in ref["at_fpr"].items():
        if r and draw["at_fpr"].get(rate):
            rows[rate] = points(r["tpr"], draw["at_fpr"][rate]["tpr"])
    out = {"label": d["label"], "bundle": d["draw"]["bundle"], "path": d["path"], "tpr": rows}
    at = draw.get("at_first_threshold")
    if at:
        own = ref["own"]
        out["at_reference_threshold"] = {
            "threshold": at["threshold"],
            "tpr": points(own["tpr"], at["tpr"]),
            "fp": at["fp"] - own["fp"],
            "fpr": round(100 * (at["fpr"] - own["fpr"]), 3),
        }
    return out


def verdict(row: dict, tpr_points: float, fpr_points: float) -> dict:
    """Where the draw falls outside the clause: TPR drops beyond `tpr_points`, FPR rises beyond `fpr_points`."""
    short = {rate: v for rate, v in row["tpr"].items() if v < -tpr_points}
    at = row.get("at_reference_threshold")
    if at and at["tpr"] < -tpr_points:
        short["at the reference's threshold"] = at["tpr"]
    over = at is not None and at["fpr"] > fpr_points
    return {"holds": not short and not over, "tpr_short": short, "fpr_over": over, "worst": min(row["tpr"].values(), default=None)}


def summary(rows: list[dict]) -> dict:
    """Per rate: the draws' mean, sample standard deviation and range of the deltas."""
    rates = [r for r in rows[0]["tpr"] if all(r in row["tpr"] for row in rows)]
    out = {}
    for rate in rates:
        vals = [row["tpr"][rate] for row in rows]
        out[rate] = {"mean": round(statistics.fmean(vals), 2), "sd": round(statistics.stdev(vals), 2) if len(vals) > 1 else None,
                     "min": min(vals), "max": max(vals)}  # fmt: skip
    return out


def table(rows: list[dict], title: str, reference: str) -> str:
    rates = list(rows[0]["tpr"])
    head = f"  {'draw':<24}" + "".join(f"{r:>9}" for r in rates) + "   at the reference's threshold: TPR / FP"
    lines = [f"{title}: served TPR minus {reference}'s, in points", head]
    for row in rows:
        at = row.get("at_reference_threshold")
        tail = f"   {at['tpr']:+.2f} / {at['fp']:+d} ({at['fpr']:+.3f} point)" if at else "   (not in the file)"
        cells = "".join(f"{row['tpr'].get(r, float('nan')):>+9.2f}" for r in rates)
        mark = "holds" if row["verdict"]["holds"] else "outside"
        lines.append(f"  {row['label']:<24}{cells}{tail}   {mark}")
    return "\n".join(lines)


def chart(rows: list[dict], title: str, tpr_points: float, path: Path) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    rates = list(rows[0]["tpr"])
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.axhspan(-tpr_points, tpr_points, color="0.9", label=f"within {tpr_points} point")
    ax.axhline(0, color="0.5", linewidth=0.8)
    for row in rows:
        ax.plot(range(len(rates)), [row["tpr"].get(r) for r in rates], marker="o", label=row["label"])
    ax.set_xticks(range(len(rates)), [f"at {r}" if r.endswith("FP") else f"{r} FPR" for r in rates])
    ax.set_ylabel("served TPR minus the default's (points)")
    ax.set_title(f"Retrained bundles against the default, {title}")
    ax.legend(fontsize=8)
    return save(plt, fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--roc", action="append", required=True, metavar="LABEL=FILE",
                    help="a bench/roc.py --served result of the default and one retrained bundle (repeat)")
    ap.add_argument("--title", default="held-out split", help="the split's name, for the table and the chart")
    ap.add_argument("--points", type=float, default=0.5, help="the clause's TPR margin in points (default 0.5)")
    ap.add_argument("--fpr-points", type=float, default=0.05,
                    help="how far the served FPR may rise at the reference's threshold, in points (default 0.05)")
    ap.add_argument("--out", default="bench/results/retrain/spread", help="folder for spread.json and spread.png")
    args = ap.parse_args(argv)
    try:
        draws = []
        for item in args.roc:
            label, sep, path = item.partition("=")
            if not sep or not label or not path:
                raise SpreadError(f"--roc {item!r}: expected LABEL=FILE")
            draws.append(read(label, Path(path)))
        notes = same_reference(draws)
    except SpreadError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    rows = [deltas(d) for d in draws]
    for row in rows:
        row["verdict"] = verdict(row, args.points, args.fpr_points)
    reference = draws[0]["ref"]["bundle"]
    for note in notes:
        print(note)
    print(table(rows, args.title, reference))
    stats = summary(rows)
    print(f"\n  {'per rate':<24}" + "".join(f"{r:>9}" for r in stats))
    for key in ("mean", "sd", "min", "max"):
        form = "9.2f" if key == "sd" else "+9.2f"  # a spread has no sign
        print(f"  {key:<24}" + "".join(format(s[key] if s[key] is not None else float("nan"), form) for s in stats.values()))
    held = sum(r["verdict"]["holds"] for r in rows)
    print(f"\n{held} of {len(rows)} draws within {args.points} point of {reference} at every rate "
          f"(and at most {args.fpr_points} point more served FPR at its threshold, where the file has it)")  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"title": args.title, "reference": reference, "data": draws[0]["ref"]["data"], "points": args.points,
              "fpr_points": args.fpr_points, "draws": rows, "per_rate": stats, "held": held}  # fmt: skip
    (out / "spread.json").write_text(json.dumps(result, indent=2) + "\n")
    png = chart(rows, args.title, args.points, out / "spread.png")
    print(f"results: {out / 'spread.json'}" + (f", {png}" if png else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
