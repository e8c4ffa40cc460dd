"""Measure a ruleset on labelled data: `python -m rules.eval --data FILE.jsonl [--limit N]`.

Input, one of:
  --data FILE      request-shaped JSONL: method, path, query, headers (dict or list of pairs), body (or
                   body_b64 for binary bodies), label, attack_class. A label other than benign/cache/origin/allow counts as an attack.
  --payloads FILE  payload JSONL (../shared/data/payloads*.jsonl, benign_api.jsonl): each value is
                   embedded in a request by its `context` (param → query value, path, header:<Name>,
                   body, url, header lines, raw request, upload, graphql, token).
  --text FILE      free-text JSONL (`text` field, benign_text.jsonl), embedded as a form field and
                   as a JSON string of a POST (`--embed`), both counted as benign requests.
Output (stdout): per-class TPR, overall TPR, FPR, median/p99 evaluation time; a progress line on stderr.
`--show-fn/--show-fp N` print missed attacks / false positives with the rules that fired.
`--against OLD.yaml` also decides every record with another ruleset and counts the decisions that changed,
by label and class (what a change to the rules costs and gains: `git show REV:rules/default.yaml >
rules/old.yaml` puts an earlier version beside its phrase files); `--show-changed N` prints them.
`--decisions FILE` writes one line per record (index, class, blocked); `--against-decisions FILE` counts, as
`--against` does, the decisions that differ from such a file written earlier on the same input, by another
version of the code: what a change to the engine, not to the rules, costs and gains.
`--workers N` decides in N processes (a training split of 316,000 requests takes about 5 minutes on 2, twice that
with --against).
`--read-whole` decides as the gateway's second look does where the model read the whole request (a body over
64 KiB read as its fields: RuleEngine.scan); without it, as the rules decide alone.
`--margins` counts, for each rule, the blocks it decides: the requests that its score alone lifts to the threshold
(without it they would pass), attacks by class and benign requests. A rule that decides many benign blocks and
few attacks is where the false positives can fall; one that decides many attacks is what a change to it costs.
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from typing import Iterator

from engine.features import Features
from rules.embed import from_payload, from_text
from rules.engine import RuleEngine

BENIGN_LABELS = frozenset({"benign", "cache", "origin", "allow"})


def read_jsonl(path: str) -> Iterator[dict]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _features(rec: dict) -> Features:
    """Features.from_record, plus `body_b64` (binary bodies, such as multipart uploads, stored as base64)."""
    if rec.get("body_b64") and not rec.get("body"):
        raw = base64.b64decode(rec["body_b64"])
        f = Features.from_record({**rec, "body": ""})
        return Features.build(f.method, f.path, f.query, f.headers, raw)
    return Features.from_record(rec)


def samples(args: argparse.Namespace) -> Iterator[tuple[Features, bool, str, str]]:
    """(features, is_attack, class, a short description) for every record of the chosen input."""
    if args.data:
        for rec in read_jsonl(args.data):
            attack = str(rec.get("label", "benign")).lower() not in BENIGN_LABELS
            cls = (rec.get("attack_class") or "unknown") if attack else "benign"
            desc = f"{rec.get('method', 'GET')} {rec.get('path', '/')}?{rec.get('query', '')}"
            yield _features(rec), attack, cls, desc
    elif args.payloads:
        for rec in read_jsonl(args.payloads):
            attack = str(rec.get("label", "benign")).lower() not in BENIGN_LABELS
            cls = (rec.get("attack_class") or "unknown") if attack else "benign"
            ctx = rec.get("context", "param")
            yield from_payload(rec["payload"], ctx), attack, cls, f"[{ctx}] {rec['payload']}"
    else:
        for rec in read_jsonl(args.text):
            for how in args.embed.split(","):
                desc = f"[{how} {rec.get('kind', '')}/{rec.get('source', '')}] {rec['text']}"
                yield from_text(rec["text"], how), False, "benign", desc


def _limited(it: Iterator, args: argparse.Namespace) -> list:
    items = list(it)
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(items)
    return items[: args.limit] if args.limit else items


_ENGINES: tuple = ()  # (engine, against or None, read_whole, margins), per process


def _load(rules: str | None, against: str | None, read_whole: bool = False, margins: bool = False) -> None:
    global _ENGINES
    _ENGINES = (RuleEngine.load(rules), RuleEngine.load(against) if against else None, read_whole, margins)


_SCORES: dict[int, dict[str, int]] = {}  # id(engine) → each rule's score, built once per engine


def deciding(engine: RuleEngine, result) -> tuple[str, ...]:
    """The matching rules without which a blocked request would pass: its score less theirs is under the
    threshold. Empty where the score is over the threshold by more than any one rule adds."""
    if not result.blocked:
        return ()
    scores = _SCORES.get(id(engine))
    if scores is None:
        scores = _SCORES[id(engine)] = {r.id: r.score for r in engine.rules}
    return tuple(rid for rid in result.rules if result.score - scores[rid] < result.threshold)


def _decide(item: tuple[Features, bool, bool | None]) -> tuple[bool, bool | None, float, tuple[str, ...], tuple[str, ...]]:
    """(blocked, blocked by the --against ruleset, or as --against-decisions recorded, or None; seconds; the
    rules behind a block that is a false positive or a changed decision; with --margins, the rules that
    decided a block)."""
    features, attack, recorded = item
    engine, against, whole, margins = _ENGINES
    t0 = time.perf_counter()
    blocked = engine.evaluate(features, whole).label == "block"
    seconds = time.perf_counter() - t0
    before = against.evaluate(features, whole).label == "block" if against is not None else recorded
    wanted = blocked and (not attack or (before is not None and not before))
    result = engine.scan(features, whole) if wanted or (blocked and margins) else None
    decided = deciding(engine, result) if margins and result is not None and blocked else ()
    return blocked, before, seconds, result.rules if wanted else (), decided


def _decisions(items: list, args: argparse.Namespace, engine: RuleEngine, against: RuleEngine | None,
               recorded: list[bool] | None) -> Iterator[tuple[bool, bool | None, float, tuple[str, ...], tuple[str, ...]]]:  # fmt: skip
    global _ENGINES
    work = ((f, attack, recorded[i] if recorded else None) for i, (f, attack, *_) in enumerate(items))
    margins = bool(getattr(args, "margins", False))
    if args.workers <= 1:
        _ENGINES = (engine, against, args.read_whole, margins)  # this process's engines; workers load their own
        yield from map(_decide, work)
        return
    with multiprocessing.Pool(args.workers, _load, (args.rules, args.against, args.read_whole, margins)) as pool:
        yield from pool.imap(_decide, work, chunksize=64)


def run(args: argparse.Namespace) -> dict:
    engine = RuleEngine.load(args.rules)  # in this process too: loads fail here first, and _show explains with it
    against = RuleEngine.load(args.against) if args.against else None
    items = _limited(samples(args), args)
    recorded = _recorded(args.against_decisions, items) if args.against_decisions else None
    sink = open(args.decisions, "w", encoding="utf-8") if args.decisions else None
    per_class: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # class → [seen, blocked]
    times: list[float] = []
    fired: Counter = Counter()
    changed: Counter = Counter()
    margins: dict[str, Counter] = defaultdict(Counter)  # rule → {class or "benign": blocks it decided}
    shown = {"fn": 0, "fp": 0, "changed": 0}
    decided = _decisions(items, args, engine, against, recorded)
    for n, ((features, attack, cls, desc), (blocked, before, seconds, rules, deciders)) in enumerate(zip(items, decided), 1):
        for rid in deciders:
            margins[rid][cls] += 1
        if sink is not None:
            sink.write(json.dumps([n - 1, cls, blocked]) + "\n")
        times.append(seconds)
        per_class[cls][0] += 1
        per_class[cls][1] += blocked
        if blocked and not attack:
            fired.update(rules)
        if before is not None and before != blocked:
            changed[(cls, "blocked" if blocked else "passed")] += 1
            if shown["changed"] < args.show_changed:
                shown["changed"] += 1
                print(f"CHANGED {cls} now {'blocked' if blocked else 'passed'} {','.join(rules)} :: {desc[:300]!r}")
        _show(args, engine, shown, features, attack, blocked, desc)
        if n % 2000 == 0 or n == len(items):
            print(f"\r{n}/{len(items)} records", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    if sink is not None:
        sink.close()
    out = _report(per_class, times, fired)
    if getattr(args, "margins", False):
        out["margins"] = margin_table(margins)
    if against is not None or recorded is not None:
        out["against"] = {"rules": against.model if against is not None else f"decisions in {args.against_decisions}",
                          "changed": {f"{c}: now {how}": k for (c, how), k in sorted(changed.items())}}  # fmt: skip
    out["rules"] = engine.model
    return out


def _recorded(path: str, items: list) -> list[bool]:
    """The `blocked` column of a --decisions file, checked against this input record by record."""
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    if len(rows) != len(items) or any(r[0] != i or r[1] != item[2] for i, (r, item) in enumerate(zip(rows, items))):
        raise SystemExit(f"{path}: written for another input ({len(rows)} decisions for {len(items)} records, or in another order)")
    return [bool(r[2]) for r in rows]


def _show(args, engine, shown, features, attack, blocked, desc) -> None:
    kind = "fn" if attack and not blocked else "fp" if blocked and not attack else None
    if kind is None or shown[kind] >= getattr(args, f"show_{kind}"):
        return
    shown[kind] += 1
    r = engine.scan(features, args.read_whole)
    print(f"{kind.upper()} score={r.score} {','.join(r.rules)} :: {desc[:300]!r}")
    if kind == "fp":
        for rid, target, name, value in engine.explain(features, args.read_whole):
            print(f"    {rid} @ {target} {name[:40]!r}: {value[:200]!r}")


def _report(per_class: dict, times: list[float], fired: Counter) -> dict:
    attack_seen = sum(s for c, (s, _) in per_class.items() if c != "benign")
    attack_hit = sum(b for c, (_, b) in per_class.items() if c != "benign")
    benign_seen, benign_hit = per_class.get("benign", [0, 0])
    out = {
        "classes": {c: {"n": s, "blocked": b, "rate": round(b / s, 4) if s else None} for c, (s, b) in sorted(per_class.items())},
        "tpr": round(attack_hit / attack_seen, 4) if attack_seen else None,
        "fpr": round(benign_hit / benign_seen, 4) if benign_seen else None,
        "attacks": attack_seen,
        "benign": benign_seen,
        "median_ms": round(statistics.median(times) * 1000, 3) if times else None,
        "p99_ms": round(sorted(times)[int(len(times) * 0.99) - 1 if len(times) > 1 else 0] * 1000, 3) if times else None,
        "fp_rules": dict(fired.most_common(15)),
    }
    return out


def margin_table(margins: dict[str, Counter]) -> dict:
    """Per rule, the blocks it decided: benign requests, attacks, and attacks by class; most benign first."""
    rows = {rid: {"benign": c["benign"], "attacks": sum(v for k, v in c.items() if k != "benign"),
                  "classes": dict(sorted(((k, v) for k, v in c.items() if k != "benign"), key=lambda kv: -kv[1]))}
            for rid, c in margins.items()}  # fmt: skip
    return dict(sorted(rows.items(), key=lambda kv: (-kv[1]["benign"], -kv[1]["attacks"], kv[0])))


def print_report(out: dict) -> None:
    print(f"{'class':<22}{'n':>8}{'blocked':>9}{'rate':>9}")
    for c, v in out["classes"].items():
        name = c + (" (FPR)" if c == "benign" else "")
        print(f"{name:<22}{v['n']:>8}{v['blocked']:>9}{v['rate']:>9.2%}")
    if out["tpr"] is not None:
        print(f"attack TPR {out['tpr']:.2%} over {out['attacks']} attacks")
    if out["fpr"] is not None:
        print(f"FPR {out['fpr']:.2%} over {out['benign']} benign")
    print(f"evaluate(): median {out['median_ms']} ms, p99 {out['p99_ms']} ms")
    if out["fp_rules"]:
        print("rules behind false positives:", ", ".join(f"{k}={v}" for k, v in out["fp_rules"].items()))
    if out.get("margins"):
        print("blocks each rule decides (without it the request would pass), most benign first:")
        print(f"  {'rule':<34}{'benign':>7}{'attacks':>9}  classes")
        for rid, row in out["margins"].items():
            top = ", ".join(f"{k} {v}" for k, v in list(row["classes"].items())[:3])
            print(f"  {rid:<34}{row['benign']:>7}{row['attacks']:>9}  {top}")
    if "against" in out:
        changes = out["against"]["changed"]
        print(f"decisions that differ from {out['against']['rules']}:", ", ".join(f"{k} {v}" for k, v in changes.items()) or "none")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rules.eval", description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="request-shaped JSONL")
    src.add_argument("--payloads", help="payload JSONL, embedded by context")
    src.add_argument("--text", help="free-text JSONL, embedded as form/JSON values (benign)")
    p.add_argument("--embed", default="form,json", help="for --text: form, json, query (comma-separated)")
    p.add_argument("--rules", default=None, help="ruleset YAML (default: the packaged default.yaml)")
    p.add_argument("--limit", type=int, default=0, help="evaluate at most N records")
    p.add_argument("--shuffle", type=int, default=None, metavar="SEED", help="shuffle before --limit")
    p.add_argument("--show-fn", type=int, default=0, metavar="N", help="print N missed attacks")
    p.add_argument("--show-fp", type=int, default=0, metavar="N", help="print N false positives")
    before = p.add_mutually_exclusive_group()
    before.add_argument("--against", default=None, metavar="YAML", help="another ruleset: count the decisions that differ")
    before.add_argument("--against-decisions", default=None, metavar="FILE",
                        help="a --decisions file of an earlier run on the same input: count the decisions that differ")
    p.add_argument("--show-changed", type=int, default=0, metavar="N", help="with --against or --against-decisions: print N changed decisions")
    p.add_argument("--decisions", default=None, metavar="FILE", help="write each record's decision (index, class, blocked) to FILE")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="decide in N processes")
    p.add_argument("--read-whole", action="store_true", help="as the second look reads a request the model read whole")
    p.add_argument("--margins", action="store_true", help="count, for each rule, the blocks it decides (benign and attacks by class)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    out = run(args)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print_report(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
