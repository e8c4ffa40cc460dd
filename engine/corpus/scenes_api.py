"""API and form scenes: REST reads with filters, pagination and sorting, JSON writes of realistic shapes,
browser form posts, multipart forms and file uploads."""

from __future__ import annotations

from engine.corpus import params, paths, vocab
from engine.corpus.draft import Body, Draft
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, guess_kind, query_slots, scene, start
from engine.corpus.slots import Slot, json_leaves

LEAF_KINDS = {"description": "text", "bio": "text", "note": "text", "notes": "text", "message": "text", "comment": "text",
              "first_name": "name", "last_name": "name", "display_name": "name", "customer_name": "name", "title": "text",
              "webhook_url": "url", "website": "url", "avatar_url": "url", "referrer": "url", "query": "search", "city": "name"}  # fmt: skip


def _api_mode(ctx: Ctx) -> str:
    return "api" if ctx.rng.chance(0.55) else "fetch"


READ_VARIANTS = ("rest_filters", "jsonapi", "odata", "lucene", "cursor", "fields_expand")


@scene("api_read", READ_VARIANTS, "query path")
def api_read(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    d = start(ctx, "GET", paths.api_collection(rng), _api_mode(ctx))
    if variant == "rest_filters":
        q = [("status", rng.pick(["open", "closed", "active", "pending", "shipped"])), ("page", str(rng.randrange(1, 50))),
             ("per_page", rng.pick(["20", "50", "100"])), ("sort", params.value(rng, "sort")), ("created_after", vocab.date(rng))]  # fmt: skip
        q = rng.sample(q, rng.randrange(1, 6))
    elif variant == "jsonapi":
        q = [("filter[status]", rng.pick(["published", "draft"])), ("page[number]", str(rng.randrange(1, 9))), ("page[size]", "25"),
             ("include", rng.pick(["author", "author,comments", "tags"])), ("sort", "-" + rng.pick(["created", "title"]))]  # fmt: skip
        q = q[: rng.randrange(2, 6)]
    elif variant == "odata":
        q = [("$filter", rng.pick([f"Price gt {rng.randrange(5, 99)} and Category eq '{rng.pick(vocab.WORDS).title()}'", f"startswith(Name, '{rng.pick(vocab.WORDS)}')",
                                   f"Country eq '{rng.pick(vocab.COUNTRIES)}' or City eq '{vocab.city(rng)}'", "Status ne 'Deleted'"])),
             ("$top", str(rng.pick([10, 20, 50]))), ("$orderby", rng.pick(["Name asc", "CreatedAt desc"])), ("$select", "Id,Name,Price")]  # fmt: skip
        q = q[: rng.randrange(1, 5)]
    elif variant == "lucene":
        q = [("q", rng.pick([f"title:{rng.pick(vocab.WORDS)} AND status:open", f'author:"{vocab.full_name(rng)}"', f"tags:({rng.pick(vocab.WORDS)} OR {rng.pick(vocab.WORDS)})",
                             f"price:[{rng.randrange(1, 50)} TO {rng.randrange(51, 500)}]"])), ("size", "20"), ("from", str(rng.randrange(0, 200, 20)))]  # fmt: skip
    elif variant == "cursor":
        q = [("limit", rng.pick(["25", "50", "100"])), ("cursor", rng.alnum(24)), ("since", vocab.timestamp(rng))][: rng.randrange(1, 4)]
    else:
        q = [("fields", ",".join(rng.sample(["id", "name", "email", "created_at", "status", "total", "owner"], 3))), ("expand", rng.pick(["owner", "items.product", "customer"])),
             ("lang", rng.pick(vocab.LANGS))][: rng.randrange(1, 4)]  # fmt: skip
    query_slots(ctx, d, q, {"q": "search", "$filter": "sort", "filter[status]": "sort", "cursor": "data"})
    segs = d.path.split("/")
    d.slots.append(Slot("path", len(segs) - 1, "id"))
    return d


@scene("api_item", ("get", "delete", "nested", "export"), "path query", keep=("get", "delete"))
def api_item(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    path = paths.api_item(rng)
    if variant == "export":
        path += rng.pick([".json", ".csv", "/export", "/download"])
    d = start(ctx, "DELETE" if variant == "delete" else "GET", path, _api_mode(ctx))
    segs = d.path.split("/")
    d.slots.append(Slot("path", len(segs) - 1 if variant != "nested" else len(segs) - 2, "id"))
    if variant == "export":
        query_slots(ctx, d, [("format", rng.pick(["csv", "xlsx", "json"])), ("tz", rng.pick(["UTC", "Europe/Berlin"]))][: rng.randrange(0, 3)])
    return d


def _address(rng: Rng) -> dict:
    return {"line1": vocab.street(rng), "city": vocab.city(rng), "postal_code": vocab.postcode(rng), "country": rng.pick(vocab.COUNTRIES)}


def shape(rng: Rng, variant: str) -> dict:
    """A realistic JSON object of one kind (the body of a write)."""
    if variant == "user_profile":
        return {"user": {"first_name": vocab.first(rng), "last_name": vocab.last(rng), "email": vocab.email(rng), "phone": vocab.phone(rng),
                         "bio": params.value(rng, "text"), "address": _address(rng), "preferences": {"newsletter": rng.chance(0.5), "language": rng.pick(vocab.LANGS)}}}
    if variant == "order":
        items = [{"sku": rng.alnum(8).upper(), "quantity": rng.randrange(1, 5), "price": float(vocab.price(rng)), "name": vocab.product(rng)} for _ in range(rng.randrange(1, 6))]
        return {"customer_id": rng.randrange(1, 10**6), "items": items, "shipping_address": _address(rng), "coupon": rng.pick(["", "SPRING10", "WELCOME"]),
                "notes": params.value(rng, "text") if rng.chance(0.4) else ""}
    if variant == "product":
        return {"name": vocab.product(rng), "description": params.value(rng, "text"), "price": {"amount": vocab.price(rng), "currency": rng.pick(vocab.CURRENCIES)},
                "tags": [rng.pick(vocab.WORDS) for _ in range(rng.randrange(0, 4))], "attributes": {"color": rng.pick(["red", "navy", "black"]), "size": rng.pick(["S", "M", "L", "XL"])}}
    if variant == "settings":
        return {"theme": rng.pick(["dark", "light", "system"]), "timezone": rng.pick(["UTC", "Europe/Paris", "America/Chicago"]), "locale": rng.pick(vocab.LANGS),
                "notifications": {"email": rng.chance(0.5), "push": rng.chance(0.5)}, "webhook_url": params.value(rng, "url")}
    if variant == "event":
        return {"event": rng.pick(["page_view", "signup", "add_to_cart", "checkout_started"]), "anonymousId": vocab.uuid(rng), "timestamp": vocab.date(rng),
                "properties": {"url": f"https://{paths.host(rng)}/{vocab.slug(rng)}", "title": vocab.title(rng), "referrer": params.value(rng, "url")}}
    if variant == "invoice":
        lines = [{"description": vocab.product(rng), "qty": rng.randrange(1, 9), "unit_price": vocab.price(rng)} for _ in range(rng.randrange(1, 8))]
        return {"number": f"INV-{rng.randrange(2019, 2027)}-{rng.randrange(1, 9999):04d}", "date": vocab.date(rng), "lines": lines,
                "customer": {"name": vocab.full_name(rng), "vat_id": rng.pick(vocab.COUNTRIES) + str(rng.randrange(10**8, 10**9)), "email": vocab.email(rng)}, "notes": params.value(rng, "text")}
    if variant == "k8s_config":
        env = [{"name": rng.pick(["LOG_LEVEL", "PORT", "REGION", "FEATURE_FLAGS"]), "value": rng.pick(["info", "8080", "eu-west-1", "beta,search"])} for _ in range(rng.randrange(1, 4))]
        return {"metadata": {"name": vocab.slug(rng, 2), "labels": {"app": vocab.slug(rng, 1), "tier": "web"}},
                "spec": {"replicas": rng.randrange(1, 6), "template": {"containers": [{"name": "app", "image": f"registry.example.com/{vocab.slug(rng, 1)}:{rng.randrange(1, 40)}.0", "env": env}]}}}
    if variant == "login_api":
        return {rng.pick(["username", "email"]): rng.pick([vocab.username(rng), vocab.email(rng)]), "password": rng.alnum(rng.randrange(8, 20)), "remember": rng.chance(0.5)}
    return {"query": params.value(rng, "search"), "filters": {"category": [rng.pick(vocab.WORDS)], "price": {"gte": rng.randrange(0, 50)}},
            "page": rng.randrange(1, 9), "sort": [{"field": rng.pick(["price", "date"]), "order": rng.pick(["asc", "desc"])}]}


WRITE_VARIANTS = ("user_profile", "order", "product", "settings", "event", "invoice", "k8s_config", "login_api", "search_api")


def json_slots(d: Draft) -> None:
    for path in json_leaves(d.body.obj):
        key = next((k for k in reversed(path) if isinstance(k, str)), "")
        d.slots.append(Slot("json", path, LEAF_KINDS.get(key, guess_kind(key))))


@scene("api_write", WRITE_VARIANTS, "json path")
def api_write(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    method = rng.pick(["POST", "POST", "PUT", "PATCH"])
    res = {"user_profile": "users", "order": "orders", "product": "products", "settings": "settings", "event": "events", "invoice": "invoices",
           "k8s_config": "deployments", "login_api": "sessions", "search_api": "search"}[variant]  # fmt: skip
    path = paths.api_collection(rng, res) if method == "POST" else paths.api_item(rng, res)
    d = start(ctx, method, path, _api_mode(ctx))
    d.body = Body("json", obj=shape(rng, variant), indent=2 if rng.chance(0.1) else None, ascii=rng.chance(0.2))
    if rng.chance(0.1):
        d.body.ctype = rng.pick(["application/json; charset=utf-8", "application/vnd.api+json", "text/plain;charset=UTF-8"])
    json_slots(d)
    return d


def _xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@scene("xml_post", ("soap", "xmlrpc", "order_xml", "atom_entry"), "raw")
def xml_post(ctx: Ctx, variant: str) -> Draft:
    """Benign XML bodies, so that an XML body alone never means XXE."""
    rng = ctx.rng
    v = lambda kind: _xml_escape(params.value(rng, kind))  # noqa: E731
    if variant == "soap":
        op = rng.pick(["GetOrderStatus", "CreateCustomer", "SearchProducts"])
        xml = (f'<?xml version="1.0" encoding="utf-8"?>\n<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">\n  <soap:Body>\n'
               f'    <{op} xmlns="http://example.com/ws/">\n      <id>{rng.randrange(1, 10**6)}</id>\n      <name>{v("name")}</name>\n'
               f'      <comment>{v("text")}</comment>\n    </{op}>\n  </soap:Body>\n</soap:Envelope>\n')  # fmt: skip
        path, ctype = rng.pick(["/ws/OrderService", "/soap", "/services/CustomerService.asmx"]), "text/xml; charset=utf-8"
    elif variant == "xmlrpc":
        xml = (f'<?xml version="1.0"?>\n<methodCall><methodName>{rng.pick(["wp.getPosts", "blogger.getUsersBlogs", "system.listMethods"])}</methodName>'
               f'<params><param><value><string>{v("name")}</string></value></param><param><value><int>{rng.randrange(1, 99)}</int></value></param></params></methodCall>')  # fmt: skip
        path, ctype = "/xmlrpc.php", "text/xml"
    elif variant == "order_xml":
        lines = "".join(f'<line sku="{rng.alnum(8).upper()}" qty="{rng.randrange(1, 9)}"><name>{_xml_escape(vocab.product(rng))}</name></line>' for _ in range(rng.randrange(1, 6)))
        xml = f'<?xml version="1.0" encoding="UTF-8"?>\n<order id="{rng.randrange(1, 10**6)}"><customer><name>{v("name")}</name><email>{v("email")}</email></customer><lines>{lines}</lines><note>{v("text")}</note></order>'
        path, ctype = rng.pick(["/api/orders.xml", "/edi/inbound", "/api/v1/import/xml"]), "application/xml"
    else:
        xml = (f'<?xml version="1.0" encoding="utf-8"?>\n<entry xmlns="http://www.w3.org/2005/Atom"><title>{_xml_escape(vocab.title(rng))}</title>'
               f'<author><name>{v("name")}</name></author><content type="html">{v("text")}</content></entry>')  # fmt: skip
        path, ctype = rng.pick(["/atom/entries", "/api/feed/entries"]), "application/atom+xml"
    d = start(ctx, "POST", path, "api")
    d.body = Body("raw", data=xml, ctype=ctype)
    d.slots.append(Slot("raw", None, "text"))
    d.focus = d.slots[-1]
    return d
