"""Accuracy benchmark: the decision model against nginx + ModSecurity v3 + OWASP CRS (paranoia level 1).

    python bench/accuracy.py [--data work/corpus/test.jsonl] [--limit 5000] [--bundle DIR] [--seed 1]

Takes a held-out request corpus (JSONL, the corpus schema: method, path, query, headers, body or body_b64,
label, attack_class), samples `--limit` records (seeded, file order kept), and decides each one three times:

    model   engine.eval's predict() and metrics() on the sample: what `python -m engine.eval --data` reports
    gateway the model, then the default rules on what it let through (a rules block stands): the gateway's
            default decision (`rules.ensemble`), what `python -m engine.eval --rules` reports
    modsec  the request sent as-is to nginx + ModSecurity + CRS PL1 (SecRuleEngine On) with an nginx
            `return 200` origin behind it: 403 is a block

Requests are sent faithfully over a raw socket: method, target, headers and body as recorded, the target
never normalised (`..`, `%2e`, doubled slashes reach the server as written). Only what cannot be put on
the wire at all is changed, and counted: spaces, control characters and non-ASCII bytes in the target are
percent-encoded, CR/LF inside a header value become spaces, Content-Length is recomputed, and a request
without a Host header gets `Host: localhost`.

Prints attack TPR overall and per attack class, benign FPR and balanced accuracy side by side, and which
attacks each one alone catches; writes results JSON. Debian: nginx, libnginx-mod-http-modsecurity,
modsecurity-crs.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from servers import Processes, git_commit, log, require, versions  # noqa: E402

DROP_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "expect",
                "upgrade", "te", "trailer"}  # fmt: skip


def sample(path: Path, limit: int | None, seed: int) -> tuple[list[dict], int]:
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    total = len(lines)
    if limit and limit < total:
        keep = sorted(random.Random(seed).sample(range(total), limit))
        lines = [lines[i] for i in keep]
    return [json.loads(line) for line in lines], total


def _escape_target(target: str) -> tuple[bytes, bool]:
    """The target as sent: untouched, except bytes that cannot appear in a request line at all."""
    out, changed = bytearray(), False
    for b in target.encode("utf-8", "surrogatepass"):
        if b <= 0x20 or b >= 0x7F:
            out += b"%%%02X" % b
            changed = True
        else:
            out.append(b)
    return bytes(out), changed


def _header_bytes(value: str) -> tuple[bytes, bool]:
    clean = value.replace("\r", " ").replace("\n", " ")
    try:
        raw = clean.encode("latin-1")
    except UnicodeEncodeError:
        raw = clean.encode("utf-8", "surrogatepass")
    return raw, clean != value


def raw_request(rec: dict) -> tuple[bytes, list[str]]:
    """The request bytes for one record, and what had to be changed to send it at all."""
    changes = []
    method = (rec.get("method") or "GET").upper()
    path = rec.get("path") or "/"
    query = rec.get("query") or ""
    target, escaped = _escape_target(path + ("?" + query if query else ""))
    if escaped:
        changes.append("target_escaped")
    body = (
        base64.b64decode(rec["body_b64"])
        if rec.get("body_b64")
        else (rec.get("body") or "").encode("utf-8", "surrogatepass")
    )
    lines = [method.encode("latin-1", "replace") + b" " + target + b" HTTP/1.1"]
    headers = rec.get("headers") or []
    if isinstance(headers, dict):
        headers = list(headers.items())
    has_host = False
    for name, value in headers:
        if name.lower() in DROP_HEADERS:
            continue
        has_host |= name.lower() == "host"
        raw, changed = _header_bytes(str(value))
        if changed:
            changes.append("header_crlf")
        lines.append(name.strip().encode("latin-1", "replace") + b": " + raw)
    if not has_host:
        lines.append(b"Host: localhost")
        changes.append("host_added")
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(b"Content-Length: %d" % len(body))
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body, changes


def send(port: int, data: bytes, timeout: float = 15.0) -> int:
    """Status code of the answer (0: no answer: reset or timeout)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(data)
            buf = b""
            while b"\r\n" not in buf and len(buf) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
    except OSError:
        return 0
    parts = buf.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def audit_entries(text: str) -> list[set[str]]:
    """The rule ids behind each audit-log entry (a 4xx/5xx answer), the scoring rules (949xxx, 980xxx) left out."""
    entries = []
    for entry in re.split(r"^---\w+---A--$", text, flags=re.M)[1:]:
        ids = set(re.findall(r'\[id "(\d+)"\]', entry))
        entries.append({i for i in ids if not i.startswith(("949", "959", "980"))})
    return entries


