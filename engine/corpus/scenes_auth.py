"""Identity-provider traffic (`python -m engine.corpus --oauth-flows`): OAuth 2.0 and OpenID Connect requests as
clients and browsers send them to an authorisation server, and SAML responses posted back to a service.

Why: the default corpus has OAuth bodies only from its fixture files, and 401 of its training attacks (none of its
benign requests) carry a parameter whose value is an http URL to a loopback or localhost address; so the default
model blocks nearly every authorisation, token and logout request whose redirect URI is one (bench/RESULTS.md, "OAuth and
OpenID Connect requests with loopback redirect URIs"). RFC 8252 prescribes exactly those for native apps
(`http://127.0.0.1:PORT/`, `http://[::1]:PORT/`), and every development setup registers `http://localhost:3000/...`.
Redirect URIs here come in every registered form: https, loopback, localhost, a private-use scheme, `oob`.

A redirect URI is never a slot (an authorisation server never fetches it; it checks it against the registered
ones): payloads that ride on these requests (attacks.py's OAUTH_CARRIERS) go into `state`, `scope`, `login_hint`,
`nonce` and added parameters, so neither the scene nor its redirect URI tells the label.
"""

from __future__ import annotations

from engine.corpus import encode, vocab
from engine.corpus.draft import Body, Draft
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, query_slots, scene, start
from engine.corpus.scenes_text import form_draft
from engine.corpus.slots import Slot

B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
CALLBACKS = ("/callback", "/oauth2callback", "/auth/callback", "/api/auth/callback/keycloak", "/api/auth/callback/github",
             "/login/oauth2/code/google", "/signin-oidc", "/oidc/callback", "/auth/redirect", "/", "")  # fmt: skip
DEV_PORTS = (3000, 3001, 4200, 5000, 5173, 8000, 8080, 8081, 8443, 9000)
SCOPES = ("openid", "openid profile", "openid profile email", "openid email offline_access", "repo read:org gist",
          "read write", "orders:read orders:write", "https://www.example-apis.com/auth/drive.readonly")  # fmt: skip
IDP_PREFIXES = ("/oauth", "/oauth2", "/connect", "/realms/{realm}/protocol/openid-connect", "/o/oauth2", "/{tenant}/oauth2/v2.0",
                "/as", "/login/oauth", "/application/o")  # fmt: skip
VARIANTS = ("authorize", "authorize_native", "token_code", "token_native", "token_refresh", "token_client", "token_device",
            "token_json", "logout", "par", "register_native", "revoke", "callback", "saml_acs")  # fmt: skip
# the variants a payload in that position can ride on (attacks.scene_draft): parameters in the query, a form body
QUERY_VARIANTS = ("authorize", "authorize_native", "logout", "callback")
FORM_VARIANTS = ("token_code", "token_native", "token_refresh", "token_client", "token_device", "par", "revoke", "saml_acs")


def b64url(rng: Rng, n: int) -> str:
    return rng.alnum(n, B64URL)


def redirect_uri(rng: Rng, native: bool = False) -> str:
    """A redirect URI as clients register them: a loopback one with an ephemeral port for a native app (RFC 8252
    7.3), else https, a localhost development server, a private-use scheme or the out-of-band value."""
    path = rng.pick(CALLBACKS)
    if native or rng.chance(0.25):
        port = rng.randrange(1024, 65536) if rng.chance(0.7) else rng.pick(DEV_PORTS)
        host = rng.pick(["127.0.0.1", "127.0.0.1", "[::1]", "localhost"])
        return f"http://{host}:{port}{rng.pick(['/', '/callback', '/oauth2callback', '']) if native else path}"
    kind = rng.pick(["https", "https", "https", "localhost", "localhost", "scheme", "oob"])
    if kind == "https":
        return f"https://{vocab.domain(rng)}{path or '/'}"
    if kind == "localhost":
        return f"http://localhost:{rng.pick(DEV_PORTS)}{path}"
    if kind == "scheme":
        return f"{rng.pick(['com', 'io', 'org'])}.{vocab.slug(rng, 1)}.{rng.pick(['app', 'mobile', 'ios'])}:/{rng.pick(['oauth2redirect', 'callback', 'auth'])}"
    return "urn:ietf:wg:oauth:2.0:oob"


