"""Evaluate a bundle on request-shaped JSONL: `python -m engine.eval --bundle PATH --data FILE.jsonl`.

Reads the corpus schema (label block/cache/origin/allow) or the schema of ../shared/data/requests_*.jsonl
(label attack/benign; benign records get their routing label from the labelling policy). Prints a table
and, with --json, the figures as JSON: attack TPR overall and per class, benign FPR, balanced accuracy,
routing accuracy, the 4-label confusion matrix, feature-tag precision/recall, and model latency
percentiles for single requests on one thread. `--family F` keeps the records the corpus generator made in
family F (a run of segments of their `gen`) and adds per-family rows. With --rules, the decisions are the gateway's default
ones (`rules.ensemble`): the default ruleset reads every request the model let through, and a rules block
stands (a model block of a page asset as a mere probe is the rules' to decide), and what the model lets through
is routed as `model.routing` says (`--routing`; a bundle recording `routing: policy` is routed by the written
policy, so its served routing errs only where a benign request is blocked); the model's own figures, its routing
head's included, are kept under "model". `--ruleset FILE` (repeatable) serves with that ruleset
instead, or beside the default: the first ruleset named gives the served figures, and each other one is read on the
same model verdicts (one model pass), its served figures and the decisions that differ listed under "rulesets".
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

import numpy as np

from engine import bundle as bundles
from engine.features import Features
from engine.labels import by_policy
from engine.labels import label as policy_label
from engine.model import Encoded, Model
from engine.verdict import LABELS


def in_family(rec: dict, family: str) -> bool:
    """Whether the generator made `rec` in `family`: a run of whole segments of its `gen`, so `page_save` holds
    benign page saves (`page_save/joomla`) and payloads carried in one (`form/page_save/joomla`)."""
    return f"/{family.strip('/')}/" in f"/{rec.get('gen') or ''}/"


def read_records(path: str | Path, limit: int | None = None, families: Iterable[str] = ()) -> list[dict]:
    """The records of a JSONL file; with `families`, only those the generator made in one of them."""
    families, out = tuple(families), []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                if families and not any(in_family(rec, fam) for fam in families):
                    continue
                out.append(rec)
                if limit and len(out) >= limit:
                    break
    return out


def family_figures(records: list[dict], feats: list[Features], verdicts, families: Iterable[str]) -> dict:
    """Per family: benign requests, how many were blocked and how many routed as the policy says; attacks
    and how many were blocked."""
    out = {}
    for fam in families:
        row = {"benign": 0, "blocked": 0, "routed": 0, "attacks": 0, "caught": 0}
        for r, f, v in zip(records, feats, verdicts):
            if not in_family(r, fam):
                continue
            t = truth(r, f)
            if t == "block":
                row["attacks"] += 1
                row["caught"] += v.label == "block"
            else:
                row["benign"] += 1
                row["blocked"] += v.label == "block"
                row["routed"] += v.label == t
        out[fam] = row
    return out


def features_of(rec: dict) -> Features:
    body = base64.b64decode(rec["body_b64"]) if rec.get("body_b64") else rec.get("body") or ""
    return Features.build(rec.get("method") or "GET", rec.get("path") or "/", rec.get("query") or "",
                          rec.get("headers") or (), body)  # fmt: skip


def truth(rec: dict, f: Features) -> str:
    lab = rec.get("label")
    if lab in LABELS:
        return lab
    if lab == "benign":
        return policy_label(f)[0]
    return "block"


def predict(model: Model, feats: list[Features], batch_tokens: int = 32768, progress=None):
    encs: list[Encoded] = []
    for i, f in enumerate(feats):
        encs.append(model.encode(f))
        if progress and i % 5000 == 0:
            progress(f"  encoded {i:,}/{len(feats):,}")
    order = sorted(range(len(encs)), key=lambda i: encs[i].length)
    probs = np.zeros((len(encs), len(model.bundle.labels)), dtype=np.float32)
    fprobs = np.zeros((len(encs), len(model.bundle.features)), dtype=np.float32)
    i = 0
    while i < len(order):
        j = i + 1
        while j < len(order) and j - i < 256 and model.padded_length(encs[order[j]].length) * (j - i + 1) <= batch_tokens:
            j += 1
        idx = order[i:j]
        p, fp = model.run_settled([encs[k] for k in idx])  # as the gateway's batcher runs it
        probs[idx], fprobs[idx] = p, fp
        i = j
    verdicts = [model.verdict(probs[k], fprobs[k], encs[k].truncated) for k in range(len(encs))]
    return verdicts, probs, [e.length for e in encs]


def metrics(records: list[dict], feats: list[Features], verdicts) -> dict:
    y = [truth(r, f) for r, f in zip(records, feats)]
    pred = [v.label for v in verdicts]
    attack = [t == "block" for t in y]
    n_att, n_ben = sum(attack), len(attack) - sum(attack)
    tp = sum(1 for a, p in zip(attack, pred) if a and p == "block")
    fp = sum(1 for a, p in zip(attack, pred) if not a and p == "block")
    per_class: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r, a, p in zip(records, attack, pred):
        if a:
            c = r.get("attack_class") or "unknown"
            per_class[c][0] += p == "block"
            per_class[c][1] += 1
    routed = [(t, p) for t, p in zip(y, pred) if t != "block"]
    confusion = {t: {p: 0 for p in LABELS} for t in LABELS}
    for t, p in zip(y, pred):
        confusion[t][p] += 1
    tags = Counter()
    for r, v in zip(records, verdicts):
        want, got = set(r.get("features") or ()), set(v.features)
        if not r.get("features") and r.get("label") in LABELS:
            continue
        for t in got | want:
            tags[(t, "tp" if t in want and t in got else "fp" if t in got else "fn")] += 1
    tag_pr = {}
    for t in sorted({t for t, _ in tags}):
        tp_, fp_, fn_ = tags[(t, "tp")], tags[(t, "fp")], tags[(t, "fn")]
        tag_pr[t] = {"precision": round(tp_ / max(1, tp_ + fp_), 4), "recall": round(tp_ / max(1, tp_ + fn_), 4), "support": tp_ + fn_}
    tpr = tp / max(1, n_att)
    fpr = fp / max(1, n_ben)
    return {
        "records": len(records),
        "attacks": n_att,
        "benign": n_ben,
        "tpr": round(tpr, 5),
        "fpr": round(fpr, 5),
        "balanced_accuracy": round((tpr + 1 - fpr) / 2, 5) if n_att and n_ben else None,
        "routing_accuracy": round(sum(t == p for t, p in routed) / max(1, len(routed)), 5) if routed else None,
        "per_class": {c: {"tpr": round(k / n, 4), "n": n} for c, (k, n) in sorted(per_class.items())},
        "confusion": confusion,
        "features": tag_pr,
    }


def latency(model: Model, feats: list[Features], n: int = 300) -> dict:
    """Single-request model time (encode + run), the way the gateway calls it one at a time."""
    sample = feats[:: max(1, len(feats) // n)][:n]
    times, toks = [], []
    for f in sample:
        t = time.perf_counter()
        enc = model.encode(f)
        model.run([enc])
        times.append((time.perf_counter() - t) * 1000)
        toks.append(enc.length)
    q = np.percentile(times, [50, 90, 99]) if times else [0, 0, 0]
    return {"p50_ms": round(q[0], 3), "p90_ms": round(q[1], 3), "p99_ms": round(q[2], 3),
            "median_tokens": int(np.median(toks)) if toks else 0, "n": len(times)}  # fmt: skip


def with_rules(verdicts: list, feats: list[Features], rules=None) -> list:
    """The gateway's ensemble (engine/decide.py, `RuleEngine.second_look`) over a batch of model verdicts."""
    if rules is None:
        from rules import RuleEngine

        rules = RuleEngine.load()
    return [rules.second_look(v, f) for v, f in zip(verdicts, feats)]