def run_modsec(records: list[dict], attack: list[bool], concurrency: int) -> tuple[list[int], Counter, dict]:
    """Benign records first, then attacks, so the audit log says which rules fired on which side."""
    require("nginx")
    changes: Counter = Counter()
    prepared = []
    for rec in records:
        data, ch = raw_request(rec)
        changes.update(set(ch))
        prepared.append(data)
    statuses = [0] * len(records)
    rules: dict[str, list[set[str]]] = {}
    with Processes() as procs:
        origin = procs.origin()
        waf = procs.nginx_proxy(origin, modsecurity=True)
        audit = procs.tmp / "modsecurity" / "audit.log"
        log(f"  nginx + ModSecurity + CRS PL1 on {waf.url}, origin {origin.url}; {concurrency} connections at a time")
        t0, done, seen = time.monotonic(), 0, 0
        with ThreadPoolExecutor(concurrency) as pool:
            for side in ("benign", "attack"):
                idx = [i for i, a in enumerate(attack) if a == (side == "attack")]
                for i, status in zip(idx, pool.map(lambda i: send(waf.port, prepared[i]), idx)):
                    statuses[i] = status
                    done += 1
                    if done % 500 == 0 or done == len(prepared):
                        log(f"  modsec: {done:,}/{len(prepared):,} sent ({done / (time.monotonic() - t0):,.0f}/s)")
                time.sleep(0.2)  # let the last audit entries reach the file
                text = audit.read_text(errors="replace")
                rules[side] = audit_entries(text[seen:])
                seen = len(text)
    return statuses, changes, rules


def run_model(records: list[dict], bundle: str | None, threads: int) -> tuple[dict, list[str], dict]:
    from engine import bundle as bundles
    from engine.eval import features_of, latency, metrics, predict, with_rules
    from engine.model import Model

    model = Model(bundles.load(bundle), threads=threads)
    log(f"  model {model.id}: deciding {len(records):,} records")
    feats = [features_of(r) for r in records]
    t0 = time.monotonic()
    verdicts, _, lengths = predict(model, feats, progress=log)
    res = metrics(records, feats, verdicts)
    res["seconds"] = round(time.monotonic() - t0, 1)
    res["latency"] = latency(model, feats)
    res["bundle"] = model.id
    t0 = time.monotonic()
    served = with_rules(verdicts, feats)
    gw = metrics(records, feats, served)
    gw["rules_seconds"] = round(time.monotonic() - t0, 1)
    return res, [v.label for v in verdicts], gw


def modsec_metrics(records: list[dict], statuses: list[int], blocked: set[int]) -> dict:
    from engine.eval import features_of, metrics

    feats = [features_of(r) for r in records]
    verdicts = [SimpleNamespace(label="block" if s in blocked else "allow", features=()) for s in statuses]
    res = metrics(records, feats, verdicts)
    for k in ("routing_accuracy", "confusion", "features"):  # a WAF has no routing labels or feature tags
        res.pop(k, None)
    return res


def rule_stats(rules: dict[str, list[set[str]]]) -> dict:
    """How many blocked benign requests (false positives) and blocked attacks each CRS rule took part in."""
    fp = Counter(i for ids in rules.get("benign", []) for i in ids)
    tp = Counter(i for ids in rules.get("attack", []) for i in ids)
    return {"false_positive_rules": dict(fp.most_common(10)), "true_positive_rules": dict(tp.most_common(10))}


