"""Parameter names and their benign values, by kind.

A parameter kind (`search`, `id`, `file`, `url`, `redirect`, ...) is a family of names a real app uses
for one sort of value. Benign requests fill them with ordinary values (`file=report-2024.pdf`,
`next=/account/orders`, `url=https://cdn.example.com/feed.xml`); attacks use the same names for their
payloads (`file=../../etc/passwd`). So a parameter name alone never decides a label, while the pairing
of name and value stays realistic.
"""

from __future__ import annotations

import base64
import json

from engine.corpus import hardneg, vocab
from engine.corpus.rand import Rng, Weighted

NAMES: dict[str, list[str]] = {
    "search": "q query search s keyword keywords term k searchTerm find".split(),
    "id": "id item pid product_id productId user_id uid cat category_id article post_id order_id ref no".split(),
    "name": "name username user login first_name last_name firstName lastName author display_name nickname nombre".split(),
    "text": "comment message body content description text bio note feedback title subject summary details".split(),
    "file": "file path filename page doc document template include lang dir folder download view theme layout style module".split(),
    "url": "url uri link target dest feed callback webhook_url image_url imageUrl src site endpoint source avatar".split(),
    "redirect": "next return_to redirect redirect_uri continue returnUrl goto r back success_url return ReturnUrl".split(),
    "host": "host ip domain hostname server addr address_ip node".split(),
    "email": "email mail from to reply_to cc contact_email".split(),
    "sort": "sort order orderby sort_by direction fields filter columns group".split(),
    "data": "data state payload session token obj config settings viewstate context prefs cart".split(),
    "code": "code expr expression formula calc script snippet input template_text pattern regex".split(),
    "misc": "lang locale currency v format limit offset page per_page type mode tab view_mode debug".split(),
}

# Which parameter kinds an attack class is usually sent in; the rest of the time any kind is used, so
# that no name is exclusive to attacks.
CLASS_KINDS: dict[str, dict[str, float]] = {
    "sqli": {"id": 4, "search": 3, "name": 2, "sort": 2, "email": 1},
    "xss": {"search": 4, "text": 3, "name": 2, "redirect": 1, "url": 1},
    "path_traversal": {"file": 8, "url": 1}, "rfi": {"file": 6, "url": 3},
    "cmdi": {"host": 4, "file": 2, "search": 1, "code": 1}, "code_injection": {"code": 4, "search": 1, "data": 1, "name": 1},
    "ssti": {"name": 3, "text": 2, "code": 2, "search": 1}, "ssrf": {"url": 6, "redirect": 1, "host": 1},
    "open_redirect": {"redirect": 6, "url": 2}, "xxe": {"data": 3, "text": 2, "code": 1},
    "ldapi": {"name": 5, "search": 2, "sort": 1}, "xpathi": {"name": 4, "search": 2, "id": 1},
    "nosqli": {"name": 3, "id": 2, "sort": 2, "search": 1}, "jndi": {"name": 2, "search": 2, "text": 1, "misc": 1},
    "deserialization": {"data": 8}, "format_string": {"name": 2, "search": 2, "text": 1},
    "crlf": {"redirect": 3, "misc": 2, "url": 1}, "ssi": {"text": 3, "name": 2, "search": 1},
    "mail_injection": {"email": 8, "name": 1}, "session_fixation": {"text": 3, "name": 2, "search": 1, "redirect": 1},
    "graphql": {"search": 1}, "prototype_pollution": {"data": 1},
}  # fmt: skip
ANY_KIND = Weighted({k: 1.0 for k in NAMES})


def kind_for(rng: Rng, attack_class: str | None) -> str:
    prefs = CLASS_KINDS.get(attack_class or "", None)
    if prefs is None or rng.chance(0.2):
        return ANY_KIND.draw(rng)
    return Weighted(prefs).draw(rng)


def name_for(rng: Rng, kind: str) -> str:
    return rng.pick(NAMES[kind])


def _search(rng: Rng) -> str:
    r = rng.random()
    if r < 0.3:
        return hardneg.fill(rng, rng.pick(hardneg.QUERIES))
    if r < 0.6:
        return " ".join(rng.pick(_TERMS) for _ in range(rng.randrange(1, 4)))
    if r < 0.8:
        return vocab.product(rng)
    return rng.call(lambda: vocab.full_name(rng), lambda: vocab.city(rng), lambda: f"{rng.pick(vocab.WORDS)} {rng.randrange(1990, 2027)}", lambda: vocab.title(rng))


_TERMS = vocab.ADJ + vocab.WORDS


def value(rng: Rng, kind: str) -> str:
    """An ordinary value for a parameter of this kind."""
    fn = VALUES.get(kind)
    return fn(rng) if fn else rng.pick(MISC)