def load_rulesets(rules: bool, rulesets: Iterable[str | Path]) -> list:
    """The rule engines to serve with, in order: the default one when `rules`, then each ruleset file."""
    from rules import RuleEngine

    return ([RuleEngine.load()] if rules else []) + [RuleEngine.load(p) for p in rulesets]


def compared(records: list[dict], feats: list[Features], verdicts: list, served: list, engine, path) -> dict:
    """The served figures under another ruleset, and the decisions that differ from the first ruleset's
    (`served`): attacks and benign requests it blocks that the first let through, and the other way round."""
    out = {"rules": engine.model, "file": str(path) if path else None}
    other = with_rules(verdicts, feats, engine)
    figs = metrics(records, feats, other)
    out.update({k: figs[k] for k in ("tpr", "fpr", "balanced_accuracy", "routing_accuracy", "per_class")})
    diff = Counter()
    for r, f, a, b in zip(records, feats, served, other):
        if a.blocked != b.blocked:
            side = "attacks" if truth(r, f) == "block" else "benign"
            diff[f"{side}_{'blocked' if b.blocked else 'let_through'}"] += 1
    out["differs"] = {k: diff[k] for k in ("attacks_blocked", "attacks_let_through", "benign_blocked",
                                           "benign_let_through")}  # fmt: skip
    return out


