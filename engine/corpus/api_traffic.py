"""benign_api.jsonl as traffic: GraphQL operations, GitHub and Stripe webhooks, OAuth token and callback
requests, JWT-authenticated API calls, analytics beacons and browser multipart uploads.

Each record is sent the way its real clients send it (headers of GitHub-Hookshot, Stripe's signature,
sendBeacon's text/plain bodies, ...). The records are few, so each is sent several times in different
requests; its group is its fixture file, so all its copies stay on one side of the split.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Iterator

from engine.corpus import paths, raw, session, vocab
from engine.corpus.draft import Body, Draft
from engine.corpus.io import from_draft
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, all_scenes, start

BUDGET = {"graphql": 5000, "github": 2500, "stripe": 1200, "oauth_body": 700, "oauth_url": 700, "beacon_url": 2500,
          "beacon_body": 1000, "token": 1500, "raw": 300}  # fmt: skip
_VARS = re.compile(r"\$(\w+)\s*:\s*\[?\s*(\w+)")


def graphql_variables(rng: Rng, doc: str) -> dict:
    out = {}
    for name, typ in _VARS.findall(doc):
        out[name] = {"ID": "UHJvZHVjdDo" + rng.alnum(3, "0123456789MNOQRSTUVWXYZ"), "Int": rng.randrange(1, 100), "Boolean": rng.chance(0.5),
                     "Float": round(rng.random() * 100, 2), "String": rng.pick(vocab.WORDS)}.get(typ, rng.pick(vocab.WORDS))  # fmt: skip
    return out


def graphql_request(ctx: Ctx, doc: str) -> Draft:
    """A GraphQL document sent as real clients do: a JSON POST, or a GET for short queries."""
    rng = ctx.rng
    path = rng.pick(["/graphql", "/graphql/", "/api/graphql", "/v1/graphql", "/query"])
    if len(doc) < 700 and rng.chance(0.25):
        from engine.corpus import encode

        d = start(ctx, "GET", path, rng.pick(["fetch", "api"]))
        d.query.append(("query", encode.browser(doc, form=False)))
        return d
    d = start(ctx, "POST", path, rng.pick(["fetch", "api"]))
    m = re.search(r"(?:query|mutation|subscription)\s+(\w+)", doc)
    obj = {"operationName": m.group(1) if m else None, "variables": graphql_variables(rng, doc), "query": doc}
    if rng.chance(0.3):
        obj = {"query": doc, "variables": obj["variables"]}
    d.body = Body("json", obj=obj)
    return d


def _github(ctx: Ctx, rec: dict) -> Draft:
    rng = ctx.rng
    d = start(ctx, "POST", rng.pick(["/webhooks/github", "/api/github/webhook", "/hooks/github", "/payload"]), "api", client="go")
    event = rec["source_path"].split("/")[2] if rec["source_path"].count("/") >= 3 else "push"
    sig = hashlib.sha256(rec["payload"].encode()).hexdigest()
    d.headers = [("Host", d.host), ("User-Agent", f"GitHub-Hookshot/{rng.hexid(7)}"), ("Accept", "*/*")]
    d.extra += [("X-GitHub-Delivery", vocab.uuid(rng)), ("X-GitHub-Event", event), ("X-GitHub-Hook-ID", str(rng.randrange(10**8, 10**9))),
                ("X-Hub-Signature-256", "sha256=" + sig)]  # fmt: skip
    d.body = Body("raw", data=rec["payload"], ctype="application/json")
    return d


def _stripe(ctx: Ctx, rec: dict) -> Draft:
    rng = ctx.rng
    d = start(ctx, "POST", rng.pick(["/webhooks/stripe", "/api/stripe/webhook", "/billing/webhook"]), "api")
    obj = json.loads(rec["payload"])
    event = {"id": "evt_" + rng.alnum(24), "object": "event", "api_version": "2024-06-20", "created": int(vocab.timestamp(rng)),
             "data": {"object": obj}, "livemode": False, "type": f"{obj.get('object', 'object')}.{rng.pick(['created', 'updated'])}"}  # fmt: skip
    d.headers = [("Host", d.host), ("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"), ("Accept", "*/*; q=0.5, application/xml")]
    d.extra.append(("Stripe-Signature", f"t={vocab.timestamp(rng)},v1={rng.hexid(64)}"))
    d.body = Body("json", obj=event, indent=2)
    return d


def _url(ctx: Ctx, target: str, mode: str, method: str = "GET") -> Draft:
    path, _, query = target.partition("?")
    d = start(ctx, method, path or "/", mode)
    if query:
        d.query.append((query, None))
    return d


def _beacon_body(ctx: Ctx, rec: dict) -> Draft:
    rng = ctx.rng
    d = start(ctx, "POST", rng.pick(["/api/event", "/v1/track", "/v1/t", "/collect"]), "fetch")
    d.body = Body("raw", data=rec["payload"], ctype=rng.pick(["text/plain;charset=UTF-8", "application/json"]))
    return d


def _token(ctx: Ctx, rec: dict) -> Draft:
    rng = ctx.rng
    sc = all_scenes()[rng.pick(["api_read", "api_item", "api_write"])]
    d = sc.make(ctx, rng.pick(sc.usable(ctx.split)))
    if rec["context"].startswith("header:"):
        d.set_header("Authorization", rec["payload"])
    elif rng.chance(0.8):
        d.set_header("Authorization", "Bearer " + rec["payload"])
    else:
        d.cookies.append((rng.pick(["token", "jwt", "access_token", "id_token"]), rec["payload"]))
    return d


def _raw(ctx: Ctx, rec: dict) -> Draft:
    req = raw.parse_request(rec["payload"])
    d = Draft(method=req.method, path=req.path, headers=list(req.headers), client="chrome", mode="form")
    if req.query:
        d.query.append((req.query, None))
    host = paths.host(ctx.rng)
    d.headers = [(k, host if k.lower() == "host" and ctx.rng.chance(0.7) else v) for k, v in d.headers if k.lower() != "content-length"]
    try:  # file bytes were stored as Latin-1 code points; a Unicode filename needs UTF-8
        data: bytes | str = req.body.encode("latin-1")
    except UnicodeEncodeError:
        data = req.body
    d.body = Body("raw", data=data, ctype="")
    return d


def make(ctx: Ctx, category: str, rec: dict) -> Draft:
    if category == "graphql":
        return graphql_request(ctx, rec["payload"])
    if category == "github":
        return _github(ctx, rec)
    if category == "stripe":
        return _stripe(ctx, rec)
    if category in ("oauth_url", "beacon_url"):
        mode = "navigate" if category == "oauth_url" else "fetch"
        return _url(ctx, rec["payload"], mode, "POST" if category == "beacon_url" and ctx.rng.chance(0.2) else "GET")
    if category == "oauth_body":
        d = start(ctx, "POST", ctx.rng.pick(["/oauth/token", "/oauth2/token", "/connect/token", "/o/token/"]), "api")
        d.body = Body("raw", data=rec["payload"], ctype="application/x-www-form-urlencoded")
        return d
    if category == "beacon_body":
        return _beacon_body(ctx, rec)
    if category == "token":
        return _token(ctx, rec)
    return _raw(ctx, rec)


def generate(rng: Rng, pools, split: str, scale: float) -> Iterator[dict]:
    for category, budget in BUDGET.items():
        recs = pools.api.get(category, [])
        if not recs:
            continue
        n = round(budget * scale * (0.15 if split == "test" else 1.0))
        for i in range(n):
            rec = recs[i % len(recs)] if i < len(recs) else rng.pick(recs)
            ctx = Ctx(rng.child(), pools, split)
            d = make(ctx, category, rec)
            d.scene = f"api/{category}"
            if category not in ("github", "stripe", "raw"):
                session.dress(ctx.rng, d, pools.tokens)
            yield from_draft(d, None, source=rec["source"], group=rec["group"], gen=d.scene, split=split)
