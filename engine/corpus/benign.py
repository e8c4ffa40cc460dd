"""The benign traffic generator: ordinary requests of every shape, and the shared benign data placed in
them where it belongs.

- shape scenes (pages, assets, searches, API reads and writes, forms, uploads, preflights, health checks,
  crawlers, long documents) with ordinary values: group `gen:<scene>/<variant>`;
- benign_text records as posts, comments, tickets, gists, search queries and form fields;
- generated hard negatives (engine.corpus.hardneg) in the same places;
- with `--site-layouts` (Pools.site_layouts), static assets in many more site layouts and pages saved from CMS
  editors (engine.corpus.scenes_site): group `gen:asset/<layout>`, `gen:page_save/<editor>`;
- with `--mounts` (Pools.mounts), assets, pages and searches of sites served from a folder (/public/, /wordpress/,
  /app/, /shop/, ...): group `gen:mounted/<folder>`;
- with `--legacy-folders` (Pools.legacy_folders), CGI applications under /cgi-bin/ and sites under /site/,
  /include(s)/ and /components/: group `gen:cgi_app/<app>`, `gen:mounted_legacy/<folder>`, and CGI programs named
  with ordinary words, `gen:cgi_script/<variant>`;
- with `--oauth-flows` (Pools.oauth_flows), OAuth 2.0, OpenID Connect and SAML requests to and from an identity
  provider (engine.corpus.scenes_auth): group `gen:idp/<variant>`;
- with `--bare-clients` (Pools.bare_clients), requests from programs that send next to nothing: no header but Host,
  or none, or a load generator's short set (engine.corpus.profiles.bare): group `gen:bare/<variant>`;
- with `lookalikes` (`python -m engine.corpus --lookalikes`), generated lookalikes (engine.corpus.lookalikes):
  joined phrases and command questions in search boxes and text fields, opaque tokens in query, form, JSON
  and cookie positions, health and status checks from monitors and programs;
- payloads.jsonl benign values (HttpParamsDataset parameters, browser and crawler User-Agents);
- benign_api traffic (engine.corpus.api_traffic).

The test split uses held-out scene variants, held-out text sources and held-out data groups only.
"""

from __future__ import annotations

from typing import Iterator

from engine.corpus import api_traffic, hardneg, lookalikes, session, slots
from engine.corpus.draft import Draft
from engine.corpus.io import from_draft
from engine.corpus.rand import Rng, Weighted
from engine.corpus.scenes import Ctx, all_scenes, start
from engine.corpus.scenes_text import FOR_KIND

SHAPES = {"page": 18000, "static": 17000, "search": 7000, "api_read": 9000, "api_item": 5000, "api_write": 10000,
          "form_post": 9000, "multipart_form": 2500, "upload": 3500, "preflight": 2000, "health": 1500, "crawler": 2000,
          "long_doc": 6000, "xml_post": 2500}  # fmt: skip
DATA = {"text": 32000, "hardneg": 8000, "values": 9000, "agents": 2500}
SITE_SHAPES = {"asset": 6000, "page_save": 4000}  # with --site-layouts (engine.corpus.scenes_site)
MOUNT_SHAPES = {"mounted": 3000}  # with --mounts (engine.corpus.scenes_site.mounted)
LEGACY_SHAPES = {"cgi_app": 2500, "mounted_legacy": 2000, "cgi_script": 2000}  # with --legacy-folders (engine.corpus.scenes_site)
OAUTH_SHAPES = {"idp": 3000}  # with --oauth-flows (engine.corpus.scenes_auth)
BARE_SHAPES = {"bare": 2500}  # with --bare-clients (scenes_web.bare, profiles.bare)
LOOKALIKES = {"joined": 3000, "howto": 2000, "token": 3000, "probe": 2000}
TEST_SHARE = 0.15


def shape_records(rng: Rng, pools, split: str, scale: float, shapes: dict[str, int] = SHAPES) -> Iterator[dict]:
    """Ordinary requests from the scenes; the test split uses only held-out variants."""
    for name, n in shapes.items():
        sc = all_scenes()[name]
        variants = sc.held_out() if split == "test" else sc.usable("train")
        if not variants:
            continue
        count = round(n * scale * (TEST_SHARE if split == "test" else 1.0))
        for _ in range(count):
            ctx = Ctx(rng.child(), pools, split)
            d = sc.make(ctx, ctx.rng.pick(variants))
            session.dress(ctx.rng, d, pools.tokens)
            yield from_draft(d, None, source="synthetic", group=f"gen:{d.scene}", gen=d.scene, split=split)


def carrier(ctx: Ctx, names: Weighted, split: str) -> Draft:
    sc = all_scenes()[names.draw(ctx.rng)]
    return sc.make(ctx, ctx.rng.pick(sc.usable(split)))


