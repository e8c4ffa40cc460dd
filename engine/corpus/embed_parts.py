"""The parts of attack embedding that fill more than one value: request targets, headers, raw header
lines, whole raw requests, bodies and uploaded files (see engine.corpus.attacks)."""

from __future__ import annotations

import os
import re

from engine.canonical import canonical_text

from engine.corpus import encode, params, paths, raw, session, vocab
from engine.corpus.raw import visible_anomaly
from engine.corpus.draft import Body, Draft, Part
from engine.corpus.scenes import Ctx, all_scenes, start
from engine.corpus.slots import Slot, put
from engine.features import Features


def url(ctx: Ctx, target: str, query_only: bool = False) -> Draft:
    """A request for a path or path+query exactly as the source had it (a leading / added when missing:
    a request target needs one), sometimes under a site prefix or followed by ordinary parameters."""
    rng = ctx.rng
    path, sep, query = target.partition("?")
    if query_only:
        base = all_scenes()[rng.pick(["page", "api_read", "search"])]
        d = base.make(ctx, rng.pick(base.usable(ctx.split)))
        d.query.insert(rng.randrange(len(d.query) + 1), (query, None))
        return session.dress(rng, d, ctx.pools.tokens)
    if not path.startswith("/"):
        prefix = rng.pick(["/", "/", "/", "/app/", "/blog/", "/site/", "/portal/"]) if not path.startswith(("http:", "https:")) else "/"
        path = prefix + path
    mode = rng.pick(["navigate", "navigate", "api", "bot", "fetch"])
    if ctx.pools.bare_clients and rng.chance(0.05):  # probes sent bare, as the benign checks are (profiles.bare)
        mode = "bare"
    d = start(ctx, "HEAD" if rng.chance(0.05) else "GET", path, mode)
    if sep:
        d.query.append((query, None))
        if rng.chance(0.2):
            d.query += [(encode.browser(k), encode.browser(v)) for k, v in params.benign_pairs(rng, rng.randrange(1, 3))]
    elif rng.chance(0.15):
        d.query += [(encode.browser(k), encode.browser(v)) for k, v in params.benign_pairs(rng, 1)]
    return session.dress(rng, d, ctx.pools.tokens)


def header_param(ctx: Ctx, d: Draft, payload: str) -> None:
    """A parameter-style payload in a header: a Referer URL's query, the User-Agent, X-Forwarded-For or a
    custom application header."""
    rng = ctx.rng
    r = rng.random()
    if r < 0.3:
        name = params.name_for(rng, params.kind_for(rng, None))
        d.set_header("Referer", f"https://{d.host or paths.host(rng)}/{vocab.slug(rng, 2)}?{name}={encode.query_value(rng, payload)}")
    elif r < 0.55:
        d.set_header("User-Agent", encode.header_value(payload))
    elif r < 0.7 and _shown("X-Forwarded-For", payload):
        d.set_header(rng.pick(["X-Forwarded-For", "X-Real-IP"]), encode.header_value(payload))
    elif r < 0.7:
        d.set_header(rng.pick(["True-Client-IP", "X-Client-IP"]), encode.header_value(payload))
    else:
        put(rng, d, Slot("header", rng.pick(["X-Api-Version", "X-Client-Id", "X-User", "X-Search", "X-Tenant", "X-Device-Id", "X-Locale",
                                             "X-Session", "X-Custom-Header", "X-Callback-Url", "X-Request-Source"])), payload)  # fmt: skip


def _shown(name: str, value: str) -> bool:
    """Whether the canonical text keeps this header: forwarding headers with ordinary-looking values are
    left out of it, and a payload there would be an attack the model cannot see."""
    return canonical_text(Features.build(headers=[(name, encode.header_value(value))])) != canonical_text(Features.build())


def named_header(d: Draft, name: str, value: str) -> None:
    if name.lower() == "cookie":
        d.cookies = [("", value)] + d.cookies
        return
    d.set_header(name, value)


def header_lines(d: Draft, text: str) -> None:
    """Raw header lines (smuggling mutations): added as parsed, a plain Transfer-Encoding replaced."""
    for name, value in raw.header_lines(text):
        d.extra.append((name, value))


