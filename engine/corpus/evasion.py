"""The evasion set: test-split attacks rewritten the way attackers dodge signatures.

Each record takes a payload of a held-out (test) group, applies one transform and embeds the result;
`gen` says which (`evasion/<transform>/<position>`). The transforms: double percent-encoding, mixed case,
SQL inline comments (`UN/**/ION SEL/**/ECT`), unicode escapes (`\\u003c` in JSON, `%u003c` in a URL),
HTML entities (`&#x3c;`), base64 in a parameter, fullwidth characters, and the payload deep inside a
50 KB JSON body. No training group is ever used here.
"""

from __future__ import annotations

import base64
import re
from typing import Iterator
from urllib.parse import quote

from engine.corpus import attacks, embed_parts, params, session, slots, vocab
from engine.corpus.draft import Body
from engine.corpus.io import from_draft
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, start
from engine.corpus.scenes_api import shape
from engine.corpus.scenes_text import long_text

TRANSFORMS = ("double_pct", "mixed_case", "sql_comments", "unicode_escape", "html_entities", "base64_param", "fullwidth", "deep_json_50k")
CASE_CLASSES = {"sqli", "xss", "xpathi", "scanner", "ldapi"}
_SQL_WORDS = re.compile(r"\b(union|select|from|where|and|or|insert|update|delete|drop|sleep|benchmark|order|group|concat|exec)\b", re.I)


def applicable(rec: dict) -> tuple[str, ...]:
    if rec["context"] in ("path", "url"):
        return ("double_pct", "mixed_case") if rec["attack_class"] in CASE_CLASSES else ("double_pct",)
    if rec["context"] != "param":
        return ()
    out = [t for t in TRANSFORMS if t not in ("mixed_case", "sql_comments")]
    if rec["attack_class"] in CASE_CLASSES:
        out.append("mixed_case")
    if rec["attack_class"] == "sqli" and (_SQL_WORDS.search(rec["payload"]) or " " in rec["payload"]):
        out.append("sql_comments")
    return tuple(out)


def mixed_case(rng: Rng, s: str) -> str:
    return "".join(ch.upper() if rng.chance(0.5) else ch.lower() for ch in s)


def sql_comments(rng: Rng, s: str) -> str:
    s = _SQL_WORDS.sub(lambda m: m.group(0)[: len(m.group(0)) // 2] + "/**/" + m.group(0)[len(m.group(0)) // 2 :] if len(m.group(0)) > 3 else m.group(0), s)
    return s.replace(" ", "/**/") if rng.chance(0.5) else s


def _specials(s: str, fn) -> str:
    return "".join(fn(ch) if not ch.isalnum() and ch != " " else ch for ch in s)


def fullwidth(s: str) -> str:
    return "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else "\u3000" if ch == " " else ch for ch in s)


def double_pct(s: str) -> str:
    return quote(quote(s, safe="", errors="surrogatepass"), safe="")


def _raw_query(rng: Rng, d, cls: str, value: str) -> None:
    d.query.insert(rng.randrange(len(d.query) + 1), (params.name_for(rng, params.kind_for(rng, cls)), value))


def evade(ctx: Ctx, rec: dict, how: str):
    """The request for one payload under one transform, and the position used."""
    rng, p, cls = ctx.rng, rec["payload"], rec["attack_class"]
    if rec["context"] in ("path", "url"):
        path, sep, query = p.partition("?")
        path = path if path.startswith("/") else "/" + path
        new = mixed_case(rng, path) if how == "mixed_case" else re.sub(r"[^/A-Za-z0-9]", lambda m: double_pct(m.group(0)), path)
        d = embed_parts.url(ctx, new + sep + query)
        return d, "target"
    if how == "deep_json_50k":
        return deep_json(ctx, p), "json"
    if how in ("mixed_case", "sql_comments", "fullwidth"):
        new = {"mixed_case": mixed_case, "sql_comments": sql_comments}.get(how, lambda r, s: fullwidth(s))(rng, p)
        d, where = attacks.embed_param(ctx, new, cls)
        return d, where.split("/")[0]
    d = attacks.scene_draft(ctx, rng.pick(["query", "form", "json"]))
    if how == "double_pct":
        _raw_query(rng, d, cls, double_pct(p))
        return d, "query"
    if how == "unicode_escape":
        if d.body is not None and d.body.kind == "json":
            slots.put(rng, d, slots.add(rng, d, "json", params.kind_for(rng, cls)), _specials(p, lambda ch: "\\u%04x" % ord(ch)))
            return d, "json"
        _raw_query(rng, d, cls, _specials(p, lambda ch: "%%u%04x" % ord(ch) if ord(ch) < 0x10000 else quote(ch)))
        return d, "query"
    if how == "html_entities":
        value = _specials(p, lambda ch: rng.pick(["&#x%x;" % ord(ch), "&#%d;" % ord(ch)]))
    else:  # base64_param
        value = (base64.urlsafe_b64encode if rng.chance(0.3) else base64.b64encode)(p.encode("utf-8", "surrogatepass")).decode()
    where = "json" if d.body is not None and d.body.kind == "json" else "form" if d.body is not None and d.body.kind == "form" else "query"
    slots.put(rng, d, slots.add(rng, d, where, params.kind_for(rng, cls) if how != "base64_param" else "data"), value)
    return d, where


def deep_json(ctx: Ctx, payload: str):
    """A ~50 KB JSON document with the payload nested 8-15 levels deep in its middle."""
    rng = ctx.rng
    items = [shape(rng, rng.pick(["order", "product", "user_profile", "invoice"])) for _ in range(40)]
    leaf = {params.name_for(rng, "text"): payload}
    for _ in range(rng.randrange(8, 16)):
        leaf = {rng.pick(vocab.WORDS): leaf, "id": rng.randrange(1, 999)}
    items.insert(len(items) // 2, leaf)
    obj = {"export": {"generated": vocab.date(rng), "items": items, "notes": long_text(ctx, 30_000, ("prose", "markdown"))}}
    d = start(ctx, rng.pick(["POST", "PUT"]), rng.pick(["/api/import", "/api/v1/bulk", "/api/sync"]), rng.pick(["api", "fetch"]))
    d.body = Body("json", obj=obj)
    return session.dress(rng, d, ctx.pools.tokens)


def generate(rng: Rng, pools, test_attacks: dict[str, list[dict]], total: int, split: str = "test") -> Iterator[dict]:
    """About `total` evasion records from the test payloads, spread over classes by the square root of
    their size (thin classes still get a fair share). `split`: whose page variants carry them (the evasion
    set: the test split's; bench/dev_evasions.py rewrites dev payloads in the training split's)."""
    usable = {c: [r for r in recs if applicable(r)] for c, recs in sorted(test_attacks.items())}
    usable = {c: r for c, r in usable.items() if r}
    weight = {c: len(r) ** 0.5 for c, r in usable.items()}
    norm = sum(weight.values()) or 1.0
    for cls, recs in usable.items():
        n = max(1, round(total * weight[cls] / norm))
        for i in range(n):
            rec = recs[i % len(recs)]
            ctx = Ctx(rng.child(), pools, split)
            how = ctx.rng.pick(applicable(rec))
            d, where = evade(ctx, rec, how)
            yield from_draft(d, cls, source=rec["source"], group=rec["group"], gen=f"evasion/{how}/{where}", split="evasion")
