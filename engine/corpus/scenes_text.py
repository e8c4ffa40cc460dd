"""Text scenes: requests built around free text (issues, forum replies, CMS pages, wiki edits, reviews,
code reviews, tickets, chat, e-mail, gists, SQL consoles), and long documents (5 KB – 200 KB articles,
JSON exports, CSV uploads, Markdown and HTML pages, bulk and NDJSON bodies).

Each text scene marks its main text slot as `draft.focus`. The benign generator puts a benign_text record
there (hard negatives: SQL, shell, PHP, HTML in posts where they belong); the attack embedder puts a
payload there, or next to it, or in its middle.
"""

from __future__ import annotations

import json

from engine.corpus import paths, vocab
from engine.corpus.draft import Body, Draft, Part, boundary
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, scene, start
from engine.corpus.scenes_api import json_slots, shape
from engine.corpus.scenes_forms import csv_text
from engine.corpus.slots import Slot, json_leaves

# which text scenes suit which benign_text kind (code belongs in a gist or a review, prose in a comment)
FOR_KIND = {
    "prose": ("review", "chat", "forum_reply", "email_compose", "translation", "note", "issue", "wiki_edit"),
    "markdown": ("issue", "forum_reply", "wiki_edit", "note", "code_review", "gist"),
    "mixed": ("issue", "forum_reply", "code_review", "wiki_edit", "ticket", "gist"),
    "code": ("gist", "code_review", "issue", "ticket", "forum_reply"),
    "shell": ("gist", "ticket", "issue", "chat", "code_review"),
    "sql": ("sql_console", "ticket", "gist", "code_review", "issue", "chat"),
    "html": ("cms_page", "email_compose", "wiki_edit", "note"),
    "config": ("gist", "ticket", "code_review", "settings_import"),
}  # fmt: skip
TEXT_VARIANTS = ("issue", "forum_reply", "cms_page", "wiki_edit", "review", "code_review", "ticket", "chat", "email_compose",
                 "gist", "note", "translation", "sql_console", "settings_import")  # fmt: skip


def json_draft(ctx: Ctx, method: str, path: str, obj: dict, focus: tuple, fetch: float = 0.7, ascii: float = 0.15) -> Draft:
    """A JSON request whose text field at `focus` is the draft's focus; sent by a page's script (`fetch`
    of the time) or an API client, its non-ASCII characters escaped `ascii` of the time."""
    d = start(ctx, method, path, "fetch" if ctx.rng.chance(fetch) else "api")
    d.body = Body("json", obj=obj, ascii=ctx.rng.chance(ascii))
    json_slots(d)
    d.focus = Slot("json", focus, "text")
    return d


def form_draft(ctx: Ctx, path: str, fields: list[tuple[str, str, str]], focus: str, splice: bool = False) -> Draft:
    """A browser form post of `fields` (name, value, slot kind); a field of kind "fixed" (a token, a
    button, a state the page set) is never a slot. `splice`: a payload goes into the focus field's text
    rather than replacing it (Draft.splice_form)."""
    from engine.corpus import encode

    d = start(ctx, "POST", path, "form")
    d.body = Body("form", pairs=[(encode.browser(n), encode.browser(v)) for n, v, _ in fields])
    d.slots += [Slot("form", n, k) for n, _, k in fields if k != "fixed"]
    d.focus = Slot("form", focus, "text")
    d.splice_form = splice
    return d


def _short(ctx: Ctx) -> str:
    t = ctx.pools.text(ctx.rng, ("prose",), short=True)["text"]
    return t if len(t) < 120 else vocab.title(ctx.rng)