def request(ctx: Ctx, text: str) -> Draft | None:
    """A raw request as sent. None when what makes it an attack does not survive parsing into a request
    (a bad HTTP version, a missing or duplicated Host, a lower-case method): such a record would teach
    that an ordinary request is an attack."""
    rng = ctx.rng
    req = raw.parse_request(text)
    hdrs = list(req.headers)
    d = Draft(method=req.method, path=req.target.partition("?")[0] if req.target.startswith("/") else req.target, headers=hdrs, mode="api")
    if req.target.startswith("/") and req.query:
        d.query.append((req.query, None))
    d.body = Body("raw", data=req.body, ctype="") if req.body else None
    d.auto_length = False  # the raw request carries its own Content-Length (or none, or two)
    if not visible_anomaly(req):
        return None
    if rng.chance(0.5):
        host = paths.host(rng)
        d.headers = [(k, host if k.lower() == "host" and v in ("example.com", "vulnerable-website.com") else v) for k, v in d.headers]
    if rng.chance(0.4) and not any(k.lower() == "user-agent" for k, _ in d.headers):
        d.headers.append(("User-Agent", rng.pick(["curl/8.5.0", "python-requests/2.31.0", "Go-http-client/1.1", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"])))
    return d


def sniff(payload: str) -> str:
    s = payload.lstrip()
    if s.startswith("<?php") or s.startswith("<?="):
        return "text/plain"
    if s.startswith("<"):
        return "xml"
    if s[:1] in "{[":
        return "json"
    if s.startswith("!!") or re.match(r"^[\w-]+:\s", s) and "!!" in s:
        return "yaml"
    if re.match(r"^[\w\[\]$.%-]+=", s):
        return "form"
    return "text/plain"


# paths that benign requests with such bodies use too (scenes_api, scenes_text, scenes_forms)
BODY_PATHS = {"xml": ["/ws/OrderService", "/soap", "/api/v1/import/xml", "/xmlrpc.php", "/api/orders.xml", "/services/CustomerService.asmx"],
              "json": ["/api/v1/users", "/api/v2/orders", "/api/import", "/api/v1/bulk", "/api/settings", "/graphql", "/api/messages/send", "/api/v1/sessions"],
              "yaml": ["/api/config/app", "/api/settings/import/main", "/api/pipelines/main"], "form": ["/login", "/contact", "/register", "/search"],
              "text/plain": ["/index.php", "/page.php", "/index.php?page=php://input", "/view.php?file=php://input"]}  # fmt: skip
CTYPES = {"xml": ["application/xml", "text/xml; charset=utf-8", "application/soap+xml"], "json": ["application/json"], "yaml": ["application/x-yaml", "text/plain"],
          "form": ["application/x-www-form-urlencoded"], "text/plain": ["text/plain", "application/x-www-form-urlencoded"]}  # fmt: skip


def body(ctx: Ctx, payload: str) -> Draft:
    rng = ctx.rng
    kind = sniff(payload)
    target = rng.pick(BODY_PATHS[kind])
    d = start(ctx, rng.pick(["POST", "POST", "PUT"]), target.partition("?")[0], rng.pick(["api", "fetch"]))
    if "?" in target:
        d.query.append((target.partition("?")[2], None))
    d.body = Body("raw", data=payload, ctype=rng.pick(CTYPES[kind]))
    return session.dress(rng, d, ctx.pools.tokens)


_EXT = [("<?php", "php"), ("<?=", "php"), ("<script language", "php"), ("push graphic-context", "mvg"), ("%!PS", "eps"), ("<svg", "svg"),
        ("<!--#", "shtml"), ("<configuration", "config"), ("AddType", "htaccess"), ("<xsl:", "xsl"), ("<%", "asp")]  # fmt: skip
_LYING = {"php": ["shell.php", "image.php.jpg", "avatar.phtml", "shell.php5", "x.pHp"], "mvg": ["exploit.mvg", "image.png"], "eps": ["doc.eps", "image.jpg"],
          "svg": ["image.svg", "logo.svg"], "shtml": ["page.shtml", "index.stm"], "config": ["web.config"], "htaccess": [".htaccess"],
          "xsl": ["style.xsl", "transform.xslt"], "asp": ["shell.asp", "x.aspx"]}  # fmt: skip


def upload(ctx: Ctx, payload: str, source_path: str) -> Draft:
    """An uploaded file with this content, named as the source named it (or as such files are named)."""
    rng = ctx.rng
    sc = all_scenes()[rng.pick(["upload", "upload", "multipart_form"])]
    d = sc.make(ctx, rng.pick(sc.usable(ctx.split)))
    base = os.path.basename(source_path)
    if "." not in base:
        ext = next((e for marker, e in _EXT if marker in payload[:400]), "txt")
        base = rng.pick(_LYING.get(ext, ["file.txt"]))
    ctype = rng.pick(["image/jpeg", "image/png", "application/octet-stream", "text/plain", "application/x-php"])
    file_slot = next((s for s in d.slots if s.where == "file"), None)
    if file_slot is None:
        d.body.parts.append(Part("file", payload, base, ctype))
    else:
        part = d.body.parts[file_slot.key]
        part.content, part.filename, part.ctype = payload, base, ctype
    return session.dress(rng, d, ctx.pools.tokens)
