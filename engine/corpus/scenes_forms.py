"""Form scenes: urlencoded browser form posts (login, signup, contact, checkout, comments, ...),
multipart forms with text parts, and file uploads with realistic file contents."""

from __future__ import annotations

from engine.corpus import encode, images, params, vocab
from engine.corpus.draft import Body, Draft, Part, boundary
from engine.corpus.rand import Rng, Weighted
from engine.corpus.scenes import Ctx, scene, start
from engine.corpus.slots import Slot


def _fields(rng: Rng, variant: str) -> tuple[str, list[tuple[str, str, str]]]:
    """(path, [(name, value, kind)]) of one kind of HTML form."""
    csrf = [("csrfmiddlewaretoken" if rng.chance(0.5) else "_token", rng.alnum(40), "data")]
    if variant == "login":
        return rng.pick(["/login", "/account/login", "/signin", "/users/sign_in", "/wp-login.php"]), [
            (rng.pick(["username", "email", "login", "log"]), rng.pick([vocab.username(rng), vocab.email(rng)]), "name"),
            (rng.pick(["password", "pwd", "pass"]), rng.alnum(rng.randrange(8, 18)) + rng.pick(["", "!", "#1", "$"]), "misc"),
            ("remember_me", "on", "misc"), ("next", params.value(rng, "redirect"), "redirect")] + csrf  # fmt: skip
    if variant == "signup":
        pw = rng.alnum(12)
        return rng.pick(["/signup", "/register", "/account/create"]), [("name", vocab.full_name(rng), "name"), ("email", vocab.email(rng), "email"),
                ("password", pw, "misc"), ("password_confirmation", pw, "misc"), ("terms", "on", "misc"), ("newsletter", rng.pick(["0", "1"]), "misc")] + csrf  # fmt: skip
    if variant == "contact":
        return rng.pick(["/contact", "/contact-us", "/support/contact"]), [("name", vocab.full_name(rng), "name"), ("email", vocab.email(rng), "email"),
                ("phone", vocab.phone(rng), "misc"), ("subject", vocab.title(rng), "text"), ("message", params.value(rng, "text"), "text")] + csrf  # fmt: skip
    if variant == "checkout":
        return rng.pick(["/checkout", "/checkout/shipping", "/cart/checkout"]), [("first_name", vocab.first(rng), "name"), ("last_name", vocab.last(rng), "name"),
                ("address1", vocab.street(rng), "misc"), ("address2", rng.pick(["", f"Apt {rng.randrange(1, 90)}", "c/o " + vocab.full_name(rng)]), "misc"),
                ("city", vocab.city(rng), "name"), ("zip", vocab.postcode(rng), "misc"), ("country", rng.pick(vocab.COUNTRIES), "misc"),
                ("phone", vocab.phone(rng), "misc"), ("email", vocab.email(rng), "email"), ("shipping_method", rng.pick(["standard", "express", "pickup"]), "misc")]  # fmt: skip
    if variant == "comment":
        return "/wp-comments-post.php", [("comment", params.value(rng, "text"), "text"), ("author", vocab.full_name(rng), "name"), ("email", vocab.email(rng), "email"),
                ("url", rng.pick(["", params.value(rng, "url")]), "url"), ("submit", "Post Comment", "misc"), ("comment_post_ID", str(rng.randrange(1, 9000)), "id"),
                ("comment_parent", str(rng.pick([0, 0, rng.randrange(1, 900)])), "id")]  # fmt: skip
    if variant == "newsletter":
        return rng.pick(["/newsletter/subscribe", "/subscribe"]), [("email", vocab.email(rng), "email"), ("list_id", rng.hexid(10), "id"), ("source", rng.pick(["footer", "popup"]), "misc")]
    if variant == "password_reset":
        return "/password/reset", [("email", vocab.email(rng), "email")] + csrf
    if variant == "survey":
        qs = [(f"q{i}", rng.pick(["1", "2", "3", "4", "5", "yes", "no", params.value(rng, "text")]), "text" if i % 4 == 0 else "misc") for i in range(1, rng.randrange(8, 40))]
        return f"/survey/{rng.randrange(1, 300)}/submit", qs + [("respondent", vocab.email(rng), "email")]
    if variant == "profile_update":
        return rng.pick(["/settings/profile", "/account/edit", "/user/profile"]), [("display_name", vocab.full_name(rng), "name"), ("bio", params.value(rng, "text"), "text"),
                ("website", params.value(rng, "url"), "url"), ("location", vocab.city(rng), "name"), ("twitter", "@" + vocab.username(rng), "name")] + csrf  # fmt: skip
    return "/search", [("q", params.value(rng, "search"), "search"), ("category", vocab.slug(rng, 1), "misc"), ("sort", params.value(rng, "sort"), "sort")]