@scene("text_post", TEXT_VARIANTS, "json form multipart text")
def text_post(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    body = ctx.pools.text(rng, ("markdown", "prose", "mixed"))["text"]
    owner, repo = vocab.username(rng), vocab.slug(rng, 1)
    if variant == "issue":
        return json_draft(ctx, "POST", f"/api/v3/repos/{owner}/{repo}/issues", {"title": _short(ctx), "body": body, "labels": [rng.pick(["bug", "question", "docs"])]}, ("body",))
    if variant == "forum_reply":
        return form_draft(ctx, rng.pick(["/posting.php", f"/t/{vocab.slug(rng)}/{rng.randrange(10**4, 10**6)}/reply", "/forum/reply"]),
                     [("subject", "Re: " + _short(ctx), "text"), ("message", body, "text"), ("topic_id", str(rng.randrange(1, 10**5)), "id"),
                      ("form_token", rng.hexid(40), "data")], "message")  # fmt: skip
    if variant == "cms_page":
        return json_draft(ctx, rng.pick(["POST", "PUT"]), f"/wp-json/wp/v2/{rng.pick(['posts', 'pages'])}/{rng.randrange(1, 9000)}",
                     {"title": _short(ctx), "content": body, "status": rng.pick(["draft", "publish"]), "slug": vocab.slug(rng), "excerpt": ""}, ("content",))  # fmt: skip
    if variant == "wiki_edit":
        return form_draft(ctx, "/w/index.php?action=submit", [("wpTextbox1", body, "text"), ("wpSummary", _short(ctx), "text"), ("wpEditToken", rng.hexid(32) + "+\\", "data"),
                     ("title", vocab.title(rng).replace(" ", "_"), "name")], "wpTextbox1")  # fmt: skip
    if variant == "review":
        return json_draft(ctx, "POST", f"/api/products/{rng.randrange(1, 10**5)}/reviews", {"rating": rng.randrange(1, 6), "title": _short(ctx), "text": body,
                     "author": vocab.full_name(rng), "recommend": rng.chance(0.7)}, ("text",))  # fmt: skip
    if variant == "code_review":
        return json_draft(ctx, "POST", f"/api/v4/projects/{rng.randrange(1, 9999)}/merge_requests/{rng.randrange(1, 900)}/discussions",
                     {"body": body, "position": {"new_path": f"src/{vocab.slug(rng, 1)}.{rng.pick(['py', 'go', 'ts', 'sql'])}", "new_line": rng.randrange(1, 900),
                                                 "base_sha": rng.hexid(40), "head_sha": rng.hexid(40)}}, ("body",))  # fmt: skip
    if variant == "ticket":
        return json_draft(ctx, "POST", "/api/v2/tickets", {"ticket": {"subject": _short(ctx), "comment": {"body": body}, "priority": rng.pick(["low", "normal", "high"]),
                     "requester": {"name": vocab.full_name(rng), "email": vocab.email(rng)}}}, ("ticket", "comment", "body"))  # fmt: skip
    if variant == "chat":
        return json_draft(ctx, "POST", rng.pick(["/api/chat.postMessage", f"/api/v1/channels/{rng.hexid(10)}/messages"]),
                     {"channel": "C" + rng.alnum(10).upper(), "text": body, "thread_ts": f"{vocab.timestamp(rng)}.{rng.randrange(10**5, 10**6)}"}, ("text",))  # fmt: skip
    if variant == "email_compose":
        return json_draft(ctx, "POST", "/api/messages/send", {"to": [vocab.email(rng)], "subject": _short(ctx), "html": body, "from": vocab.email(rng)}, ("html",))
    if variant == "gist":
        name = f"{vocab.slug(rng, 1)}.{rng.pick(['md', 'py', 'sh', 'sql', 'yaml'])}"
        return json_draft(ctx, "POST", "/api/gists", {"description": _short(ctx), "public": rng.chance(0.5), "files": {name: {"content": body}}}, ("files", name, "content"))
    if variant == "note":
        return json_draft(ctx, "PUT", f"/api/notes/{vocab.uuid(rng)}", {"content": body, "format": rng.pick(["markdown", "html", "plain"]), "pinned": False}, ("content",))
    if variant == "translation":
        return json_draft(ctx, "POST", "/api/translate", {"source_lang": "auto", "target_lang": rng.pick(vocab.LANGS), "text": body}, ("text",))
    if variant == "sql_console":
        return json_draft(ctx, "POST", rng.pick(["/api/dataset", "/api/card", "/api/ds/query"]),
                     {"database": rng.randrange(1, 9), "type": "native", "native": {"query": body, "template-tags": {}}}, ("native", "query"))  # fmt: skip
    d = start(ctx, "PUT", f"/api/{rng.pick(['config', 'settings/import', 'pipelines'])}/{vocab.slug(rng, 1)}", "api")
    d.body = Body("raw", data=body, ctype=rng.pick(["application/x-yaml", "text/plain", "application/toml"]))
    d.focus = Slot("raw", None, "text")
    return d


def long_size(rng: Rng) -> int:
    """Body sizes of long documents: mostly 5-20 KB, a quarter 20-60 KB, a few up to 200 KB."""
    r = rng.random()
    return int(rng.loguniform(5_000, 20_000) if r < 0.7 else rng.loguniform(20_000, 60_000) if r < 0.95 else rng.loguniform(60_000, 200_000))


def long_text(ctx: Ctx, size: int, kinds: tuple[str, ...] = ("prose", "markdown", "mixed", "code", "html")) -> str:
    out, n = [], 0
    while n < size:
        t = ctx.pools.text(ctx.rng, kinds)["text"]
        out.append(t)
        n += len(t) + 2
    return "\n\n".join(out)


LONG_VARIANTS = ("article_json", "json_export", "csv_upload", "markdown_put", "html_form", "bulk_api", "ndjson")


@scene("long_doc", LONG_VARIANTS, "json form multipart long text")
def long_doc(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    size = long_size(rng)
    if variant == "article_json":
        obj = {"title": _short(ctx), "author": {"name": vocab.full_name(rng), "email": vocab.email(rng)}, "content": long_text(ctx, size),
               "tags": [rng.pick(vocab.WORDS) for _ in range(3)], "excerpt": _short(ctx)}  # fmt: skip
        return json_draft(ctx, rng.pick(["POST", "PUT"]), rng.pick(["/api/articles", "/wp-json/wp/v2/posts", "/ghost/api/admin/posts/"]), obj, ("content",))
    if variant in ("json_export", "bulk_api"):
        kind = rng.pick(["order", "product", "user_profile", "event", "invoice"])
        crng = Rng("long-doc-items", ctx.split, kind)
        made = ctx.pools.cached(f"items:{kind}", lambda: json.dumps(shape(crng, kind), ensure_ascii=False), 300)
        picked, n = [], 0
        while n < size:
            picked.append(rng.pick(made))
            n += len(picked[-1])
        items = json.loads("[" + ",".join(picked) + "]")  # fresh objects: slots may change one of them
        obj = {"exported_at": vocab.date(rng), "count": len(items), "items": items} if variant == "json_export" else items
        d = start(ctx, "POST", rng.pick(["/api/import", "/api/v1/bulk", f"/api/v2/{rng.pick(paths.RESOURCES)}/batch"]), "api")
        d.body = Body("json", obj=obj)
        mid = items[len(items) // 2]
        base = ("items", len(items) // 2) if variant == "json_export" else (len(items) // 2,)
        d.slots += [Slot("json", base + p, "text") for p in json_leaves(mid)]
        d.focus = d.slots[-1] if d.slots else None
        return d
    if variant == "csv_upload":
        d = start(ctx, "POST", rng.pick(["/import/contacts", "/api/v1/imports", "/admin/products/import"]), "form")
        crng = Rng("long-doc-csv", ctx.split)
        rows = ctx.pools.cached("csv", lambda: csv_text(crng, 1).split("\n", 1)[1].rstrip("\n"), 2000)
        table = "id,name,email,city,amount,date\n" + "\n".join(rng.choices(rows, k=max(2, size // 70))) + "\n"
        parts = [Part("file", table, f"{vocab.slug(rng, 1)}.csv", "text/csv"), Part("delimiter", ","), Part("notes", _short(ctx))]
        d.body = Body("multipart", parts=parts, boundary=boundary(rng, d.client))
        d.slots += [Slot("multipart", "notes", "text"), Slot("multipart", "delimiter", "misc")]
        d.focus = d.slots[0]
        return d
    if variant == "html_form":
        return form_draft(ctx, rng.pick(["/admin/pages/save", "/cms/edit", "/node/add/article"]), [("title", _short(ctx), "text"),
                     ("body", long_text(ctx, size, ("html", "prose", "markdown")), "text"), ("format", "full_html", "misc"), ("op", "Save", "misc")], "body")  # fmt: skip
    d = start(ctx, "PUT" if variant == "markdown_put" else "POST", rng.pick(["/api/docs/" + vocab.slug(rng), "/api/logs", "/ingest"]), "api")
    if variant == "markdown_put":
        d.body = Body("raw", data=long_text(ctx, size, ("markdown", "prose", "mixed")), ctype="text/markdown; charset=utf-8")
    else:
        lines, n = [], 0
        while n < size:
            lines.append(json.dumps({"ts": vocab.date(rng), "level": rng.pick(["info", "warn", "error"]), "msg": ctx.pools.text(rng, ("prose", "shell"), short=True)["text"]}, ensure_ascii=False))
            n += len(lines[-1])
        d.body = Body("raw", data="\n".join(lines) + "\n", ctype="application/x-ndjson")
    d.focus = Slot("raw", None, "text")
    d.slots.append(d.focus)
    return d
