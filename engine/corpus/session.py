"""What surrounds a request besides its profile: session cookies, credentials, Origin/Referer, and the
forwarding headers that load balancers and CDNs add in front of the gateway.

`dress(ctx, draft)` adds them with probabilities that depend only on the request's shape (mode, client),
never on its label, so cookies and tokens carry no label signal.
"""

from __future__ import annotations

import base64
import json

from engine.corpus import vocab
from engine.corpus.draft import Draft
from engine.corpus.rand import Rng

BROWSERS = ("chrome", "edge", "firefox", "safari")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(rng: Rng) -> str:
    """A well-formed HS256/RS256 JWT with an ordinary claim set and a random signature."""
    alg = rng.pick(["HS256", "RS256", "ES256"])
    head = {"alg": alg, "typ": "JWT"} if rng.chance(0.7) else {"alg": alg, "kid": rng.hexid(16), "typ": "JWT"}
    now = int(vocab.timestamp(rng))
    claims = {"sub": vocab.uuid(rng) if rng.chance(0.5) else str(rng.randrange(1, 10**6)), "iat": now, "exp": now + 3600}
    if rng.chance(0.5):
        claims["scope"] = rng.pick(["read:orders write:orders", "openid profile email", "api", "admin:read"])
    if rng.chance(0.4):
        claims["email"] = vocab.email(rng)
    sig = rng.randbytes(256 if alg == "RS256" else 32 if alg == "HS256" else 64)
    enc = lambda o: _b64url(json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode())  # noqa: E731
    return f"{enc(head)}.{enc(claims)}.{_b64url(sig)}"


def session_cookies(rng: Rng) -> list[tuple[str, str]]:
    """An application session plus the usual analytics and consent cookies of a site."""
    out: list[tuple[str, str]] = []
    name, value = rng.call(
        lambda: ("sessionid", rng.alnum(32)), lambda: ("PHPSESSID", rng.alnum(26)), lambda: ("JSESSIONID", rng.hexid(32).upper()),
        lambda: ("connect.sid", "s%3A" + rng.alnum(32) + "." + _b64url(rng.randbytes(32))), lambda: ("_session_id", rng.hexid(32)),
        lambda: ("__Host-session", _b64url(rng.randbytes(24))), lambda: ("laravel_session", _b64url(rng.randbytes(120))),
        lambda: ("ASP.NET_SessionId", rng.alnum(24)), lambda: ("session", _b64url(rng.randbytes(60)) + "." + rng.alnum(6)),
    )  # fmt: skip
    out.append((name, value))
    if rng.chance(0.5):
        out.append(("csrftoken", rng.alnum(32)))
    return out


def tracking_cookies(rng: Rng) -> list[tuple[str, str]]:
    out = []
    if rng.chance(0.6):
        out += [("_ga", f"GA1.1.{rng.randrange(10**9)}.{vocab.timestamp(rng)}"), ("_ga_" + rng.alnum(10, "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"), f"GS1.1.{vocab.timestamp(rng)}.{rng.randrange(1, 40)}.1.{vocab.timestamp(rng)}.0.0.0")]
    if rng.chance(0.3):
        out.append(("_fbp", f"fb.1.{vocab.timestamp(rng, ms=True)}.{rng.randrange(10**9)}"))
    if rng.chance(0.3):
        out.append(rng.call(lambda: ("cookieconsent_status", "dismiss"), lambda: ("theme", rng.pick(["dark", "light"])), lambda: ("lang", rng.pick(vocab.LANGS)),
                            lambda: ("OptanonConsent", f"isGpcEnabled%3D0%26datestamp%3D{vocab.date(rng)}%26version%3D202401.1.0".replace(":", "%3A").replace(" ", "+")),
                            lambda: ("ajs_anonymous_id", "%22" + vocab.uuid(rng) + "%22"), lambda: ("currency", rng.pick(vocab.CURRENCIES)),
                            lambda: ("tz", rng.pick(["Europe%2FBerlin", "America%2FNew_York", "Asia%2FTokyo"]))))  # fmt: skip
    return out