def evaluate(bundle_path, data: str | Path, limit: int | None = None, threads: int = 1, progress=None,
             rules: bool = False, families: Iterable[str] = (), rulesets: Iterable[str | Path] = (),
             routing: str = "auto") -> dict:  # fmt: skip
    """The figures of one bundle on one file. `families`: only the records the generator made in them
    (in_family), with a row of figures per family under "families". `rules` serves with the default ruleset,
    `rulesets` with these files (after the default one, when both are given): the first gives the served
    figures, the others are compared with it on the same model verdicts. Served, what the model lets through
    is routed as `model.routing` says (`routing`: auto, policy or model); the model's own figures are its
    routing head's."""
    families, rulesets = tuple(families), list(rulesets)
    engines = load_rulesets(rules, rulesets)  # before the model pass: a broken ruleset fails at once
    files = ([None] if rules else []) + rulesets
    model = Model(bundles.load(bundle_path, allow_rejected=True), threads=threads)  # reading one is fine
    records = read_records(data, limit, families)
    if not records:
        raise ValueError(f"{data}: no records" + (f" in the families {', '.join(families)}" if families else ""))
    feats = [features_of(r) for r in records]
    t0 = time.time()
    verdicts, _, lengths = predict(model, feats, progress=progress)
    alone, model_verdicts = None, verdicts
    routed = bundles.routing_of(routing, model.bundle)
    if engines:
        alone = metrics(records, feats, verdicts)
        if families:
            alone["families"] = family_figures(records, feats, verdicts, families)
        if routed == "policy":
            verdicts = model_verdicts = [by_policy(v, f) for v, f in zip(verdicts, feats)]
        verdicts = with_rules(verdicts, feats, engines[0])
    out = metrics(records, feats, verdicts)
    if families:
        out["families"] = family_figures(records, feats, verdicts, families)
    if alone is not None:
        out["decided_by"] = f"model + {'default rules' if files[0] is None else files[0]} (the gateway's ensemble)"
        out["rules"] = engines[0].model  # served figures depend on the ruleset's version too
        out["routing"] = routed
        keep = ("tpr", "fpr", "balanced_accuracy", "routing_accuracy", "per_class") + (("families",) if families else ())
        out["model"] = {k: alone[k] for k in keep}
        if len(engines) > 1:
            out["rulesets"] = [compared(records, feats, model_verdicts, verdicts, e, p)
                               for e, p in zip(engines[1:], files[1:])]  # fmt: skip
    out["seconds"] = round(time.time() - t0, 1)
    out["tokens_p50"] = int(np.median(lengths)) if lengths else 0
    out["latency"] = latency(model, feats)
    out["bundle"] = model.id
    out["data"] = str(data)
    return out