def overlap(records: list[dict], model_labels: list[str], statuses: list[int]) -> dict:
    from engine.eval import features_of, truth

    out = Counter()
    for rec, m, s in zip(records, model_labels, statuses):
        if truth(rec, features_of(rec)) != "block":
            continue
        mb, wb = m == "block", s == 403
        out["both" if mb and wb else "model_only" if mb else "modsec_only" if wb else "neither"] += 1
    return dict(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT / "work" / "corpus" / "test.jsonl"), help="held-out corpus JSONL")
    ap.add_argument("--limit", type=int, default=5000, help="records to sample (seeded; 0: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bundle", default=None, help="model bundle folder (default: the packaged default)")
    ap.add_argument("--threads", type=int, default=1, help="ONNX Runtime threads for the model")
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight to ModSecurity")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args(argv)
    data = Path(args.data)
    if not data.is_file():
        raise SystemExit(
            f"{data}: not found (build it with `python -m engine.corpus --out work/corpus`, or pass --data)"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    commit = git_commit()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "engine"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip())  # fmt: skip
    records, total = sample(data, args.limit or None, args.seed)
    log(f"{data}: {len(records):,} of {total:,} records (seed {args.seed}); {os.cpu_count()} cores, shared")

    model, model_labels, gateway = run_model(records, args.bundle, args.threads)
    from engine.eval import features_of, truth

    attack = [truth(r, features_of(r)) == "block" for r in records]
    statuses, changes, rules = run_modsec(records, attack, args.concurrency)
    waf = modsec_metrics(records, statuses, {403})
    waf_4xx = modsec_metrics(records, statuses, {400, 403})
    result = {
        "data": str(data.relative_to(ROOT) if data.is_relative_to(ROOT) else data),
        "data_sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "records": len(records), "records_in_file": total, "seed": args.seed,
        "machine": {"cores": os.cpu_count(), "shared": True},
        "code": {"commit": commit, "uncommitted_changes_in_engine": dirty},
        "versions": versions(),
        "model": model,
        "gateway": {k: gateway[k] for k in ("tpr", "fpr", "balanced_accuracy", "routing_accuracy", "per_class", "rules_seconds")},
        "modsec": {**waf, "config": "nginx + ModSecurity v3 + OWASP CRS, paranoia level 1, SecRuleEngine On, "
                   "anomaly threshold 5 (defaults); blocked = 403", "statuses": dict(Counter(map(str, statuses)))},
        "modsec_403_or_400": {k: waf_4xx[k] for k in ("tpr", "fpr", "balanced_accuracy")},
        "modsec_rules": rule_stats(rules),
        "attacks_caught": overlap(records, model_labels, statuses),
        "sent_changes": dict(changes),
    }  # fmt: skip
    (out / "accuracy.json").write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    log(f"wrote {out / 'accuracy.json'}")
    return 0


def table(res: dict) -> str:
    m, w = res["model"], res["modsec"]
    g = res.get("gateway") or {"per_class": {}}

    def pct(x):
        return f"{100 * x:.2f} %" if x is not None else "–"

    lines = [f"{res['data']}: {res['records']:,} records sampled of {res['records_in_file']:,} "
             f"({m['attacks']:,} attacks, {m['benign']:,} benign); {res['machine']['cores']} shared cores", "",
             f"| | model {m['bundle']} | clef-gateway (model + rules) | nginx + ModSecurity + CRS PL1 |",
             "|---|---|---|---|",
             f"| attack TPR | {pct(m['tpr'])} | {pct(g.get('tpr'))} | {pct(w['tpr'])} |",
             f"| benign FPR | {pct(m['fpr'])} | {pct(g.get('fpr'))} | {pct(w['fpr'])} |",
             f"| balanced accuracy | {pct(m['balanced_accuracy'])} | {pct(g.get('balanced_accuracy'))} | "
             f"{pct(w['balanced_accuracy'])} |"]  # fmt: skip
    for c in sorted(
        set(m["per_class"]) | set(w["per_class"]), key=lambda c: (-m["per_class"].get(c, {}).get("n", 0), c)
    ):
        mc, wc, gc = m["per_class"].get(c, {}), w["per_class"].get(c, {}), g["per_class"].get(c, {})
        lines.append(f"| TPR {c} (n={mc.get('n', wc.get('n', 0))}) | {pct(mc.get('tpr'))} | {pct(gc.get('tpr'))} | "
                     f"{pct(wc.get('tpr'))} |")  # fmt: skip
    o = res["attacks_caught"]
    lines += ["", f"attacks caught by both {o.get('both', 0):,}, by the model only {o.get('model_only', 0):,}, "
              f"by ModSecurity only {o.get('modsec_only', 0):,}, by neither {o.get('neither', 0):,}",
              f"ModSecurity answers: {w['statuses']}; counting 400 as a block too: TPR "
              f"{pct(res['modsec_403_or_400']['tpr'])}, FPR {pct(res['modsec_403_or_400']['fpr'])}",
              f"changed to be sendable: {res['sent_changes'] or 'none'}"]  # fmt: skip
    lines.append(
        f"CRS rules in the false positives (blocked benign requests they took part in): "
        f"{res['modsec_rules']['false_positive_rules'] or 'none'}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted: every process it started has been stopped")
        sys.exit(130)