def endpoint(rng: Rng, name: str) -> str:
    prefix = rng.pick(IDP_PREFIXES).format(realm=vocab.slug(rng, 1), tenant=rng.pick(["common", "organizations", vocab.uuid(rng)]))
    return f"{prefix}/{name}"


def _pkce(rng: Rng) -> list[tuple[str, str, str]]:
    return [("code_challenge", b64url(rng, 43), "fixed"), ("code_challenge_method", "S256", "fixed")]


def _query(ctx: Ctx, d: Draft, pairs: list[tuple[str, str]], kinds: dict[str, str]) -> Draft:
    """Add `pairs` to the query; those `kinds` calls "fixed" (redirect URIs, codes, hints) are never slots."""
    query_slots(ctx, d, pairs, kinds)
    d.slots = [s for s in d.slots if s.kind != "fixed"]
    return d


def _token(ctx: Ctx, fields: list[tuple[str, str, str]], secret: bool, name: str = "token") -> Draft:
    """A POST from a program to the endpoint `name` (token, par, revoke): form fields, percent-encoded as form
    encoders write them; a confidential client's secret in the body (session.dress adds an Authorization header to
    some programs' requests, a Basic one among them: the other way clients authenticate)."""
    rng = ctx.rng
    d = start(ctx, "POST", endpoint(rng, name), "api")
    if secret and rng.chance(0.5):
        fields = fields + [("client_secret", b64url(rng, 24), "fixed")]
    d.body = Body("form", pairs=[(encode.browser(n), encode.browser(v)) for n, v, _ in fields])
    d.slots += [Slot("form", n, k) for n, _, k in fields if k != "fixed"]
    return d


