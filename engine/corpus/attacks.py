"""Attack requests: every payload embedded into an otherwise ordinary request, according to its context.

`param` payloads go into a slot of a benign scene (query, form, JSON leaf at some depth, multipart part,
cookie, path segment, header, or a post's text), chosen by class, with the scene's own benign parameters,
headers and body around them; sometimes that body is a long document with the payload in its middle
(MODEL-NOTES point 2). Other contexts fill larger parts of a request: `path`/`url` the target,
`header:<Name>` one header, `header` raw header lines, `request` a whole raw request, `body` the body,
`graphql` a GraphQL operation, `upload` a multipart file. With `--xml-values` (Pools.xml_values) a `param`
payload may also go into an XML body's element text or attribute (engine.corpus.xmlvalues).
"""

from __future__ import annotations

import re

from engine.corpus import embed_parts, params, session, slots, xmlvalues
from engine.corpus.draft import Draft
from engine.corpus.io import from_draft
from engine.corpus.rand import Rng, Weighted
from engine.corpus.scenes import Ctx, all_scenes

POSITIONS = {"query": 34, "form": 17, "json": 17, "multipart": 5, "cookie": 6, "path": 5, "header": 9, "text": 7}
CLASS_POSITIONS: dict[str, dict[str, float]] = {
    "path_traversal": {"query": 38, "form": 13, "json": 13, "multipart": 4, "cookie": 6, "path": 14, "header": 5, "text": 2},
    "rfi": {"query": 45, "form": 15, "json": 15, "multipart": 3, "cookie": 5, "path": 5, "header": 5, "text": 2},
    "xss": {**POSITIONS, "text": 16}, "ssti": {**POSITIONS, "text": 14}, "ssi": {**POSITIONS, "text": 14},
    "session_fixation": {**POSITIONS, "text": 18, "cookie": 2}, "format_string": POSITIONS,
    "jndi": {"query": 18, "form": 9, "json": 18, "multipart": 3, "cookie": 8, "path": 4, "header": 35, "text": 5},
    "deserialization": {"query": 16, "form": 18, "json": 14, "multipart": 8, "cookie": 28, "path": 0, "header": 12, "text": 4},
    "crlf": {"query": 45, "form": 8, "json": 5, "multipart": 2, "cookie": 8, "path": 22, "header": 10, "text": 0},
    "open_redirect": {"query": 50, "form": 18, "json": 20, "multipart": 2, "cookie": 3, "path": 0, "header": 7, "text": 0},
    "ssrf": {"query": 40, "form": 18, "json": 27, "multipart": 5, "cookie": 2, "path": 0, "header": 8, "text": 0},
    "mail_injection": {"query": 15, "form": 40, "json": 30, "multipart": 10, "cookie": 0, "path": 0, "header": 0, "text": 5},
    "code_injection": {**POSITIONS, "cookie": 9, "header": 12},
    "cmdi": {**POSITIONS, "header": 12},
}  # fmt: skip
_WEIGHTED = {k: Weighted(v) for k, v in CLASS_POSITIONS.items()}
_DEFAULT = Weighted(POSITIONS)
# with --xml-values: an XML body's values, for every class but CRLF (a line break in element text splits no header)
XML_WEIGHT, XML_NONE = 6, ("crlf",)
_WEIGHTED_XML = {k: Weighted({**v, "xml": 0 if k in XML_NONE else XML_WEIGHT}) for k, v in CLASS_POSITIONS.items()}
_DEFAULT_XML = Weighted({**POSITIONS, "xml": XML_WEIGHT})

# benign scenes that carry a payload at each position (the same scenes the benign generator uses)
CARRIERS = {
    "query": Weighted({"page": 30, "search": 25, "api_read": 30, "static": 5, "api_item": 5, "crawler": 5}),
    "form": Weighted({"form_post": 72, "text_post": 18, "long_doc": 10}),
    "json": Weighted({"api_write": 62, "text_post": 28, "long_doc": 10}),
    "multipart": Weighted({"multipart_form": 60, "upload": 40}),
    "text": Weighted({"text_post": 85, "long_doc": 15}),
    "xml": Weighted({"xml_post": 1}),
    "any": Weighted({"page": 25, "static": 10, "search": 10, "api_read": 15, "api_item": 10, "api_write": 15, "form_post": 10, "text_post": 5,
                     "preflight": 2, "health": 1, "xml_post": 2, "upload": 2}),
}  # fmt: skip
COOKIE_NAMES = ["session", "user", "lang", "theme", "prefs", "cart", "remember_me", "uid", "PHPSESSID", "token", "auth", "locale",
                "currency", "redirect", "last_search", "sessionid", "data", "state", "profile", "tracking_id"]  # fmt: skip
