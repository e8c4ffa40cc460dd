"""The two request logs: CSIC 2010 and the Apache access log.

CSIC's anomalous set mixes attacks with requests that are merely unusual for its shop (a wrong type in
a field, a backup-file probe). Only anomalous requests with a clear attack indicator in one decoded value
are kept, labelled with the class detected; the rest are dropped. Its near-constant headers are replaced
by sampled header profiles, drawn the same way for both labels. The access log's benign requests are kept
as they are (User-Agent and Referer) with a sampled profile around them; its scanner probes are attacks.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterator

import libinjection

from engine.canonical import decode
from engine.corpus import session
from engine.corpus.draft import Body, Draft
from engine.corpus.io import from_draft
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, start
from engine.corpus.split import choose_test, short, skeleton
from engine.labels import is_static

_SHELL = re.compile(r"[;|&`]\s*(?:ls|cat|id|whoami|uname|wget|curl|nc|ping|rm|echo|bash|sh|dir|type|net)\b|\$\(|`[^`]+`")
_XSS = re.compile(r"<\s*script|javascript:|\bon\w+\s*=|<\s*(?:img|svg|iframe)\b", re.I)
_PREFIX = re.compile(r"^[\w\s@.,/-]*?(?=['\"<(;|&`%\\\r\n$]|--)", re.U)


def values(rec: dict[str, Any]) -> list[str]:
    out = []
    for s in (rec.get("query") or "", rec.get("body") or ""):
        for part in s.split("&"):
            if part:
                out.append(decode(part.partition("=")[2], plus=True))
    return out


def detect(rec: dict[str, Any]) -> tuple[str, str] | None:
    """(class, the value that carries it) for a clear attack indicator, else None."""
    return _detect(rec.get("path") or "", rec.get("query") or "", rec.get("body") or "")


@functools.lru_cache(maxsize=1 << 15)
def _detect(path: str, query: str, body: str) -> tuple[str, str] | None:
    rec = {"query": query, "body": body}
    path = decode(path)
    if "../" in path or "..\\" in path:
        return "path_traversal", path
    for v in values(rec):
        if "<!--#" in v:
            return "ssi", v
        if libinjection.is_xss(v)["is_xss"] or _XSS.search(v):
            return "xss", v
        if libinjection.is_sql_injection(v)["is_sqli"]:
            return "sqli", v
        if "\r" in v or "\n" in v:
            return "crlf", v
        if "../" in v or "..\\" in v:
            return "path_traversal", v
        if _SHELL.search(v):
            return "cmdi", v
    return None


def _draft(ctx: Ctx, rec: dict[str, Any]) -> Draft:
    method = rec["method"]
    mode = "navigate" if method == "GET" else "form"
    d = start(ctx, method, rec["path"], mode)
    if rec.get("query"):
        d.query.append((rec["query"], None))
    if rec.get("body"):
        d.body = Body("raw", data=rec["body"], ctype="application/x-www-form-urlencoded")
    return session.dress(ctx.rng, d, ctx.pools.tokens)


def prepare_csic(recs: list[dict[str, Any]]) -> tuple[list[dict], dict[str, int]]:
    """Kept CSIC records (with attack_class and group set) and the count of each outcome."""
    kept, stats = [], {"normal": 0, "attack_kept": 0, "anomalous_dropped": 0}
    for rec in recs:
        if rec["label"] != "attack":
            kept.append({**rec, "attack_class": None, "group": f"csic:{rec['method']} {rec['path']}"})
            stats["normal"] += 1
            continue
        found = detect(rec)
        if found is None:
            stats["anomalous_dropped"] += 1
            continue
        cls, value = found
        core = _PREFIX.sub("", value, count=1)  # the injected part, without the form value it was appended to
        kept.append({**rec, "attack_class": cls, "group": f"csic:{cls}:{short(skeleton(core))}"})
        stats["attack_kept"] += 1
    return kept, stats


def split_groups(recs: list[dict[str, Any]]) -> set[str]:
    """Test groups of request-log records, per class (benign: form and method, or site section). Every
    benign path keeps a training group: a path seen only with attacks in training would become a label
    (MODEL-NOTES: the CSIC shop path alone pushed scores to ~1)."""
    by: dict[str, dict[str, int]] = {}
    for rec in recs:
        g = by.setdefault(rec.get("attack_class") or "benign", {})
        g[rec["group"]] = g.get(rec["group"], 0) + 1
    out: set[str] = set()
    for cls, groups in by.items():
        test = choose_test(groups)
        if cls == "benign":
            paths: dict[str, list[str]] = {}
            for g in sorted(groups):
                paths.setdefault(g.rsplit(" ", 1)[-1], []).append(g)
            for gs in paths.values():
                if len(gs) > 1 and all(g in test for g in gs):
                    test.discard(max(gs, key=lambda g: groups[g]))
        out |= test
    return out


def csic_records(rng: Rng, pools, split: str, recs: list[dict]) -> Iterator[dict]:
    for rec in recs:
        ctx = Ctx(rng.child(), pools, split)
        d = _draft(ctx, rec)
        cls = rec["attack_class"]
        yield from_draft(d, cls, source="csic2010", group=rec["group"], gen="csic/" + ("attack" if cls else "normal"), split=split)


def prepare_apache(recs: list[dict[str, Any]]) -> list[dict]:
    out = []
    for rec in recs:
        section = "/".join(rec["path"].split("/")[:3]) if rec["path"].count("/") > 1 else rec["path"]
        cls = "scanner" if rec["label"] == "attack" else None
        out.append({**rec, "attack_class": cls, "group": f"apache:{cls or 'benign'}:{section}"})
    return out


def apache_records(rng: Rng, pools, split: str, recs: list[dict], reps: int = 1) -> Iterator[dict]:
    """Access-log requests as they were (User-Agent, Referer), with a sampled profile's other headers."""
    for rec in recs:
        for _ in range(reps):
            ctx = Ctx(rng.child(), pools, split)
            mode = "asset" if is_static(rec["path"]) else "navigate"
            d = start(ctx, rec["method"], rec["path"], mode)
            d.method = rec["method"]
            if rec.get("query"):
                d.query.append((rec["query"], None))
            ua = rec["headers"].get("User-Agent")
            d.headers = [(k, v) for k, v in d.headers if k.lower() != "user-agent" or ua] if not ua else d.headers
            if ua:
                d.set_header("User-Agent", ua)
            session.dress(ctx.rng, d, pools.tokens)
            if rec["headers"].get("Referer"):
                d.set_header("Referer", rec["headers"]["Referer"])
            cls = rec["attack_class"]
            yield from_draft(d, cls, source="apache_access_log", group=rec["group"], gen="access_log/" + ("scanner" if cls else "normal"), split=split)
