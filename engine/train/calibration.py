"""More benign requests to set the block threshold on: the dev split of other builds of the same corpus.

    python -m engine.corpus --data ../shared/data --out work/builds/seed-2 --seed 2 --image-uploads   # and 3, 4, ...
    python -m engine.train.calibration --corpus work/corpus --builds work/builds/seed-* [--seed 1]

writes `corpus/calibration.jsonl` and its record `corpus/calibration.json`, which `python -m engine.train
--calibration` and `python -m engine.train.recalibrate` read.

Why: the dev split holds about 7,800 benign requests, so at a 0.1 % target the model's threshold sits just
above the eighth-highest benign score the rules let through, and a dev split of a user's own traffic may be smaller
still. (On the default's corpus ten builds moved the thresholds of two runs by at most 0.003: bench/RESULTS.md.)

Where the requests come from: `python -m engine.corpus --seed N` renders the same groups (the test groups are
drawn by a fixed salt, not the seed) into other requests. A build's records that the run's dev split takes (its
seed and --dev-split applied to the build's train.jsonl) are held out as the dev split's own are: whole groups
(text sources, fixtures, payload templates) that a run with that seed never trains on, and, for generator
families, requests drawn afresh (a build also samples text files and benign values the corpus did not: groups of the
training side that the run never saw). Kept: benign requests only (the threshold reads benign scores), none of a
generator family the corpus's own train.jsonl lacks (a build with other flags), none identical to a request of that
file (trained on, or in the dev split already), none twice.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Iterable, Iterator

from engine import bundle as bundles
from engine.train.data import progress, read_jsonl

FILE = "calibration.jsonl"
DEV_SHARE = 0.05  # engine.train's dev split


def in_dev(key: str, index: int, seed: int, how: str, share: float = DEV_SHARE) -> bool:
    """Whether the record at `index` with group `key` falls in the dev split of a run with `seed` and `how`
    (engine.train.__main__.split_dev): whole groups, except that `mixed` draws generator families (`gen:…`)
    record by record."""
    if how == "mixed" and key.startswith("gen:"):
        key = f"{key}#{index}"
    h = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2**64 < share


def group_key(rec: dict) -> str:
    return rec.get("group") or json.dumps(rec, sort_keys=True)[:200]


def fingerprint(rec: dict) -> bytes:
    """What makes two records the same request: method, target, headers and body."""
    seen = [rec.get("method"), rec.get("path"), rec.get("query"), rec.get("headers"), rec.get("body"), rec.get("body_b64")]
    return hashlib.blake2b(json.dumps(seen, sort_keys=True).encode(), digest_size=12).digest()


def known(train_path: Path) -> tuple[set[bytes], set[str]]:
    """(fingerprints, groups) of every request of `train_path`: what a calibration request must not repeat, and
    the generator families it must come from (a build with other flags adds families the run never saw, such as
    `--mounts`' folders: no longer the run's traffic). Text files and benign values a build samples that the
    corpus did not are kept: groups of the training side of the fixed split that the run never trained on."""
    prints: set[bytes] = set()
    groups: set[str] = set()
    for rec in read_jsonl(train_path):
        prints.add(fingerprint(rec))
        groups.add(group_key(rec))
    return prints, groups


def held_out_benign(build_train: Path, seed: int, how: str, seen: set[bytes], groups: set[str],
                    counts: dict[str, int]) -> Iterator[dict]:  # fmt: skip
    """The benign records of a build's train.jsonl that a run with `seed` and `how` holds out in its dev split
    (so no group it trains on: in_dev takes whole groups), minus any of a generator family not among `groups` and any
    that repeat a request in `seen` (which grows as records are kept). `counts` tallies what was kept and dropped."""
    for i, rec in enumerate(read_jsonl(build_train)):
        key = group_key(rec)
        if rec.get("label") == "block" or not in_dev(key, i, seed, how):
            continue
        if key.startswith("gen:") and key not in groups:
            counts["generator family not in the corpus"] = counts.get("generator family not in the corpus", 0) + 1
            continue
        fp = fingerprint(rec)
        if fp in seen:
            counts["repeats a request"] = counts.get("repeats a request", 0) + 1
            continue
        seen.add(fp)
        counts["kept"] = counts.get("kept", 0) + 1
        yield rec


def record_path(path: Path) -> Path:
    """Where the record of the calibration file `path` lies: beside it, `.json` for `.jsonl`."""
    return path.with_suffix(".json")


def make(corpus: Path, builds: Iterable[Path], seed: int, how: str, out: Path, log=progress) -> dict:
    """Write `out` (the calibration requests) and its record beside it (record_path); return the record."""
    train_path = corpus / "train.jsonl"
    t0 = time.time()
    seen, groups = known(train_path)
    log(f"  {train_path}: {len(seen):,} distinct requests in {len(groups):,} groups ({time.time() - t0:.0f} s)")
    per_build = []
    tmp = out.with_suffix(".part")
    with open(tmp, "w", encoding="utf-8") as f:
        for build in builds:
            counts: dict[str, int] = {}
            t0 = time.time()
            try:
                for rec in held_out_benign(Path(build) / "train.jsonl", seed, how, seen, groups, counts):
                    f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
            except ValueError as err:
                tmp.unlink()
                raise ValueError(f"{Path(build) / 'train.jsonl'} is not a corpus file: {err}") from err
            build_seed = _build_seed(Path(build))
            per_build.append({"build": str(build), "seed": build_seed, **counts})
            dropped = ", ".join(f"{n:,} dropped: {why}" for why, n in counts.items() if why != "kept") or "none dropped"
            log(f"  {build} (seed {build_seed}): {counts.get('kept', 0):,} held-out benign requests kept, {dropped} "
                f"({time.time() - t0:.0f} s)")  # fmt: skip
    tmp.replace(out)
    record = {
        "train_sha256": bundles.sha256_file(train_path),
        "seed": seed,
        "dev_split": how,
        "requests": sum(b.get("kept", 0) for b in per_build),
        "sha256": bundles.sha256_file(out),
        "builds": per_build,
    }
    record_path(out).write_text(json.dumps(record, indent=2) + "\n", "utf-8")
    return record


def _build_seed(build: Path) -> int | None:
    try:
        return json.loads((build / "summary.json").read_text("utf-8")).get("seed")
    except (OSError, ValueError):
        return None


class CalibrationError(ValueError):
    pass


def load(path: Path, train_sha256: str, seed: int, how: str) -> tuple[list[dict], dict]:
    """The calibration requests at `path` and their record, checked against the run that will read them: made
    from the same train.jsonl for the same seed and dev split (else they may be requests the run trains on)."""
    beside = record_path(path)
    try:
        record = json.loads(beside.read_text("utf-8"))
    except (OSError, ValueError) as err:
        raise CalibrationError(f"{beside}: cannot read the calibration record ({err})") from err
    want = {"train_sha256": train_sha256, "seed": seed, "dev_split": how}
    wrong = [f"{k} {record.get(k)!r}, the run's {v!r}" for k, v in want.items() if record.get(k) != v]
    if wrong:
        raise CalibrationError(f"{path} was made for another run: " + "; ".join(wrong))
    if bundles.sha256_file(path) != record.get("sha256"):
        raise CalibrationError(f"{path} changed after it was made (sha256 differs from {beside})")
    records = list(read_jsonl(path))
    if any(r.get("label") == "block" for r in records):
        raise CalibrationError(f"{path}: calibration requests must be benign")
    return records, record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.train.calibration", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="the corpus the runs train on (its train.jsonl)")
    ap.add_argument("--builds", nargs="+", required=True, help="other builds of the same data (engine.corpus --seed N)")
    ap.add_argument("--seed", type=int, default=1, help="the training runs' --seed (their dev split)")
    ap.add_argument("--dev-split", choices=("groups", "mixed"), default="mixed")
    ap.add_argument("--out", default=None, help=f"default: CORPUS/{FILE}")
    args = ap.parse_args(argv)
    corpus = Path(args.corpus)
    out = Path(args.out) if args.out else corpus / FILE
    for build in args.builds:
        if not (Path(build) / "train.jsonl").is_file():
            print(f"error: {build}/train.jsonl not found", file=sys.stderr)
            return 2
        if Path(build).resolve() == corpus.resolve():
            print(f"error: {build} is the corpus itself", file=sys.stderr)
            return 2
    progress(f"calibration requests for runs with --seed {args.seed} --dev-split {args.dev_split} on {corpus}")
    try:
        record = make(corpus, [Path(b) for b in args.builds], args.seed, args.dev_split, out)
    except (OSError, ValueError) as err:  # a build's unreadable line, a full disk
        print(f"error: {err}", file=sys.stderr)
        return 2
    n = len(record["builds"])
    print(f"{record['requests']:,} benign calibration requests from {n} build{'s' if n > 1 else ''} → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