def place(ctx: Ctx, d: Draft, value: str, kinds: tuple[str, ...]) -> slots.Slot:
    """Put a focus value into a slot of one of `kinds` (a new one if the request has none)."""
    fit = [s for s in d.slots if s.kind in kinds and s.where not in ("file", "path", "raw")]
    slot = ctx.rng.pick(fit) if fit else slots.add(ctx.rng, d, _body_where(d), kinds[0])
    slots.put(ctx.rng, d, slot, value)
    return slot


def _body_where(d: Draft) -> str:
    kind = d.body.kind if d.body is not None else ""
    return {"form": "form", "json": "json", "multipart": "multipart"}.get(kind, "query")


FIELD_CARRIERS = Weighted({"form_post": 3, "api_write": 3, "multipart_form": 1, "text_post": 1})
SEARCH_CARRIERS = Weighted({"search": 5, "api_read": 1, "page": 1})


def text_records(rng: Rng, pools, split: str, scale: float) -> Iterator[dict]:
    """benign_text records where people type them: posts built around them, fields, search boxes."""
    items = [r for recs in pools.texts.values() for r in recs]
    rng.shuffle(items)
    n = round(DATA["text"] * scale * (TEST_SHARE * 1.2 if split == "test" else 1.0))
    scenes = all_scenes()
    for i in range(n):
        item = items[i % len(items)]
        ctx = Ctx(rng.child(), pools, split)
        text, r = item["text"], ctx.rng.random()
        if r < 0.12 and len(text) <= 160 and "\n" not in text:
            d = carrier(ctx, SEARCH_CARRIERS, split)
            place(ctx, d, text, ("search",))
        elif r < 0.72:
            sc = scenes["text_post"]
            allowed = [v for v in FOR_KIND.get(item["kind"], sc.variants) if v in sc.usable(split)] or list(sc.usable(split))
            d = sc.make(ctx, ctx.rng.pick(allowed))
            slots.put(ctx.rng, d, d.focus, text)
        else:
            d = carrier(ctx, FIELD_CARRIERS, split)
            if d.focus is not None:
                slots.put(ctx.rng, d, d.focus, text)
            else:
                place(ctx, d, text, ("text",))
        session.dress(ctx.rng, d, pools.tokens)
        yield from_draft(d, None, source=item["source"], group=item["group"], gen=f"text/{item['kind']}/{d.scene}", split=split)


def hardneg_records(rng: Rng, pools, split: str, scale: float) -> Iterator[dict]:
    """Generated benign text with attack vocabulary, in search boxes and text fields; held out by template."""
    from engine.corpus.split import in_test

    temps = [(tid, t) for tid, t in hardneg.templates() if in_test(f"hn:{tid}") == (split == "test")]
    n = round(DATA["hardneg"] * scale * (TEST_SHARE if split == "test" else 1.0))
    for _ in range(n):
        ctx = Ctx(rng.child(), pools, split)
        tid, template = ctx.rng.pick(temps)
        value = hardneg.fill(ctx.rng, template)
        if tid.startswith("hq"):
            d = carrier(ctx, SEARCH_CARRIERS, split)
            place(ctx, d, value, ("search",))
        else:
            d = carrier(ctx, FIELD_CARRIERS, split)
            place(ctx, d, value, ("text",))
        session.dress(ctx.rng, d, pools.tokens)
        yield from_draft(d, None, source="hardneg", group=f"hn:{tid}", gen=f"hardneg/{d.scene}", split=split)


TOKEN_CARRIERS = Weighted({"page": 3, "api_read": 2, "api_item": 1, "search": 1, "form_post": 1, "api_write": 1})


def lookalike_records(rng: Rng, pools, split: str, scale: float) -> Iterator[dict]:
    """Lookalikes where they occur: phrases and questions typed into search boxes and text fields, tokens
    in the query, the body or a cookie, monitoring requests on their own. Whole command words, question
    shapes, token kinds and endpoint families are held out."""
    from engine.corpus.split import in_test

    unseen = held_out_health_paths()
    for family, budget in LOOKALIKES.items():
        frng = rng.child(family)
        stream = lookalikes.values(frng.child("values"), family)
        n = round(budget * scale * (TEST_SHARE if split == "test" else 1.0))
        made = 0
        while made < n:
            group, name, value = next(stream)
            if in_test(group) != (split == "test") or family == "probe" and name in unseen:
                continue
            made += 1
            ctx = Ctx(frng.child(), pools, split)
            if family == "probe":
                d = probe_draft(ctx, name, value)
                yield from_draft(d, None, source="lookalike", group=group, gen=f"lookalike/probe/{d.mode}", split=split)
                continue
            if family == "token":
                d = carrier(ctx, TOKEN_CARRIERS, split)
                where = "query" if d.body is None or ctx.rng.chance(0.5) else _body_where(d)
                where = "cookie" if ctx.rng.chance(0.15) else where
                if where in ("query", "form", "cookie"):
                    slots.put(ctx.rng, d, slots.Slot(where, name, "id"), value)
                else:
                    slots.put(ctx.rng, d, slots.add(ctx.rng, d, where, "id"), value)
            elif ctx.rng.chance(0.65 if family == "joined" else 0.7):
                d = carrier(ctx, SEARCH_CARRIERS, split)
                place(ctx, d, value, ("search",))
            else:
                d = carrier(ctx, FIELD_CARRIERS, split)
                place(ctx, d, value, ("text", "name") if family == "joined" else ("text",))
            session.dress(ctx.rng, d, pools.tokens)
            yield from_draft(d, None, source="lookalike", group=group, gen=f"lookalike/{family}/{d.scene}", split=split)