def authorization(rng: Rng, tokens: list[str]) -> tuple[str, str]:
    r = rng.random()
    if r < 0.55:
        return "Authorization", "Bearer " + (rng.pick(tokens) if tokens and rng.chance(0.15) else jwt(rng))
    if r < 0.7:
        user = f"{vocab.username(rng)}:{rng.alnum(rng.randrange(8, 20))}"
        return "Authorization", "Basic " + base64.b64encode(user.encode()).decode()
    if r < 0.85:
        return rng.pick(["X-API-Key", "X-Api-Key", "apikey", "X-Auth-Token"]), rng.pick(["sk_live_", "pk_", "key_", ""]) + rng.alnum(32)
    return "Authorization", rng.pick(["Token ", "token ", "Bearer "]) + rng.alnum(40)


def edge_headers(rng: Rng) -> list[tuple[str, str]]:
    ip = vocab.ipv4(rng, public=True)
    r = rng.random()
    if r < 0.35:
        return []
    if r < 0.6:
        chain = ip if rng.chance(0.7) else f"{ip}, {vocab.ipv4(rng, public=rng.chance(0.5))}"
        return [("X-Forwarded-For", chain), ("X-Forwarded-Proto", "https"), ("X-Forwarded-Port", "443")] + (
            [("X-Amzn-Trace-Id", f"Root=1-{rng.hexid(8)}-{rng.hexid(24)}")] if rng.chance(0.5) else [])
    if r < 0.8:
        return [("CF-Connecting-IP", ip), ("CF-IPCountry", rng.pick(vocab.COUNTRIES)), ("CF-Ray", f"{rng.hexid(16)}-{rng.pick(['FRA', 'LHR', 'IAD', 'NRT', 'GRU'])}"),
                ("X-Forwarded-For", ip), ("X-Forwarded-Proto", "https"), ("CDN-Loop", "cloudflare")]  # fmt: skip
    if r < 0.9:
        return [("Via", rng.pick(["1.1 varnish", "1.1 google", "2.0 nginx"])), ("X-Real-IP", ip), ("X-Request-ID", vocab.uuid(rng))]
    return [("X-Forwarded-For", ip), ("traceparent", f"00-{rng.hexid(32)}-{rng.hexid(16)}-01"), ("X-Request-Id", vocab.uuid(rng))]


def dress(rng: Rng, d: Draft, tokens: list[str] = (), logged_in: float | None = None, auth: float | None = None) -> Draft:
    """Add cookies, credentials, Origin/Referer and edge headers to a draft, by its shape only. A bare client's
    request (profiles.bare) stays as it is: nothing stands between a balancer's check and the server."""
    if d.client == "bare":
        return d
    browser = d.client in BROWSERS
    if browser:
        p_session = 0.4 if logged_in is None else logged_in
        if d.mode in ("navigate", "form", "fetch") and rng.chance(0.6) or d.mode == "asset" and rng.chance(0.4):
            d.cookies += tracking_cookies(rng)
        if rng.chance(p_session) and d.mode != "asset" or d.mode == "asset" and rng.chance(0.2):
            d.cookies += session_cookies(rng)
        if d.mode in ("form", "fetch") and d.method != "GET":
            d.extra.insert(0, ("Origin", f"https://{d.host}"))
        has_referer = any(k.lower() == "referer" for k, _ in d.extra)
        if not has_referer and (d.mode != "navigate" or rng.chance(0.55)):
            d.extra.append(("Referer", f"https://{d.host}/{vocab.slug(rng, 2) if rng.chance(0.7) else ''}"))
        if d.mode == "fetch" and rng.chance(0.25):
            d.extra.append(("X-Requested-With", "XMLHttpRequest"))
        if d.mode == "fetch" and rng.chance(0.2):
            d.extra.append((rng.pick(["X-CSRF-Token", "X-XSRF-TOKEN", "X-CSRFToken"]), rng.alnum(40)))
    p_auth = (0.5 if d.mode == "api" else 0.12 if d.mode == "fetch" else 0.0) if auth is None else auth
    if rng.chance(p_auth):
        d.extra.append(authorization(rng, list(tokens)))
    if d.body is not None and d.client in ("go", "java", "curl", "okhttp", "node", "dotnet") and rng.chance(0.06):
        d.extra.append(("Transfer-Encoding", "chunked"))  # streamed uploads: a plain chunked body is ordinary
    d.edge = edge_headers(rng)
    return d
