"""Site scenes drawn with `python -m engine.corpus --site-layouts`: static assets in many more framework and
CMS layouts (engine.corpus.layouts), and pages saved from CMS editors (engine.corpus.richtext): WordPress'
classic and block editors, Drupal, Joomla, MediaWiki, Ghost, Shopify product descriptions, e-mail
templates, Confluence, TinyMCE autosaves and a headless CMS.

The page content is the draft's focus, so the attack embedder puts a payload into it, beside it or in its
middle, as it does with the other text scenes: a page body is where stored XSS is sent.
"""

from __future__ import annotations

import html

from engine.corpus import layouts, params, paths, richtext, vocab
from engine.corpus.draft import Draft
from engine.corpus.scenes import Ctx, all_scenes, query_slots, scene, start
from engine.corpus.scenes_text import form_draft, json_draft, long_size
from engine.corpus.scenes_web import asset_request

CMS_VARIANTS = ("wp_classic", "wp_rest", "drupal", "joomla", "mediawiki", "ghost", "shopify", "email_template", "confluence",
                "tinymce_autosave", "headless")  # fmt: skip
# the body each editor sends: the attack embedder picks page saves whose body suits the position it fills
CMS_FORM = ("wp_classic", "drupal", "joomla", "mediawiki", "tinymce_autosave")
CMS_JSON = ("wp_rest", "ghost", "shopify", "email_template", "confluence", "headless")


@scene("asset", layouts.LAYOUTS, "query path")
def asset(ctx: Ctx, variant: str) -> Draft:
    return asset_request(ctx, *layouts.asset(ctx.rng, variant))


def page_size(ctx: Ctx) -> int:
    """Most saves are a page or two (300 B - 6 KB); a third are long documents (engine.corpus.scenes_text.long_size)."""
    return long_size(ctx.rng) if ctx.rng.chance(0.3) else int(ctx.rng.loguniform(300, 6000))