PROBE_HOSTS = ("10.0.3.7:8080", "localhost:8080", "127.0.0.1:9000", "172.17.0.4:3000", "api.internal:8443", None)


def held_out_health_paths() -> set[str]:
    """Paths only the held-out variants of the `health` scene request: the probe lookalikes never make them,
    so that scene stays unseen by a model trained with lookalikes."""
    from engine.corpus.scenes_web import HEALTH

    sc = all_scenes()["health"]
    seen = {p for v in sc.usable("train") for p in HEALTH[v]}
    return {p for v in sc.held_out() for p in HEALTH[v]} - seen


def probe_draft(ctx: Ctx, path: str, query: str) -> Draft:
    """A monitoring request: a checker (or a program such as curl) asks for one path, with no session."""
    rng = ctx.rng
    monitor = rng.chance(0.6)
    d = start(ctx, "HEAD" if rng.chance(0.15) else "GET", path, "monitor" if monitor else "api", host=rng.pick(PROBE_HOSTS))
    if monitor and rng.chance(0.5):
        d.set_header("User-Agent", rng.pick(lookalikes.PROBE_AGENTS))
    for pair in filter(None, query.split("&")):
        name, _, value = pair.partition("=")
        d.query.append((name, value))
    return d


VALUE_CARRIERS = Weighted({"page": 2, "search": 1, "api_read": 2, "form_post": 3, "api_write": 2})


def value_kind(v: str) -> tuple[str, ...]:
    if "@" in v:
        return ("email", "name")
    if v.replace(".", "").replace("-", "").isdigit():
        return ("id", "misc")
    return ("name", "search", "text", "misc")


def value_records(rng: Rng, pools, split: str, scale: float) -> Iterator[dict]:
    """payloads.jsonl benign values: parameters in query, form and JSON positions; User-Agents as headers."""
    for kind, items, budget in (("values", pools.values, DATA["values"]), ("agents", pools.agents, DATA["agents"])):
        items = list(items)
        rng.shuffle(items)
        n = min(len(items), round(budget * scale * (TEST_SHARE * 1.5 if split == "test" else 1.0)))
        for item in items[:n]:
            ctx = Ctx(rng.child(), pools, split)
            d = carrier(ctx, VALUE_CARRIERS, split)
            if kind == "agents" and ctx.rng.chance(0.8):
                d.set_header("User-Agent", item["payload"])
            else:
                place(ctx, d, item["payload"], value_kind(item["payload"]) if kind == "values" else ("text", "misc"))
            session.dress(ctx.rng, d, pools.tokens)
            yield from_draft(d, None, source=item["source"], group=item["group"], gen=f"value/{kind}/{d.scene}", split=split)


def generate(rng: Rng, pools, split: str, scale: float, lookalikes: bool = False) -> Iterator[dict]:
    yield from shape_records(rng.child("shapes"), pools, split, scale)
    if pools.site_layouts:
        yield from shape_records(rng.child("site"), pools, split, scale, SITE_SHAPES)
    if pools.mounts:
        yield from shape_records(rng.child("mounts"), pools, split, scale, MOUNT_SHAPES)
    if pools.legacy_folders:
        yield from shape_records(rng.child("legacy"), pools, split, scale, LEGACY_SHAPES)
    if pools.oauth_flows:
        yield from shape_records(rng.child("oauth"), pools, split, scale, OAUTH_SHAPES)
    if pools.bare_clients:
        yield from shape_records(rng.child("bare"), pools, split, scale, BARE_SHAPES)
    yield from text_records(rng.child("texts"), pools, split, scale)
    yield from hardneg_records(rng.child("hardneg"), pools, split, scale)
    yield from value_records(rng.child("values"), pools, split, scale)
    yield from api_traffic.generate(rng.child("api"), pools, split, scale)
    if lookalikes:
        yield from lookalike_records(rng.child("lookalikes"), pools, split, scale)