def _file(rng: Rng) -> str:
    return rng.call(lambda: f"{vocab.slug(rng, 2)}.{rng.pick(['pdf', 'docx', 'csv', 'png', 'txt', 'html', 'md'])}", lambda: vocab.slug(rng, 1),
                    lambda: f"docs/{vocab.slug(rng, 1)}/{vocab.slug(rng, 2)}.md", lambda: f"reports/{rng.randrange(2015, 2027)}/q{rng.randrange(1, 5)}.xlsx",
                    lambda: rng.pick(["en", "de", "fr", "home", "about", "dark", "default", "invoice", "sidebar"]),
                    lambda: f"../{vocab.slug(rng, 1)}.css" if rng.chance(0.1) else "index")  # fmt: skip


def _url(rng: Rng) -> str:
    return rng.call(lambda: f"https://{vocab.domain(rng)}/{vocab.slug(rng, 2)}", lambda: f"https://cdn.{vocab.domain(rng).split('.', 1)[-1]}/img/{vocab.slug(rng, 1)}.jpg",
                    lambda: f"https://{vocab.domain(rng)}/feed.xml", lambda: f"https://hooks.{rng.pick(['slack.com', 'example.com', 'zapier.com'])}/services/{rng.alnum(24)}",
                    lambda: f"http://{vocab.domain(rng)}/")  # fmt: skip


def _redirect(rng: Rng) -> str:
    return rng.call(lambda: "/", lambda: "/account", lambda: "/account/orders", lambda: f"/{vocab.slug(rng, 2)}", lambda: f"/checkout?step={rng.randrange(1, 4)}",
                    lambda: f"https://{rng.pick(['www.example.com', 'app.acme.test', 'shop.example.net'])}/dashboard", lambda: "%2Fdashboard",
                    lambda: f"/{rng.pick(['de', 'fr', 'en'])}/")  # fmt: skip


def _data(rng: Rng) -> str:
    def blob() -> str:
        return json.dumps({"step": rng.randrange(1, 5), "items": [rng.randrange(1, 999)], "t": vocab.timestamp(rng)}, separators=(",", ":"))

    return rng.call(lambda: base64.b64encode(blob().encode()).decode(), lambda: rng.alnum(rng.randrange(16, 64)), blob, lambda: vocab.uuid(rng))


CODE = ["=SUM(A1:A10)", "^[a-z0-9_-]{3,16}$", "print('hello world')", "x => x * 2", "SELECT name FROM customers WHERE city = 'Berlin'",
        "{{ user.first_name }}", "(a|b)*c", "price > 10 and stock > 0", "=VLOOKUP(B2,Sheet2!A:C,3,FALSE)", "len(items) > 0"]  # fmt: skip
SORTS = ["created_at", "-created_at", "price", "-price", "name asc", "updated_at desc", "relevance", "title,author", "id:desc", "status:open"]
MISC = vocab.LANGS + vocab.CURRENCIES + ["json", "xml", "csv", "html", "grid", "list", "compact", "1", "true", "10", "25", "50", "2"]
VALUES = {
    "search": _search,
    "id": lambda rng: rng.call(lambda: str(rng.randrange(1, 10**6)), lambda: vocab.uuid(rng), lambda: vocab.slug(rng, 2), lambda: str(rng.randrange(1, 100)), lambda: rng.alnum(10).upper()),
    "name": lambda rng: rng.call(lambda: vocab.full_name(rng), lambda: vocab.first(rng), lambda: vocab.last(rng), lambda: vocab.username(rng)),
    "text": lambda rng: hardneg.fill(rng, rng.pick(hardneg.SENTENCES)) if rng.chance(0.5) else vocab.title(rng),
    "file": _file, "url": _url, "redirect": _redirect, "data": _data, "email": vocab.email,
    "host": lambda rng: rng.call(lambda: vocab.domain(rng), lambda: vocab.ipv4(rng), lambda: f"{vocab.domain(rng)}:{rng.pick([443, 8080, 8443])}", lambda: "example.com",
                                 lambda: f"2001:db8::{rng.randrange(1, 999)}"),
    "sort": lambda rng: rng.pick(SORTS), "code": lambda rng: rng.pick(CODE),
}  # fmt: skip


def benign_pairs(rng: Rng, n: int) -> list[tuple[str, str]]:
    """n ordinary (name, value) pairs of mixed kinds, for filling a query or a form around a focus value."""
    out = []
    for _ in range(n):
        kind = ANY_KIND.draw(rng)
        out.append((name_for(rng, kind), value(rng, kind)))
    return out
