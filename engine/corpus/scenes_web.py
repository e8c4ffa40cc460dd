"""Browser and crawler scenes: page loads and navigations, static assets (with HEAD and conditional
requests), site search, CORS preflights, health checks and monitors, crawler fetches."""

from __future__ import annotations

import email.utils

from engine.corpus import params, paths, vocab
from engine.corpus.draft import Draft
from engine.corpus.scenes import Ctx, query_slots, scene, start
from engine.corpus.slots import Slot


def _path_slot(d: Draft) -> None:
    segs = d.path.split("/")
    if len(segs) > 2 or (len(segs) == 2 and segs[1]):
        d.slots.append(Slot("path", len(segs) - 1 if segs[-1] else max(1, len(segs) - 2), "id"))


@scene("page", paths.SITE_VARIANTS, "query path", keep=paths.COMMON_VARIANTS)
def page(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    path, q = paths.page(rng, variant)
    d = start(ctx, "GET", path, "bot" if rng.chance(0.08) else "navigate")
    query_slots(ctx, d, q)
    _path_slot(d)
    return d


def _conditional(ctx: Ctx, d: Draft) -> None:
    rng = ctx.rng
    if rng.chance(0.5):
        d.extra.append(("If-None-Match", f'W/"{rng.hexid(8)}-{rng.hexid(12)}"' if rng.chance(0.5) else f'"{rng.hexid(32)}"'))
    else:
        t = int(vocab.timestamp(rng))
        d.extra.append(("If-Modified-Since", email.utils.formatdate(t, usegmt=True)))


@scene("static", paths.STATIC_VARIANTS, "query path", keep=("wordpress", "images", "icons"))
def static(ctx: Ctx, variant: str) -> Draft:
    return asset_request(ctx, *paths.static(ctx.rng, variant), font_origin=True)


def asset_request(ctx: Ctx, path: str, q: list[tuple[str, str]], dest: str, font_origin: bool = False) -> Draft:
    """A browser's (or a program's) fetch of one static file: sometimes HEAD, conditional or ranged.
    `font_origin`: a browser sends Origin with a font request."""
    rng = ctx.rng
    r = rng.random()
    mode = "asset" if r < 0.8 else "api" if r < 0.9 else "bot"
    d = start(ctx, "HEAD" if rng.chance(0.06) else "GET", path, mode, dest)
    query_slots(ctx, d, q)
    if rng.chance(0.25):
        _conditional(ctx, d)
    if font_origin and dest == "font" and d.client in ("chrome", "edge", "firefox", "safari"):
        d.extra.insert(0, ("Origin", f"https://{d.host}"))
    if rng.chance(0.05):
        d.extra.append(("Range", f"bytes={rng.randrange(0, 5000)}-"))
    _path_slot(d)
    return d


SEARCH_PATHS = {"site_search": ["/search", "/s", "/find", "/"], "shop_filter": ["/search", "/catalogsearch/result/", "/collections/all"],
                "docs_search": ["/docs/search", "/search.html", "/en/stable/search.html"], "api_search": ["/api/search", "/api/v1/search", "/v2/search"],
                "autocomplete": ["/autocomplete", "/api/suggest", "/complete/search", "/typeahead"]}  # fmt: skip


@scene("search", tuple(SEARCH_PATHS), "query")
def search(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    mode = {"api_search": "api", "autocomplete": "fetch"}.get(variant, "navigate")
    d = start(ctx, "GET", rng.pick(SEARCH_PATHS[variant]), mode)
    pairs = [(rng.pick(params.NAMES["search"][:4]), params.value(rng, "search"))]
    if variant == "shop_filter":
        pairs += [("category", vocab.slug(rng, 1)), ("price_min", str(rng.randrange(0, 50))), ("price_max", str(rng.randrange(50, 900))),
                  ("sort", params.value(rng, "sort"))][: rng.randrange(1, 5)]  # fmt: skip
    elif variant == "docs_search":
        pairs += [("check_keywords", "yes"), ("area", "default")] if rng.chance(0.5) else [("version", f"{rng.randrange(1, 6)}.x")]
    elif variant == "autocomplete":
        pairs += [("limit", str(rng.pick([5, 8, 10]))), ("client", rng.pick(["web", "firefox", "chrome"]))]
    pairs += [(k, v) for k, v in params.benign_pairs(rng, rng.randrange(0, 3))]
    query_slots(ctx, d, pairs)
    return d


@scene("preflight", ("api", "graphql", "upload", "fonts"))
def preflight(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    path = {"api": paths.api_item(rng), "graphql": "/graphql", "upload": f"/upload/{rng.hexid(8)}", "fonts": paths.static(rng, "fonts")[0]}[variant]
    d = start(ctx, "OPTIONS", path, "fetch", client=rng.pick(["chrome", "chrome", "firefox", "safari", "edge"]))
    d.extra += [("Origin", f"https://{rng.pick(['app', 'www', 'admin', 'dashboard'])}.{vocab.domain(rng).split('.', 1)[-1]}"),
                ("Access-Control-Request-Method", rng.pick(["POST", "PUT", "PATCH", "DELETE", "GET"])),
                ("Access-Control-Request-Headers", rng.pick(["content-type", "authorization,content-type", "x-requested-with", "content-type,x-api-key"]))]  # fmt: skip
    return d


HEALTH = {"k8s": ["/healthz", "/livez", "/readyz", "/health/live", "/health/ready"], "lb": ["/health", "/ping", "/status", "/elb-status", "/"],
          "uptime": ["/", "/status", "/api/health", "/up", "/heartbeat"], "prometheus": ["/metrics", "/actuator/prometheus", "/stats/prometheus"]}  # fmt: skip


@scene("health", tuple(HEALTH), keep=("k8s", "lb"))
def health(ctx: Ctx, variant: str) -> Draft:
    d = start(ctx, "HEAD" if ctx.rng.chance(0.1) else "GET", ctx.rng.pick(HEALTH[variant]), "monitor", host=ctx.rng.pick(["10.0.3.7:8080", "localhost:8080", None]))
    if variant == "uptime" and ctx.rng.chance(0.3):
        d.query.append(("_", vocab.timestamp(ctx.rng, ms=True)))
    return d


# --bare-clients (profiles.bare): requests from programs that send next to nothing, for the paths they ask for. A
# balancer's or a container's check, a root page asked for by hand or by a script, a load generator's targets.
BARE_CHECK = ["/", "/", "/", "/health", "/healthz", "/status", "/ping", "/index.html", "/up", "/ready", "/alive", "/lbcheck",
              "/_health", "/api/health", "/heartbeat", "/check", "/index.php", "/default.html"]  # fmt: skip
BARE_HOSTS = ["10.0.2.15:8080", "127.0.0.1:8080", "127.0.0.1", "localhost", "localhost:3000", "backend", "app:8000"]


@scene("bare", ("check", "root", "bench", "script"), "query", keep=("check", "root"))
def bare(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    q: list[tuple[str, str]] = []
    if variant == "check":
        method, path = rng.pick(["GET", "GET", "GET", "HEAD", "OPTIONS"]), rng.pick(BARE_CHECK)
    elif variant == "root":
        method, path = "HEAD" if rng.chance(0.25) else "GET", "/"
    elif variant == "bench":
        method = "GET"
        kind = rng.pick(["page", "page", "api", "item", "root"])
        if kind == "page":
            path, q = paths.page(rng, rng.pick(paths.SITE_VARIANTS))
        elif kind == "api":
            path, q = paths.api_item(rng).rsplit("/", 1)[0], params.benign_pairs(rng, rng.randrange(0, 3))
        else:
            path = paths.api_item(rng) if kind == "item" else "/"
    else:  # script: a page, an asset or an API item fetched by a one-liner
        method = "HEAD" if rng.chance(0.15) else "GET"
        path = rng.pick(["/", "/index.html", paths.static(rng, rng.pick(paths.STATIC_VARIANTS))[0], paths.api_item(rng)])
    d = start(ctx, method, path, "bare", host=rng.pick(BARE_HOSTS) if rng.chance(0.6) else None)
    if rng.chance(0.12):  # HTTP/1.0 by hand or a balancer's default check: not even a Host
        d.headers = [(k, v) for k, v in d.headers if k.lower() != "host"]
    query_slots(ctx, d, q)
    return d


CRAWL = ["/robots.txt", "/sitemap.xml", "/sitemap_index.xml", "/feed/", "/rss.xml", "/atom.xml", "/.well-known/security.txt",
         "/ads.txt", "/humans.txt", "/.well-known/openid-configuration", "/.well-known/apple-app-site-association", "/manifest.json"]  # fmt: skip


@scene("crawler", ("wellknown", "feeds", "links"), "query path")
def crawler(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    if variant == "links":
        path, q = paths.page(rng, rng.pick(paths.SITE_VARIANTS))
    else:
        path, q = rng.pick(CRAWL[:6] if variant == "feeds" else CRAWL[6:] + CRAWL[:2]), []
    d = start(ctx, "GET", path, "bot")
    query_slots(ctx, d, q)
    _path_slot(d)
    return d