@scene("idp", VARIANTS, "query form")
def idp(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    client_id = rng.pick([b64url(rng, 10), vocab.slug(rng, 1), vocab.uuid(rng), str(rng.randrange(10**9, 10**10))])
    state = ("state", b64url(rng, rng.randrange(8, 44)), "data")
    if variant in ("authorize", "authorize_native"):
        d = start(ctx, "GET", endpoint(rng, rng.pick(["authorize", "auth"])), "navigate")
        pairs = [("response_type", rng.pick(["code", "code", "code id_token"])), ("client_id", client_id),
                 ("redirect_uri", redirect_uri(rng, variant == "authorize_native")), ("scope", rng.pick(SCOPES)), state[:2]]  # fmt: skip
        pairs += [(n, v) for n, v, _ in _pkce(rng)] if variant == "authorize_native" or rng.chance(0.5) else []
        pairs += [("nonce", b64url(rng, 16))] if rng.chance(0.5) else []
        pairs += [("prompt", rng.pick(["consent", "login", "select_account"]))] if rng.chance(0.3) else []
        pairs += [("login_hint", vocab.email(rng))] if rng.chance(0.2) else []
        pairs += [("access_type", "offline")] if rng.chance(0.2) else []
        fixed = dict.fromkeys(("redirect_uri", "response_type", "code_challenge", "code_challenge_method"), "fixed")
        return _query(ctx, d, pairs, {**fixed, "state": "data", "nonce": "data", "login_hint": "email", "scope": "misc"})
    if variant in ("token_code", "token_native", "token_json"):
        fields = [("grant_type", "authorization_code", "fixed"), ("code", b64url(rng, rng.randrange(20, 44)), "fixed"),
                  ("redirect_uri", redirect_uri(rng, variant == "token_native"), "fixed"), ("client_id", client_id, "fixed")]  # fmt: skip
        if variant != "token_code" or rng.chance(0.4):
            fields.append(("code_verifier", b64url(rng, 43), "fixed"))
        if variant == "token_json":
            d = start(ctx, "POST", endpoint(rng, "token"), rng.pick(["fetch", "api"]))
            d.body = Body("json", obj={n: v for n, v, _ in fields})
            return d
        return _token(ctx, fields, secret=variant == "token_code")
    if variant == "token_refresh":
        return _token(ctx, [("grant_type", "refresh_token", "fixed"), ("refresh_token", b64url(rng, 40), "fixed"),
                            ("client_id", client_id, "fixed"), ("scope", rng.pick(SCOPES), "misc")][: rng.randrange(3, 5)], secret=rng.chance(0.5))  # fmt: skip
    if variant == "token_client":
        return _token(ctx, [("grant_type", "client_credentials", "fixed"), ("scope", rng.pick(SCOPES), "misc"),
                            ("audience", f"https://api.{vocab.domain(rng)}/", "fixed")][: rng.randrange(2, 4)], secret=True)  # fmt: skip
    if variant == "token_device":
        return _token(ctx, [("grant_type", "urn:ietf:params:oauth:grant-type:device_code", "fixed"), ("device_code", b64url(rng, 40), "fixed"),
                            ("client_id", client_id, "fixed")], secret=False)  # fmt: skip
    if variant == "logout":
        d = start(ctx, "GET", endpoint(rng, rng.pick(["logout", "end_session", "endsession"])), "navigate")
        pairs = [("post_logout_redirect_uri", redirect_uri(rng)), ("id_token_hint", f"eyJhbGciOiJSUzI1NiJ9.{b64url(rng, 60)}.{b64url(rng, 43)}"),
                 ("client_id", client_id), state[:2]][: rng.randrange(2, 5)]  # fmt: skip
        return _query(ctx, d, pairs, {"post_logout_redirect_uri": "fixed", "id_token_hint": "fixed", "client_id": "fixed", "state": "data"})
    if variant == "par":
        fields = [("response_type", "code", "fixed"), ("client_id", client_id, "fixed"), ("redirect_uri", redirect_uri(rng, rng.chance(0.5)), "fixed"),
                  ("scope", rng.pick(SCOPES), "misc"), state, *_pkce(rng)]  # fmt: skip
        return _token(ctx, fields, secret=True, name="par")
    if variant == "register_native":
        uris = [redirect_uri(rng, native=True) for _ in range(rng.randrange(1, 3))] + ([redirect_uri(rng)] if rng.chance(0.4) else [])
        d = start(ctx, "POST", endpoint(rng, "register"), "api")
        d.body = Body("json", obj={"client_name": f"{vocab.title(rng)} CLI", "redirect_uris": uris, "grant_types": ["authorization_code", "refresh_token"],
                                   "token_endpoint_auth_method": "none", "application_type": "native"})  # fmt: skip
        return d
    if variant == "revoke":
        return _token(ctx, [("token", b64url(rng, 32), "fixed"), ("token_type_hint", rng.pick(["refresh_token", "access_token"]), "fixed")],
                      secret=True, name=rng.pick(["revoke", "introspect"]))  # fmt: skip
    if variant == "callback":
        d = start(ctx, "GET", rng.pick([c for c in CALLBACKS if c not in ("/", "")]), "navigate")
        pairs = [("code", b64url(rng, 30)), state[:2]] if rng.chance(0.85) else [("error", "access_denied"), ("error_description", "The user denied the request"), state[:2]]
        return _query(ctx, d, pairs, {"code": "fixed", "error": "fixed", "error_description": "fixed", "state": "data"})
    # saml_acs: the browser posts the identity provider's response back to the service, RelayState where to go next
    import base64

    xml = (f'<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" ID="_{rng.hexid(40)}" Version="2.0" '
           f'IssueInstant="{vocab.date(rng)}T09:{rng.randrange(10, 59)}:05Z"><saml:Issuer xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion">'
           f'https://idp.{vocab.domain(rng)}/metadata</saml:Issuer><samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/>'
           f"</samlp:Status></samlp:Response>")  # fmt: skip
    d = form_draft(ctx, rng.pick(["/saml/acs", "/saml2/acs", "/Shibboleth.sso/SAML2/POST", "/sso/saml"]),
                   [("SAMLResponse", base64.b64encode(xml.encode()).decode(), "fixed"), ("RelayState", redirect_uri(rng), "fixed")], "RelayState")  # fmt: skip
    d.focus = None  # RelayState is where the browser goes next, not a text a payload hides in
    return d