def table(res: dict) -> str:
    lines = [
        f"bundle {res['bundle']}{' + rules' if res.get('model') else ''} on {res['data']}: {res['records']:,} records ({res['attacks']:,} attacks, {res['benign']:,} benign)",
        f"  attack TPR {100 * res['tpr']:.2f} %   benign FPR {100 * res['fpr']:.3f} %   "
        f"balanced accuracy {100 * (res['balanced_accuracy'] or 0):.2f} %   routing accuracy "
        f"{100 * (res['routing_accuracy'] or 0):.2f} %",
        f"  latency p50 {res['latency']['p50_ms']} ms  p99 {res['latency']['p99_ms']} ms "
        f"(median {res['latency']['median_tokens']} tokens)",
        "  per class:",
    ]
    if alone := res.get("model"):
        lines.insert(2, f"  model alone: attack TPR {100 * alone['tpr']:.2f} %   benign FPR {100 * alone['fpr']:.3f} %")
        lines.insert(3, f"  served with {res['rules']}")
    for i, o in enumerate(res.get("rulesets", ())):
        d = o["differs"]
        lines.insert(4 + i, f"  served with {o['rules']} instead: attack TPR {100 * o['tpr']:.2f} %   benign FPR "
                            f"{100 * o['fpr']:.3f} %   routing {100 * (o['routing_accuracy'] or 0):.2f} %   differs: attacks "
                            f"+{d['attacks_blocked']} -{d['attacks_let_through']}, benign blocked +{d['benign_blocked']} "
                            f"-{d['benign_let_through']}")  # fmt: skip
    for fam, row in res.get("families", {}).items():
        lines.insert(len(lines) - 1, f"  {fam}: benign {row['blocked']} of {row['benign']} blocked, {row['routed']} routed as the policy says; "
                     f"attacks {row['caught']} of {row['attacks']} blocked")
    for c, v in res["per_class"].items():
        also = f"  (model alone {100 * alone['per_class'][c]['tpr']:6.2f} %)" if alone else ""
        lines.append(f"    {c:<22} {100 * v['tpr']:6.2f} %  n={v['n']}{also}")
    lines.append("  confusion (rows truth, columns decision): " + " ".join(f"{p:>7}" for p in LABELS))
    for t in LABELS:
        lines.append(f"    {t:<8}" + " ".join(f"{res['confusion'][t][p]:>7}" for p in LABELS))
    return "\n".join(lines)


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.eval", description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default=None, help="bundle folder (default: the packaged default bundle)")
    ap.add_argument("--data", required=True, action="append", help="request-shaped JSONL (repeatable)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--rules", action="store_true", help="decide as the gateway does: the model, then the rules")
    ap.add_argument("--ruleset", action="append", default=[], metavar="FILE",
                    help="serve with this ruleset YAML (after the default one with --rules); each ruleset past the "
                         "first is compared with it on the same model verdicts (repeatable)")
    ap.add_argument("--routing", choices=("auto", "policy", "model"), default="auto",
                    help="with --rules: who routes what the model lets through, as the gateway's model.routing (auto: "
                         "what the bundle records)")
    ap.add_argument("--family", action="append", default=[],
                    help="only the records the corpus generator made in this family (a run of segments of their `gen`: "
                         "page_save, asset/typo3, text_post), with figures per family (repeatable)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    results = []
    for data in args.data:
        res = evaluate(args.bundle, data, args.limit, args.threads, progress=lambda m: print(m, file=sys.stderr),
                       rules=args.rules, families=args.family, rulesets=args.ruleset, routing=args.routing)  # fmt: skip
        results.append(res)
        if not args.json:
            print(table(res))
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