_PAIRS = re.compile(r"^[^=&\s]+=[^&\s]*(?:&[^=&\s]+=[^&\s]*)*$")


# with --site-layouts (Pools.site_layouts): some payloads ride on assets in more layouts and in CMS page saves,
# so neither scene is benign by its shape alone; a page save is taken only where its body suits the position
SITE_CARRIERS = {"query": ("asset", 0.05), "any": ("asset", 0.05), "form": ("page_save", 0.12), "json": ("page_save", 0.12),
                 "text": ("page_save", 0.15)}  # fmt: skip


# with --mounts (Pools.mounts): some query payloads ride on sites served from a folder, as benign requests do
MOUNT_CARRIERS = {"query": ("mounted", 0.04), "any": ("mounted", 0.04)}
# with --legacy-folders (Pools.legacy_folders): query payloads ride on CGI applications under /cgi-bin/ and on sites
# under /site/, /include(s)/ and /components/, folders the probes alone used before
LEGACY_CARRIERS = {"query": ("cgi_app", 0.03), "any": ("mounted_legacy", 0.03)}
# with --oauth-flows (Pools.oauth_flows): query and form payloads ride on identity-provider requests too, in their
# state, scope, login_hint and added parameters (never a redirect URI: engine.corpus.scenes_auth)
OAUTH_CARRIERS = {"query": ("idp", 0.02), "form": ("idp", 0.02)}
# with --bare-clients (Pools.bare_clients): query payloads and the rest ride on requests with next to no headers too
# (and embed_parts.url sends some path probes so), so a bare request is not benign by its header set alone
BARE_CARRIERS = {"query": ("bare", 0.02), "any": ("bare", 0.03)}
# the flag that turns each table on, in the order they are tried (the order fixes the corpus's random draws)
FLAGGED_CARRIERS = (("mounts", MOUNT_CARRIERS), ("site_layouts", SITE_CARRIERS), ("legacy_folders", LEGACY_CARRIERS),
                    ("oauth_flows", OAUTH_CARRIERS), ("bare_clients", BARE_CARRIERS))  # fmt: skip


def scene_draft(ctx: Ctx, where: str) -> Draft:
    for flag, table in FLAGGED_CARRIERS:
        carrier = table.get(where) if getattr(ctx.pools, flag) else None
        if carrier and ctx.rng.chance(carrier[1]):
            from engine.corpus.scenes_auth import FORM_VARIANTS, QUERY_VARIANTS
            from engine.corpus.scenes_site import CMS_FORM, CMS_JSON

            sc = all_scenes()[carrier[0]]
            fits = {"page_save": {"form": CMS_FORM, "json": CMS_JSON}, "idp": {"query": QUERY_VARIANTS, "form": FORM_VARIANTS}}
            fit = fits.get(sc.name, {}).get(where)
            variants = [v for v in sc.usable(ctx.split) if fit is None or v in fit] or list(sc.usable(ctx.split))
            d = sc.make(ctx, ctx.rng.pick(variants))
            return session.dress(ctx.rng, d, ctx.pools.tokens)
    sc = all_scenes()[CARRIERS[where].draw(ctx.rng)]
    variants = sc.usable(ctx.split)
    if where in ("form", "json", "text") and sc.name in ("text_post", "long_doc"):
        # a text scene whose body has the right shape for this position
        want = {"form": ("forum_reply", "wiki_edit", "html_form"), "json": None, "text": None}[where]
        variants = [v for v in variants if want is None or v in want] or variants
    d = sc.make(ctx, ctx.rng.pick(variants))
    return session.dress(ctx.rng, d, ctx.pools.tokens)


