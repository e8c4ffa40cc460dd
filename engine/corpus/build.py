"""The corpus build: data → groups and splits → attack, request-log and benign records → evasion set →
shuffled JSONL files and a summary.

    python -m engine.corpus --data ../shared/data --out work/corpus [--seed 1] [--scale 1.0]

The same seed and scale give the same bytes. Held-out groups do not depend on the seed (engine.corpus.split).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Callable, Iterable

from engine.corpus import attacks, benign, csic, evasion, plan, scanners, sources, split, summary
from engine.corpus.io import dumps
from engine.corpus.pools import build_pools
from engine.corpus.rand import Rng

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def split_attacks(recs: list[dict]) -> set[str]:
    """Test groups of the payload records, per class; generated templates held out more sparingly."""
    test: set[str] = set()
    for generated in (False, True):
        part = [r for r in recs if (r["source"] == "generated") == generated]
        for cls, groups in split.by_class(part, lambda r: (r["attack_class"], r["group"])).items():
            test |= split.choose_test(groups, split.GENERATED_FRACTION if generated else split.TEST_FRACTION)
    return test


def attack_records(rng: Rng, pools, name: str, by_cls: dict[str, list[dict]], scale: float, notes: list[str]) -> Iterable[dict]:
    for cls, n in plan.targets(name, scale).items():
        recs = by_cls.get(cls, [])
        if not recs:
            notes.append(f"{name}: no {cls} payloads")
            continue
        picked = plan.schedule(rng.child("schedule", cls), recs, n, plan.MAX_REPEAT if name == "train" else plan.MAX_REPEAT // 2)
        crng = rng.child("embed", cls)
        for rec in picked:
            out = attacks.attack_record(crng.child(), pools, name, rec)
            if out is not None:
                yield out


def build(data_dir: str, out_dir: str, seed: int = 1, scale: float = 1.0, log: Log = _stderr) -> dict:
    t0 = time.time()
    data = sources.load(data_dir)
    log(f"[corpus] {data.notes[-1]} ({time.time() - t0:.1f}s)")
    notes: list[str] = []
    dropped: dict[str, int] = {}
    kept = []
    for rec in data.attacks:
        why = plan.usable(rec)
        if why:
            dropped[why] = dropped.get(why, 0) + 1
        else:
            kept.append(rec)
    notes += [f"dropped {n} payload records: {why}" for why, n in dropped.items()]
    split.assign_groups(kept)
    test_groups = split_attacks(kept)
    by_split: dict[str, dict[str, list[dict]]] = {"train": {}, "test": {}}
    for rec in kept:
        by_split["test" if rec["group"] in test_groups else "train"].setdefault(rec["attack_class"], []).append(rec)
    logs, csic_stats = csic.prepare_csic(data.csic)
    notes.append("CSIC 2010: {normal} normal kept, {attack_kept} anomalous kept with a clear attack indicator, "
                 "{anomalous_dropped} anomalous dropped (no clear indicator)".format(**csic_stats))  # fmt: skip
    apache = csic.prepare_apache(data.apache)
    log_test = csic.split_groups(logs) | csic.split_groups(apache)
    pools = build_pools(data.texts, data.api, data.benign_values)
    probes = scanners.split_entries(data.keywords)
    log(f"[corpus] groups and splits ready ({time.time() - t0:.1f}s)")

    os.makedirs(out_dir, exist_ok=True)
    root = Rng(seed, "corpus")
    counts = {}
    stats = summary.Stats()
    for name in ("train", "test"):
        srng = root.child(name)
        lines: list[str] = []

        def add(recs: Iterable[dict], what: str) -> None:
            t = time.time()
            n0 = len(lines)
            for rec in recs:
                stats.add(rec)
                lines.append(dumps(rec))
            log(f"[corpus] {name}: {len(lines) - n0:7d} {what} ({time.time() - t:.1f}s)")

        add(attack_records(srng.child("attacks"), pools[name], name, by_split[name], scale, notes), "attack records")
        add(scanners.generate(srng.child("scanners"), pools[name], name, probes[name], scale), "scanner probes from the keyword lists")
        mine = lambda recs: _subset(srng, [r for r in recs if (r["group"] in log_test) == (name == "test")], scale)  # noqa: E731
        add(csic.csic_records(srng.child("csic"), pools[name], name, mine(logs)), "CSIC 2010 records")
        add(csic.apache_records(srng.child("apache"), pools[name], name, mine(apache), 1), "access-log records")
        log_probes = [r for r in mine(apache) if r["attack_class"]]
        add(csic.apache_records(srng.child("apache-scan"), pools[name], name, log_probes, plan.APACHE_SCANNER_REPEAT - 1), "extra access-log scanner copies")
        add(benign.generate(srng.child("benign"), pools[name], name, scale), "benign records")
        counts[name] = _write(os.path.join(out_dir, f"{name}.jsonl"), lines, srng.child("shuffle"))
    ev = evasion.generate(root.child("evasion"), pools["test"], by_split["test"], max(1, round(plan.EVASION_TOTAL * scale)))
    lines = []
    for rec in ev:
        stats.add(rec)
        lines.append(dumps(rec))
    counts["evasion"] = _write(os.path.join(out_dir, "evasion.jsonl"), lines, root.child("shuffle-evasion"))
    log(f"[corpus] evasion: {counts['evasion']} records")
    result = stats.finish(seed=seed, scale=scale, seconds=time.time() - t0, notes=data.notes + notes, counts=counts)
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)
    return result


def _subset(rng: Rng, recs: list[dict], scale: float) -> list[dict]:
    """The request logs are used whole at scale >= 1; a smaller build takes a fixed random part."""
    if scale >= 1.0:
        return recs
    keep = sorted(rng.child("subset", len(recs)).sample(range(len(recs)), max(1, round(len(recs) * scale))))
    return [recs[i] for i in keep]


def _write(path: str, lines: list[str], rng: Rng) -> int:
    rng.shuffle(lines)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")
    os.replace(tmp, path)
    return len(lines)