FORM_VARIANTS = ("login", "signup", "contact", "checkout", "comment", "newsletter", "password_reset", "survey", "profile_update", "search_post")


@scene("form_post", FORM_VARIANTS, "form")
def form_post(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    path, fields = _fields(rng, variant)
    d = start(ctx, "POST", path, "form" if rng.chance(0.85) else "api")
    d.body = Body("form", pairs=[(encode.browser(n), encode.query_value(rng, v, "browser")) for n, v, _ in fields])
    d.slots += [Slot("form", n, k) for n, _, k in fields]
    return d


def pdf(rng: Rng, size: int) -> bytes:
    head = f"%PDF-1.{rng.randrange(3, 8)}\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n3 0 obj\n<< /Length {size} /Filter /FlateDecode >>\nstream\n"
    return head.encode("latin-1") + rng.randbytes(max(16, size)) + b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"


def csv_text(rng: Rng, rows: int) -> str:
    out = ["id,name,email,city,amount,date"]
    for i in range(rows):
        name = vocab.full_name(rng)
        out.append(f'{i + 1},"{name}",{vocab.email(rng)},"{vocab.city(rng)}",{vocab.price(rng)},{vocab.date(rng)}')
    return "\n".join(out) + "\n"


IMAGE_FORMATS = Weighted({"png": 0.36, "jpeg": 0.36, "svg": 0.15, "gif": 0.07, "ico": 0.06})


def file_part(ctx: Ctx, kind: str, field: str = "file") -> Part:
    rng = ctx.rng
    size = int(rng.loguniform(400, 60_000))
    name = vocab.slug(rng, rng.randrange(1, 3))
    if kind == "image":
        if ctx.pools.image_uploads:
            fmt = IMAGE_FORMATS.draw(rng)
        else:  # the default corpus: bare PNG and JPEG bytes
            fmt = "bare png" if rng.chance(0.5) else "bare jpeg"
        if fmt in ("png", "bare png"):
            data = (images.png if fmt == "png" else images.bare_png)(rng, size)
            return Part(field, data, f"{rng.pick([name, 'IMG_' + str(rng.randrange(1000, 9999)), 'Screenshot 2024-0' + str(rng.randrange(1, 9)) + '-1' + str(rng.randrange(9)) + ' at 10.2' + str(rng.randrange(9)) + '.31'])}.png", "image/png")
        if fmt in ("jpeg", "bare jpeg"):
            data = (images.jpeg if fmt == "jpeg" else images.bare_jpeg)(rng, size)
            return Part(field, data, f"{rng.pick([name, 'DSC_' + str(rng.randrange(1000, 9999)), 'photo'])}.{rng.pick(['jpg', 'jpeg', 'JPG'])}", "image/jpeg")
        if fmt == "svg":  # icons and logos: XML, benign unless something in it runs
            return Part(field, images.svg(rng), f"{rng.pick([name, 'logo', 'icon-' + name, name + '-symbolic'])}.svg", "image/svg+xml")
        if fmt == "gif":
            return Part(field, images.gif(rng, size), f"{rng.pick([name, 'animation', 'loading'])}.gif", "image/gif")
        return Part(field, images.ico(rng), rng.pick(["favicon.ico", f"{name}.ico"]), rng.pick(["image/x-icon", "image/vnd.microsoft.icon"]))
    if kind == "pdf":
        return Part(field, pdf(rng, size), f"{rng.pick([name, 'invoice-' + str(rng.randrange(100, 999)), 'CV_' + vocab.last(rng)])}.pdf", "application/pdf")
    if kind == "csv":
        return Part(field, csv_text(rng, rng.randrange(2, 400)), f"{name}.csv", rng.pick(["text/csv", "application/vnd.ms-excel", "application/octet-stream"]))
    if kind == "text":
        return Part(field, "\n".join(params.value(rng, "text") for _ in range(rng.randrange(1, 30))), f"{name}.txt", "text/plain")
    code = ctx.pools.text(rng, ("code", "shell", "sql", "config"))
    ext = {"sql": "sql", "shell": rng.pick(["sh", "ps1"]), "config": rng.pick(["yaml", "json", "conf", "ini"])}.get(code["kind"], rng.pick(["py", "js", "php", "go", "rs", "txt"]))
    return Part(field, code["text"], f"{name}.{ext}", rng.pick(["application/octet-stream", "text/plain", "text/x-" + ext]))


UPLOAD_VARIANTS = ("image", "pdf", "csv", "text", "code", "avatar_api")


@scene("upload", UPLOAD_VARIANTS, "multipart file", keep=("image",))
def upload(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    path = rng.pick(["/upload", "/api/v1/files", "/api/uploads", f"/api/v2/projects/{rng.randrange(1, 999)}/attachments", "/media/upload", "/import"])
    d = start(ctx, "POST", path, rng.pick(["form", "fetch", "api"]))
    kind = "image" if variant == "avatar_api" else variant
    parts = [file_part(ctx, kind, rng.pick(["file", "upload", "attachment", "files[]", "avatar" if kind == "image" else "document"]))]
    for name, kind2 in [("title", "text"), ("description", "text"), ("folder_id", "id"), ("visibility", "misc")][: rng.randrange(0, 5)]:
        parts.insert(rng.randrange(len(parts) + 1), Part(name, params.value(rng, kind2)))
        d.slots.append(Slot("multipart", name, kind2))
    d.body = Body("multipart", parts=parts, boundary=boundary(rng, d.client))
    d.slots.append(Slot("file", next(i for i, p in enumerate(parts) if p.filename), "text"))
    return d


MULTI_VARIANTS = ("profile_avatar", "support_ticket", "job_application", "listing")


@scene("multipart_form", MULTI_VARIANTS, "multipart file")
def multipart_form(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    fields = {"profile_avatar": [("display_name", "name"), ("bio", "text"), ("website", "url")],
              "support_ticket": [("subject", "text"), ("description", "text"), ("priority", "misc"), ("email", "email")],
              "job_application": [("first_name", "name"), ("last_name", "name"), ("email", "email"), ("cover_letter", "text"), ("linkedin", "url")],
              "listing": [("title", "text"), ("price", "misc"), ("description", "text"), ("location", "name"), ("category", "misc")]}[variant]  # fmt: skip
    path = {"profile_avatar": "/settings/profile", "support_ticket": "/support/tickets/new", "job_application": f"/jobs/{rng.randrange(100, 999)}/apply", "listing": "/listings"}[variant]
    d = start(ctx, "POST", path, "form")
    parts = [Part(n, params.value(rng, k) if n != "price" else vocab.price(rng)) for n, k in fields]
    d.slots += [Slot("multipart", n, k) for n, k in fields]
    if rng.chance(0.7):
        fkind = {"profile_avatar": "image", "support_ticket": rng.pick(["image", "pdf", "text"]), "job_application": "pdf", "listing": "image"}[variant]
        parts.append(file_part(ctx, fkind, {"profile_avatar": "avatar", "job_application": "cv", "listing": "photos[]"}.get(variant, "attachment")))
        d.slots.append(Slot("file", len(parts) - 1, "text"))
    d.body = Body("multipart", parts=parts, boundary=boundary(rng, d.client))
    return d