def _choose_slot(ctx: Ctx, d: Draft, where: str, cls: str) -> slots.Slot:
    kinds = params.CLASS_KINDS.get(cls, {})
    fit = [s for s in d.slots if s.where == where and (s.kind in kinds or ctx.rng.chance(0.15))]
    if fit and ctx.rng.chance(0.6):
        return ctx.rng.pick(fit)
    return slots.add(ctx.rng, d, where, params.kind_for(ctx.rng, cls))


def embed_param(ctx: Ctx, payload: str, cls: str) -> tuple[Draft, str]:
    rng = ctx.rng
    if cls == "prototype_pollution" and _PAIRS.match(payload) or payload.startswith("/?"):
        return embed_parts.url(ctx, payload if payload.startswith("/") else "?" + payload, query_only=True), "pairs"
    if ctx.pools.xml_values:
        where = (_WEIGHTED_XML.get(cls) or _DEFAULT_XML).draw(rng)
    else:
        where = (_WEIGHTED.get(cls) or _DEFAULT).draw(rng)
    if where == "xml":
        d = scene_draft(ctx, "xml")
        return d, f"xml/{xmlvalues.put(rng, d, payload)}/{d.scene}"
    if where in ("query", "form", "json", "multipart", "text"):
        d = scene_draft(ctx, where)
        if where == "text" or (d.focus is not None and rng.chance(0.3)):
            if d.focus is None:
                d.focus = slots.add(rng, d, "query", "text")
            slots.put(rng, d, d.focus, payload, splice=rng.chance(0.45))
            return d, f"text/{d.scene}"
        if where == "query" and len(d.query) < 2:
            for name, value in params.benign_pairs(rng, rng.randrange(0, 3)):
                slots.put(rng, d, slots.Slot("query", name, "misc"), value)
        real = "form" if where == "form" and d.body is not None and d.body.kind == "form" else where
        slots.put(rng, d, _choose_slot(ctx, d, real, cls), payload)
        return d, f"{where}/{d.scene}"
    d = scene_draft(ctx, "any")
    if where == "path" and any(s.where == "path" for s in d.slots):
        slots.put(rng, d, rng.pick([s for s in d.slots if s.where == "path"]), payload)
    elif where == "cookie" or where == "path":
        where = "cookie"
        slots.put(rng, d, slots.Slot("cookie", rng.pick(COOKIE_NAMES), "data"), payload)
    else:
        embed_parts.header_param(ctx, d, payload)
    return d, f"{where}/{d.scene}"


def embed(ctx: Ctx, rec: dict) -> tuple[Draft, str] | None:
    """A request carrying this payload record, and how it was made; None when it cannot be sent."""
    context, payload, cls = rec["context"], rec["payload"], rec["attack_class"]
    if context == "param":
        return embed_param(ctx, payload, cls)
    if context in ("path", "url"):
        return embed_parts.url(ctx, payload), context
    if context.startswith("header:"):
        d = scene_draft(ctx, "any")
        embed_parts.named_header(d, context.split(":", 1)[1], payload)
        return d, f"header/{d.scene}"
    if context == "header":
        d = scene_draft(ctx, ctx.rng.pick(["form", "json", "any"]))
        embed_parts.header_lines(d, payload)
        return d, f"header_lines/{d.scene}"
    if context == "request":
        d = embed_parts.request(ctx, payload)
        return (d, "request") if d is not None else None
    if context == "body":
        return embed_parts.body(ctx, payload), "body"
    if context == "graphql":
        from engine.corpus.api_traffic import graphql_request

        return graphql_request(ctx, payload), "graphql"
    if context == "upload":
        return embed_parts.upload(ctx, payload, rec.get("source_path", "")), "upload"
    return None


def attack_record(rng: Rng, pools, split: str, rec: dict) -> dict | None:
    ctx = Ctx(rng, pools, split)
    made = embed(ctx, rec)
    if made is None:
        return None
    d, how = made
    return from_draft(d, rec["attack_class"], source=rec["source"], group=rec["group"], gen=f"attack/{rec['context']}/{how}", split=split)
