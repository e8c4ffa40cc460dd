"""Corpus statistics: counts per split, label, attack class, source and generator, and the length of the
canonical text (what the model reads) on a fixed sample, printed as a readable table and saved as JSON."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from engine.canonical import canonical_text
from engine.corpus.io import record_features

SAMPLE_EVERY = 50  # canonicalising every record would double the build time; every 50th is plenty
ONE_SIDED_MIN = 100  # a first path segment this common in training, on one side only, is a cue a model can learn
PCTS = (1, 5, 25, 50, 75, 95, 99, 100)


class Stats:
    def __init__(self) -> None:
        self.n: Counter = Counter()
        self.by: dict[str, Counter] = defaultdict(Counter)
        self.lengths: dict[str, list[int]] = defaultdict(list)
        self.folders: dict[str, Counter] = defaultdict(Counter)  # training split: first path segment -> attack/benign

    def add(self, rec: dict[str, Any]) -> None:
        s = rec["split"]
        self.n[s] += 1
        attack = rec["label"] == "block"
        self.by["label"][(s, rec["label"])] += 1
        self.by["class"][(s, rec["attack_class"] or "-")] += 1
        self.by["source"][(s, rec["source"])] += 1
        self.by["gen"][(s, rec["gen"].split("/")[0] + ("/" + rec["gen"].split("/")[1] if rec["gen"].startswith(("attack/", "evasion/")) else ""))] += 1
        self.by["kind"][(s, "attack" if attack else "benign")] += 1
        path = rec["path"]
        if s == "train" and path.count("/") >= 2:
            self.folders[path.split("/")[1].lower()[:40]]["attack" if attack else "benign"] += 1
        if self.n[s] % SAMPLE_EVERY == 0:
            n = len(canonical_text(record_features(rec)))
            self.lengths[f"{s}/{'attack' if attack else 'benign'}"].append(n)

    def finish(self, **extra: Any) -> dict[str, Any]:
        out: dict[str, Any] = dict(extra)  # no build time here: the same seed must give the same bytes
        for name, counter in self.by.items():
            table: dict[str, dict[str, int]] = defaultdict(dict)
            for (split, key), n in sorted(counter.items(), key=lambda kv: (kv[0][1], kv[0][0])):
                table[key][split] = n
            out[name] = dict(table)
        out["canonical_chars"] = {k: percentiles(v) for k, v in sorted(self.lengths.items())}
        out["one_sided_folders"] = one_sided(self.folders)
        return out


def one_sided(folders: dict[str, Counter], least: int = ONE_SIDED_MIN) -> dict[str, dict[str, int]]:
    """First path segments of the training split with at least `least` requests, all attacks or all benign:
    the folder alone tells the label there (MODEL-NOTES: never let a path identify a label), most common first."""
    rows = [(k, c) for k, c in folders.items() if sum(c.values()) >= least and (not c["attack"] or not c["benign"])]
    rows.sort(key=lambda kc: (-sum(kc[1].values()), kc[0]))
    return {k: {"attack": c["attack"], "benign": c["benign"]} for k, c in rows}


def percentiles(values: list[int]) -> dict[str, int]:
    if not values:
        return {}
    v = sorted(values)
    return {f"p{p}": v[min(len(v) - 1, max(0, round(p / 100 * len(v)) - 1))] for p in PCTS} | {"n": len(v)}


def _rows(title: str, table: dict[str, dict[str, int]], splits: tuple[str, ...], limit: int = 60) -> list[str]:
    lines = [f"\n{title}", f"  {'':34s}" + "".join(f"{s:>10s}" for s in splits)]
    keys = sorted(table, key=lambda k: -sum(table[k].values()))
    for k in keys[:limit]:
        lines.append(f"  {str(k)[:34]:34s}" + "".join(f"{table[k].get(s, 0):>10d}" for s in splits))
    if len(keys) > limit:
        lines.append(f"  ... {len(keys) - limit} more")
    return lines


def table(result: dict[str, Any], seconds: float | None = None) -> str:
    splits = ("train", "test", "evasion")
    lines = [f"corpus: seed {result['seed']}, scale {result['scale']}; records " + ", ".join(f"{s} {result['counts'].get(s, 0)}" for s in splits)]
    for name, title in (("kind", "attack / benign"), ("label", "labels"), ("class", "attack classes"), ("source", "sources"), ("gen", "generators")):
        lines += _rows(title, {k[1] if isinstance(k, tuple) else k: v for k, v in result[name].items()}, splits)
    lines.append("\ncanonical text length in characters (every 50th record)")
    lines.append("  " + f"{'':16s}" + "".join(f"{k:>9s}" for k in ("n",) + tuple(f"p{p}" for p in PCTS)))
    for k, v in result["canonical_chars"].items():
        lines.append(f"  {k:16s}" + "".join(f"{v.get(c, 0):>9d}" for c in ("n",) + tuple(f"p{p}" for p in PCTS)))
    one = result.get("one_sided_folders", {})
    attack_only = [f"/{k}/ {v['attack']}" for k, v in one.items() if not v["benign"]]
    if attack_only:
        lines.append(f"\nfirst path segments only attacks use in training ({ONE_SIDED_MIN}+ requests; a folder alone tells the label): "
                     + ", ".join(attack_only[:20]) + (f", ... {len(attack_only) - 20} more" if len(attack_only) > 20 else ""))
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    if seconds is not None:
        lines.append(f"build time: {seconds:.1f} s")
    return "\n".join(lines)