@scene("page_save", CMS_VARIANTS, "json form text long")
def page_save(ctx: Ctx, variant: str) -> Draft:
    rng, size = ctx.rng, page_size(ctx)
    host = paths.host(rng)
    title = vocab.title(rng)
    post_id = rng.randrange(1, 20000)

    def doc(dialect: str) -> str:
        return richtext.Writer(rng, ctx.pools, dialect, host).document(size)

    if variant == "wp_classic":
        fields = [("_wpnonce", rng.hexid(10), "fixed"), ("_wp_http_referer", f"/wp-admin/post.php?post={post_id}&action=edit", "fixed"),
                  ("user_ID", str(rng.randrange(1, 50)), "fixed"), ("action", "editpost", "fixed"), ("originalaction", "editpost", "fixed"),
                  ("post_type", rng.pick(["post", "page"]), "fixed"), ("post_ID", str(post_id), "fixed"), ("post_title", title, "text"),
                  ("content", doc(rng.pick(["tinymce", "plain"])), "text"), ("excerpt", "", "text"), ("post_status", rng.pick(["draft", "publish"]), "fixed"),
                  (rng.pick(["save", "publish"]), rng.pick(["Save Draft", "Publish", "Update"]), "fixed")]  # fmt: skip
        return form_draft(ctx, "/wp-admin/post.php", fields, "content", splice=True)
    if variant == "wp_rest":
        obj = {"id": post_id, "title": title, "content": doc("wp_blocks"), "status": rng.pick(["draft", "publish", "future"]),
               "meta": {"footnotes": ""}, "categories": [rng.randrange(1, 40)]}  # fmt: skip
        d = json_draft(ctx, rng.pick(["POST", "PUT"]), f"/wp-json/wp/v2/{rng.pick(['posts', 'pages'])}/{post_id}", obj, ("content",), fetch=0.8, ascii=0.1)
        d.query.append(("_locale", "user"))
        return d
    if variant == "drupal":
        fields = [("title[0][value]", title, "text"), ("body[0][summary]", "", "text"), ("body[0][value]", doc("ckeditor"), "text"),
                  ("body[0][format]", rng.pick(["full_html", "basic_html"]), "fixed"), ("form_build_id", f"form-{rng.alnum(43, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-')}", "fixed"),
                  ("form_token", rng.alnum(43, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"), "fixed"), ("form_id", "node_article_edit_form", "fixed"),
                  ("status[value]", "1", "fixed"), ("op", "Save", "fixed")]  # fmt: skip
        return form_draft(ctx, f"/node/{post_id}/edit", fields, "body[0][value]", splice=True)
    if variant == "joomla":
        fields = [("jform[title]", title, "text"), ("jform[alias]", vocab.slug(rng), "fixed"), ("jform[articletext]", doc("tinymce"), "text"),
                  ("jform[state]", "1", "fixed"), ("jform[catid]", str(rng.randrange(2, 40)), "fixed"), ("task", rng.pick(["article.apply", "article.save"]), "fixed"),
                  (rng.hexid(32), "1", "fixed")]  # fmt: skip
        d = form_draft(ctx, "/administrator/index.php", fields, "jform[articletext]", splice=True)
        d.query += [("option", "com_content"), ("view", "article"), ("layout", "edit"), ("id", str(post_id))]
        return d
    if variant == "mediawiki":
        page = title.replace(" ", "_")
        text = richtext.wikitext(rng, richtext.Writer(rng, ctx.pools, "plain", host), size)
        fields = [("wpUnicodeCheck", "ℳ𝒲♥𝓊𝓃𝒾𝒸ℴ𝒹ℯ", "fixed"), ("wpAntispam", "", "fixed"), ("wpSection", "", "fixed"), ("wpStarttime", vocab.timestamp(rng), "fixed"),
                  ("wpEdittime", vocab.timestamp(rng), "fixed"), ("wpTextbox1", text, "text"), ("wpSummary", vocab.title(rng), "text"),
                  ("wpSave", "Save changes", "fixed"), ("wpEditToken", rng.hexid(32) + "+\\", "fixed"), ("mode", "text", "fixed"), ("model", "wikitext", "fixed"),
                  ("format", "text/x-wiki", "fixed")]  # fmt: skip
        d = form_draft(ctx, rng.pick(["/w/index.php", "/index.php"]), fields, "wpTextbox1", splice=True)
        d.query += [("title", page), ("action", "submit")]
        return d
    if variant == "ghost":
        w = richtext.Writer(rng, ctx.pools, "plain", host)
        post = {"id": rng.hexid(24), "title": title, "lexical": richtext.lexical(rng, w, size), "status": "draft", "slug": vocab.slug(rng),
                "updated_at": vocab.date(rng), "tags": [], "feature_image": f"https://{host}/content/images/2025/0{rng.randrange(1, 10)}/{vocab.slug(rng, 1)}.jpg"}  # fmt: skip
        d = json_draft(ctx, "PUT", f"/ghost/api/admin/posts/{post['id']}/", {"posts": [post]}, ("posts", 0, "lexical"), fetch=0.8, ascii=0.1)
        d.query.append(("formats", "mobiledoc,lexical"))
        return d
    if variant == "shopify":
        prod = {"id": rng.randrange(10**12, 10**13), "title": vocab.product(rng), "body_html": doc("ckeditor"), "vendor": vocab.slug(rng, 1).title(),
                "product_type": rng.pick(["Shoes", "Apparel", "Home", "Toys"]), "tags": ", ".join(vocab.slug(rng, 1) for _ in range(3))}  # fmt: skip
        return json_draft(ctx, "PUT", f"/admin/api/{rng.pick(['2024-07', '2025-01', '2025-04'])}/products/{prod['id']}.json", {"product": prod}, ("product", "body_html"), fetch=0.8, ascii=0.1)
    if variant == "email_template":
        body = doc("email")
        obj = {"name": title, "subject": html.unescape(vocab.title(rng)), "html": body, "text": richtext.Writer(rng, ctx.pools, "plain", host).sentence(),
               "from_email": f"news@{host}", "editor": rng.pick(["code", "drag_and_drop"])}  # fmt: skip
        return json_draft(ctx, rng.pick(["POST", "PATCH"]), rng.pick(["/api/v1/templates", f"/v3/templates/{rng.hexid(8)}/versions", "/api/campaigns/content"]), obj, ("html",), fetch=0.8, ascii=0.1)
    if variant == "confluence":
        obj = {"id": str(post_id), "type": "page", "title": title, "space": {"key": vocab.slug(rng, 1).upper()[:6]}, "version": {"number": rng.randrange(2, 40)},
               "body": {"storage": {"value": doc("confluence"), "representation": "storage"}}}  # fmt: skip
        return json_draft(ctx, "PUT", f"/wiki/rest/api/content/{post_id}", obj, ("body", "storage", "value"), fetch=0.8, ascii=0.1)
    if variant == "tinymce_autosave":
        fields = [("id", str(post_id), "fixed"), ("title", title, "text"), ("content", doc("tinymce"), "text"), ("csrf_token", rng.alnum(40), "fixed")]
        d = form_draft(ctx, rng.pick([f"/admin/articles/{post_id}/autosave", "/editor/autosave", f"/cms/pages/{post_id}/draft"]), fields, "content", splice=True)
        d.mode = "fetch"
        return d
    # headless: a headless CMS entry with a rich-text field and its plain fields
    obj = {"data": {"title": title, "slug": vocab.slug(rng), "content": doc(rng.pick(["ckeditor", "plain"])), "seo": {"metaTitle": title, "metaDescription": vocab.title(rng)},
                    "locale": rng.pick(["en", "de", "fr", "es"]), "publishedAt": None}}  # fmt: skip
    return json_draft(ctx, "PUT", rng.pick([f"/api/articles/{post_id}", f"/content-manager/collection-types/api::article.article/{post_id}", f"/items/posts/{post_id}"]), obj, ("data", "content"), fetch=0.8, ascii=0.1)


# Sites served from a folder (`python -m engine.corpus --mounts`): a PHP app deployed without its document root
# (/public/...), WordPress installed in /wordpress/, an app mounted at /app/ or /shop/ behind a shared host name.
# The restricted-file probes of engine.corpus.scanners are sent under the first four folders too, so without these
# a folder would tell the label: a model trained without them blocked Ghost's /public/cards.min.js as a probe.
SCANNER_MOUNTS = ("public", "wordpress", "app", "static")
MOUNTS = (*SCANNER_MOUNTS, "site", "web", "blog", "cms", "shop", "portal", "www", "frontend")


@scene("mounted", MOUNTS, "query path", keep=SCANNER_MOUNTS)
def mounted(ctx: Ctx, variant: str) -> Draft:
    """An asset, a page or a search of another scene, under the mount folder `variant` (/public/ holds assets)."""
    return mount(ctx, variant)


def mount(ctx: Ctx, variant: str) -> Draft:
    rng = ctx.rng
    inner = "static" if variant == "public" else rng.pick(["static", "static", "page", "search"])
    sc = all_scenes()[inner]
    usable = sc.usable(ctx.split)
    wanted = {"static": "wordpress", "page": "blog"}.get(inner) if variant == "wordpress" else None
    d = sc.make(ctx, wanted if wanted in usable else rng.pick(usable))
    d.path = f"/{variant}{d.path}"  # every scene's path starts with /
    return d


# Folders only probes used in training (the corpus summary's one_sided_folders of the documented corpus: /site/ 1,049
# requests, /cgi-bin/ 681, /include(s)/, /components/, all attacks): with `--legacy-folders`, sites mounted there and
# the CGI applications that still answer under /cgi-bin/ (library catalogues, mailing lists, bug trackers, repository
# browsers, monitoring, web statistics), so that a probe is told by what it asks for, not by its folder.
LEGACY_MOUNTS = ("site", "includes", "include", "components")
CGI_APPS = ("koha", "mailman", "bugzilla", "gitweb", "nagios", "viewvc", "sympa", "mt_search", "awstats")


@scene("mounted_legacy", LEGACY_MOUNTS, "query path", keep=LEGACY_MOUNTS)
def mounted_legacy(ctx: Ctx, variant: str) -> Draft:
    """A site under a folder training saw only probes in; all four are trained (they are what the flag is for)."""
    return mount(ctx, variant)


@scene("cgi_app", CGI_APPS, "query path")
def cgi_app(ctx: Ctx, variant: str) -> Draft:
    """A request to a CGI application under /cgi-bin/: catalogue and tracker searches, list pages, repository views."""
    rng = ctx.rng
    project, lst = vocab.slug(rng, 1), rng.pick(["announce", "users", "devel", "general", "board", "members", vocab.slug(rng, 1)])
    host = vocab.domain(rng)
    if variant == "mailman" and rng.chance(0.25):
        fields = [("email", vocab.email(rng), "email"), ("fullname", vocab.full_name(rng), "name"), ("pw", rng.alnum(12), "fixed"),
                  ("pw-conf", "", "fixed"), ("digest", rng.pick(["0", "1"]), "fixed"), ("email-button", "Subscribe", "fixed")]  # fmt: skip
        return form_draft(ctx, f"/cgi-bin/mailman/subscribe/{lst}", fields, "fullname")
    if variant == "koha":
        if rng.chance(0.6):
            path, pairs = "/cgi-bin/koha/opac-search.pl", [("q", params.value(rng, "search"))]
            pairs += [("idx", rng.pick(["kw", "ti", "au", "su"])), ("sort_by", rng.pick(["relevance", "pubdate_dsc", "title_az"])),
                      ("limit", f"mc-itype,phr:{rng.pick(['BK', 'DVD', 'EBOOK'])}")][: rng.randrange(0, 4)]  # fmt: skip
        else:
            path, pairs = rng.pick(["/cgi-bin/koha/opac-detail.pl", "/cgi-bin/koha/opac-ISBDdetail.pl"]), [("biblionumber", str(rng.randrange(1, 400000)))]
    elif variant == "mailman":
        path, pairs = rng.pick([f"/cgi-bin/mailman/listinfo/{lst}", f"/cgi-bin/mailman/listinfo", f"/cgi-bin/mailman/options/{lst}"]), []
        if path.endswith(f"/options/{lst}") and rng.chance(0.5):
            pairs = [("email", vocab.email(rng))]
    elif variant == "bugzilla":
        if rng.chance(0.5):
            path, pairs = "/cgi-bin/bugzilla/buglist.cgi", [("quicksearch", params.value(rng, "search"))]
            pairs += [("product", project.title()), ("bug_status", rng.pick(["NEW", "ASSIGNED", "RESOLVED", "__open__"]))][: rng.randrange(0, 3)]
        else:
            path, pairs = "/cgi-bin/bugzilla/show_bug.cgi", [("id", str(rng.randrange(100, 900000)))]
    elif variant == "gitweb":
        path = "/cgi-bin/gitweb.cgi"
        pairs = [("p", f"{project}.git"), ("a", rng.pick(["summary", "log", "commit", "tree", "blob", "shortlog"]))]
        if pairs[1][1] in ("commit", "tree", "blob"):
            pairs.append(("h", rng.hexid(40)))
        if pairs[1][1] == "blob":
            pairs.append(("f", f"{rng.pick(['src', 'lib', 'doc'])}/{vocab.slug(rng, 1)}.{rng.pick(['c', 'py', 'md', 'h'])}"))
    elif variant == "nagios":
        cgi = rng.pick(["status.cgi", "extinfo.cgi", "history.cgi", "trends.cgi"])
        path = f"/cgi-bin/{rng.pick(['nagios', 'nagios4', 'icinga'])}/{cgi}"
        node = f"{rng.pick(['web', 'db', 'mail', 'app', 'cache'])}{rng.randrange(1, 30):02d}"
        pairs = [("host", rng.pick([node, "all"]))] + [("type", str(rng.randrange(1, 3))), ("style", rng.pick(["detail", "overview", "summary"]))][: rng.randrange(0, 3)]
    elif variant == "viewvc":
        path = f"/cgi-bin/viewvc.cgi/{project}/{rng.pick(['trunk', 'branches/stable', 'tags/v1.2'])}/{vocab.slug(rng, 1)}.{rng.pick(['c', 'py', 'java', 'txt'])}"
        pairs = [("view", rng.pick(["log", "markup", "co", "annotate"]))] + ([("revision", str(rng.randrange(100, 90000)))] if rng.chance(0.4) else [])
    elif variant == "sympa":
        path = rng.pick([f"/cgi-bin/wwsympa.fcgi/info/{lst}", f"/cgi-bin/wwsympa.fcgi/arc/{lst}/{rng.randrange(2015, 2027)}-{rng.randrange(1, 13):02d}/msg{rng.randrange(0, 999):05d}.html",
                         "/cgi-bin/wwsympa.fcgi/lists"])  # fmt: skip
        pairs = []
    elif variant == "mt_search":
        path = rng.pick(["/cgi-bin/mt/mt-search.cgi", "/cgi-bin/mt-search.cgi"])
        pairs = [("search", params.value(rng, "search")), ("IncludeBlogs", str(rng.randrange(1, 9)))] + [("limit", str(rng.pick([10, 20, 50])))][: rng.randrange(0, 2)]
    else:  # awstats: the report pages, not the configdir probe
        path = rng.pick(["/cgi-bin/awstats.pl", "/cgi-bin/awstats/awstats.pl"])
        pairs = [("config", host)] + [("output", rng.pick(["main", "alldomains", "allhosts", "lasthosts", "urldetail"])),
                                      ("framename", "mainright"), ("month", str(rng.randrange(1, 13))), ("year", str(rng.randrange(2019, 2027)))][: rng.randrange(0, 4)]  # fmt: skip
    d = start(ctx, rng.pick(["GET", "GET", "GET", "HEAD"]) if variant in ("viewvc", "gitweb") else "GET", path, "navigate", host=host)
    query_slots(ctx, d, pairs)
    return d


# The CGI programs of applications no scene names (`--legacy-folders`): a model trained with the nine applications
# above still read /cgi-bin/ as a probe wherever the program's name was not one of them (every GET of Mailman, held
# out, was blocked; so was any /cgi-bin/<word>/<word>). Named with ordinary words, so the name of what is asked for, not the
# folder, is what a probe is told by; the classic probe scripts are the rules' (scanner-cgi-probes). Three variants,
# all trained: the test split and its held-out application are what they were.
CGI_SCRIPTS = ("script", "app", "pathinfo")
CGI_ACTIONS = ("view", "list", "show", "search", "browse", "detail", "summary", "index", "display", "page", "archive", "info")


def cgi_name(ctx: Ctx) -> str:
    rng = ctx.rng
    words = [vocab.slug(rng, 1) for _ in range(rng.pick([1, 1, 2]))]
    return rng.pick(["", "_", "-"]).join(words)


@scene("cgi_script", CGI_SCRIPTS, "query path form")
def cgi_script(ctx: Ctx, variant: str) -> Draft:
    """A CGI program under /cgi-bin/ (now and then /cgi/) named with ordinary words: a script (/cgi-bin/stock.pl), a
    program in its application's folder (/cgi-bin/library/find.cgi), or a program's path info
    (/cgi-bin/board.fcgi/archive/garden); a third ask with no query (a list page, an application's front page), one in
    eight posts its form."""
    rng = ctx.rng
    folder = "/cgi/" if rng.chance(0.1) else "/cgi-bin/"
    ext = rng.pick(["", ".cgi", ".cgi", ".pl", ".pl", ".py", ".fcgi"])
    if variant == "script":
        path = f"{folder}{cgi_name(ctx)}{ext or '.cgi'}"
    elif variant == "app":
        path = f"{folder}{cgi_name(ctx)}/{cgi_name(ctx)}{ext}"
    else:
        path = f"{folder}{cgi_name(ctx)}{ext}/{rng.pick(CGI_ACTIONS)}" + rng.pick(["", f"/{vocab.slug(rng, 1)}", f"/{rng.randrange(1, 99999)}"])
    if rng.chance(0.125):
        fields = [("name", vocab.full_name(rng), "name"), ("email", vocab.email(rng), "email"), (rng.pick(["message", "comments", "text"]), vocab.title(rng), "text"),
                  (rng.pick(["submit", "send", "action"]), rng.pick(["Send", "Submit", "Subscribe", "save"]), "fixed")]  # fmt: skip
        return form_draft(ctx, path, fields[: rng.randrange(2, 5)], "name")
    pairs: list[tuple[str, str]] = []
    if rng.chance(0.67):
        pairs = [(rng.pick(["action", "a", "mode", "op", "do", "view"]), rng.pick(CGI_ACTIONS))][: rng.randrange(0, 2)]
        pairs += params.benign_pairs(rng, rng.randrange(1, 4))
    d = start(ctx, "HEAD" if rng.chance(0.05) else "GET", path, "navigate")
    query_slots(ctx, d, pairs)
    return d
