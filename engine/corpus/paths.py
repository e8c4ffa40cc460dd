"""Hosts and paths of ordinary sites: pages per kind of site, REST resources, static assets per
framework. Benign requests and attack carriers draw from the same functions, so a path never
identifies a label (MODEL-NOTES: the CSIC shop path alone pushed scores to ~1).
"""

from __future__ import annotations

from engine.corpus import vocab
from engine.corpus.rand import Rng

HOSTS = """www.example.com shop.example.net api.example.io app.acme.test blog.example.org docs.example.dev
localhost:8080 localhost:3000 127.0.0.1:8000 10.0.2.15:8443 staging.example.co.uk m.example.com example.fr
intranet.corp.example store.example.de portal.example.edu api.shop.example.net www.acme-widgets.test
admin.example.io forum.example.org wiki.example.org status.example.com news.example.net""".split()

RESOURCES = """products orders users customers invoices items articles posts comments tickets issues projects
tasks events files documents reviews categories carts payments subscriptions messages notifications
teams members accounts addresses shipments coupons reports tags pages media webhooks""".split()

SITE_VARIANTS = ("blog", "shop", "docs", "news", "saas", "forum", "wiki", "php_legacy", "jsp_shop", "i18n", "admin", "app_tools")
# variants every real site has, never held out: back offices, and routes whose names scanners also probe
COMMON_VARIANTS = ("admin", "app_tools")
_ADMIN_APPS = {"auth": ["user", "group"], "shop": ["order", "product", "customer"], "blog": ["post", "comment", "tag"],
               "sites": ["site"], "billing": ["invoice", "plan"]}  # fmt: skip
_GRAPHQL = ["{viewer{login}}", "{ viewer { login name avatarUrl } }", "query Me { me { id email } }",
            "{products(first:10){edges{node{id title}}}}", "query($id:ID!){order(id:$id){id status total}}"]  # fmt: skip


def host(rng: Rng) -> str:
    return rng.pick(HOSTS)


def _id(rng: Rng) -> str:
    r = rng.random()
    return str(rng.randrange(1, 10**rng.randrange(1, 8))) if r < 0.6 else vocab.uuid(rng) if r < 0.8 else vocab.slug(rng, rng.randrange(1, 4))


def page(rng: Rng, variant: str) -> tuple[str, list[tuple[str, str]]]:
    """A page path and its natural (unencoded) query parameters for one kind of site."""
    q: list[tuple[str, str]] = []
    s = vocab.slug(rng)
    if variant == "blog":
        path = rng.pick([f"/blog/{rng.randrange(2012, 2027)}/{rng.randrange(1, 13):02d}/{s}/", f"/posts/{s}", f"/tag/{vocab.slug(rng, 1)}",
                         f"/category/{vocab.slug(rng, 1)}/page/{rng.randrange(2, 30)}/", "/", "/about", f"/author/{vocab.username(rng)}"])  # fmt: skip
    elif variant == "shop":
        path = rng.pick([f"/products/{s}", f"/p/{rng.randrange(10**4, 10**7)}", f"/collections/{vocab.slug(rng, 1)}", "/cart", f"/c/{vocab.slug(rng, 2)}", "/"])
        if path.startswith("/collections") and rng.chance(0.6):
            q += [("sort_by", rng.pick(["price-ascending", "best-selling", "created-descending"])), ("page", str(rng.randrange(1, 9)))]
        if path.startswith("/products") and rng.chance(0.4):
            q.append(("variant", str(rng.randrange(10**10, 10**11))))
    elif variant == "docs":
        path = rng.pick([f"/docs/v{rng.randrange(1, 5)}/{vocab.slug(rng, 2)}/{s}", f"/en/latest/{vocab.slug(rng, 1)}.html", f"/reference/{vocab.slug(rng, 2)}/",
                         f"/guide/{s}", f"/api/{rng.pick(vocab.WORDS)}.html"])  # fmt: skip
    elif variant == "news":
        path = rng.pick([f"/{rng.pick(['world', 'business', 'tech', 'sport', 'culture'])}/{rng.randrange(2015, 2027)}/{rng.pick(['jan', 'mar', 'jun', 'oct'])}/{rng.randrange(1, 29)}/{s}",
                         f"/article/{rng.randrange(10**6, 10**8)}/{s}", f"/live/{s}"])  # fmt: skip
    elif variant == "saas":
        path = rng.pick([f"/app/projects/{_id(rng)}/settings", "/dashboard", f"/org/{vocab.slug(rng, 1)}/team", f"/app/{rng.pick(RESOURCES)}",
                         f"/workspace/{rng.hexid(8)}/boards/{rng.randrange(1, 999)}"])  # fmt: skip
    elif variant == "forum":
        path = rng.pick([f"/t/{s}/{rng.randrange(1000, 10**6)}", "/forum/viewtopic.php", f"/questions/{rng.randrange(10**5, 10**8)}/{s}", f"/c/{vocab.slug(rng, 1)}/{rng.randrange(1, 90)}"])
        if path.endswith(".php"):
            q += [("f", str(rng.randrange(1, 60))), ("t", str(rng.randrange(1, 10**6)))]
    elif variant == "wiki":
        t = vocab.title(rng).replace(" ", "_")
        path = rng.pick([f"/wiki/{t}", "/w/index.php"])
        if path == "/w/index.php":
            q += [("title", t), ("action", rng.pick(["history", "edit", "raw", "info"]))]
    elif variant == "php_legacy":
        path = rng.pick(["/index.php", "/view.php", "/product.php", "/page.php", "/news.php", "/show.php"])
        q.append(rng.pick([("id", str(rng.randrange(1, 5000))), ("page", rng.pick(["about", "contact", "home", "faq", "terms"])),
                           ("cat", str(rng.randrange(1, 40))), ("pid", str(rng.randrange(1, 900)))]))  # fmt: skip
    elif variant == "jsp_shop":
        path = rng.pick(["/tienda1/index.jsp", "/tienda1/publico/productos.jsp", "/shop/catalog.do", "/servlet/ProductServlet", "/store/item.action"])
        if rng.chance(0.6):
            q.append(("id", str(rng.randrange(1, 40))))
    elif variant == "admin":
        path, q = admin_page(rng)
    elif variant == "app_tools":
        path, q = tool_page(rng)
    else:  # i18n
        path = f"/{rng.pick(['de', 'fr', 'es', 'ja', 'pt-br', 'en-gb', 'zh-cn'])}/{rng.pick(['produkte', 'aide', 'ayuda', 'sobre', 'kontakt', 'blog'])}/{s}"
    if rng.chance(0.15):
        q += [("utm_source", rng.pick(["newsletter", "google", "twitter", "facebook"])), ("utm_medium", rng.pick(["email", "cpc", "social"])),
              ("utm_campaign", vocab.slug(rng, 2))]  # fmt: skip
    if rng.chance(0.05):
        q.append(rng.pick([("fbclid", rng.alnum(40)), ("gclid", rng.alnum(38)), ("ref", vocab.slug(rng, 1))]))
    return path, q


def admin_page(rng: Rng) -> tuple[str, list[tuple[str, str]]]:
    """A back-office page: Django, WordPress, Drupal, Joomla, Magento/Shopify-style and home-grown admins."""
    q: list[tuple[str, str]] = []
    res, n = rng.pick(RESOURCES), str(rng.randrange(1, 10**5))
    kind = rng.pick(["django", "wordpress", "drupal", "joomla", "shop", "generic", "generic"])
    if kind == "django":
        app = rng.pick(list(_ADMIN_APPS))
        model = rng.pick(_ADMIN_APPS[app])
        path = rng.pick(["/admin/", f"/admin/{app}/", f"/admin/{app}/{model}/", f"/admin/{app}/{model}/{n}/change/",
                         f"/admin/{app}/{model}/add/", "/admin/login/"])  # fmt: skip
        if path == "/admin/login/":
            q.append(("next", "/admin/"))
        elif path.endswith(f"{model}/") and rng.chance(0.5):
            q.append(rng.pick([("q", vocab.slug(rng, 1)), ("o", str(rng.randrange(-6, 7))), ("p", str(rng.randrange(1, 30))),
                               ("is_active__exact", "1")]))  # fmt: skip
    elif kind == "wordpress":
        path = rng.pick(["/wp-admin/", "/wp-admin/edit.php", "/wp-admin/post.php", "/wp-admin/upload.php", "/wp-admin/admin.php",
                         "/wp-admin/options-general.php", "/wp-admin/plugins.php", "/wp-admin/users.php", "/wp-admin/profile.php"])  # fmt: skip
        if path.endswith("edit.php"):
            q.append(("post_type", rng.pick(["page", "post", "product", "shop_order"])))
        elif path.endswith("post.php"):
            q += [("post", n), ("action", "edit")]
        elif path.endswith("admin.php"):
            q.append(("page", rng.pick(["wc-orders", "wc-settings", "wpseo_dashboard", "wc-admin", "elementor"])))
    elif kind == "drupal":
        path = rng.pick(["/admin/content", "/admin/structure/types", "/admin/config", "/admin/config/system/site-information",
                         "/admin/people", "/admin/reports/dblog", "/admin/modules", f"/node/{n}/edit", f"/user/{n}/edit"])  # fmt: skip
    elif kind == "joomla":
        path = rng.pick(["/administrator/", "/administrator/index.php"])
        if path.endswith(".php"):
            q += [("option", rng.pick(["com_content", "com_users", "com_menus", "com_config"])), ("view", rng.pick(["articles", "users", "items", "component"]))]
    elif kind == "shop":
        path = rng.pick([f"/admin/products/{n}", "/admin/orders", f"/admin/orders/{n}", f"/admin/sales/order/view/order_id/{n}/",
                         "/admin/customers", "/admin/discounts", "/admin/settings/shipping"])  # fmt: skip
        if path == "/admin/orders" and rng.chance(0.6):
            q += [("status", rng.pick(["open", "pending", "fulfilled", "any"])), ("page", str(rng.randrange(1, 20)))]
    else:
        path = rng.pick(["/admin", "/admin/", "/admin/dashboard", f"/admin/{res}", f"/admin/{res}/{_id(rng)}", f"/admin/{res}/{_id(rng)}/edit",
                         f"/admin/{res}/new", "/admin/settings", "/admin/settings/general", "/admin/config", "/admin/audit-log",
                         "/admin/reports", f"/dashboard/admin/{res}", "/backoffice/", f"/manage/{res}", "/staff/"])  # fmt: skip
        if rng.chance(0.3):
            q.append(rng.pick([("page", str(rng.randrange(1, 40))), ("sort", rng.pick(["name", "-created_at", "email"])),
                               ("search", vocab.slug(rng, 1)), ("tab", rng.pick(["general", "security", "billing"]))]))  # fmt: skip
    return path, q


def tool_page(rng: Rng) -> tuple[str, list[tuple[str, str]]]:
    """Ordinary routes whose names scanners also probe: config and console pages, downloads, status and
    log views, GraphQL reads by GET."""
    q: list[tuple[str, str]] = []
    name = vocab.slug(rng, 1)
    ver = f"{rng.randrange(1, 9)}.{rng.randrange(0, 30)}.{rng.randrange(0, 10)}"
    kind = rng.pick(["download", "config", "console", "status", "graphql", "logs"])
    if kind == "download":
        ext = rng.pick(["exe", "msi", "dmg", "pkg", "deb", "rpm", "AppImage", "zip", "tar.gz", "apk"])
        path = rng.pick([f"/downloads/{name}-{ver}-setup.{ext}", f"/download/{name}-{ver}.{ext}", f"/releases/download/v{ver}/{name}-{ver}.{ext}",
                         f"/dl/{name}/{ver}/{name}.{ext}", "/downloads", "/download"])  # fmt: skip
    elif kind == "config":
        path = rng.pick(["/config", "/settings", "/api/config", "/api/v1/config", f"/api/config/{name}", "/app/config.json",
                         "/config/notifications", "/account/config", "/preferences"])  # fmt: skip
    elif kind == "console":
        path = rng.pick(["/console", f"/console/projects/{_id(rng)}", "/console/billing", "/shell", "/terminal", f"/console/{name}",
                         "/cloud/console", "/admin/console"])  # fmt: skip
    elif kind == "status":
        path = rng.pick(["/status", "/api/status", "/api/exec/status", f"/api/jobs/{_id(rng)}/status", "/system/status", "/uptime",
                         f"/builds/{rng.randrange(1, 10**5)}/status", "/backup/", "/backups", f"/api/backups/{_id(rng)}"])  # fmt: skip
    elif kind == "graphql":
        path = rng.pick(["/graphql", "/api/graphql", "/gql"])
        q.append(("query", rng.pick(_GRAPHQL)))
        if "$id" in q[0][1]:
            q.append(("variables", f'{{"id":"{rng.randrange(1, 10**6)}"}}'))
    else:
        path = rng.pick(["/logs", f"/projects/{_id(rng)}/logs", "/admin/logs", "/debug/requests", "/api/v1/logs"])
        q.append(rng.pick([("since", f"{rng.randrange(1, 48)}h"), ("level", rng.pick(["error", "warn", "info"])), ("tail", "100")]))
    return path, q


def api_base(rng: Rng) -> str:
    return rng.pick(["/api/v1", "/api/v2", "/api", "/v1", "/v2", "/rest/v1", "/api/v3", "/internal/api", "/wp-json/wp/v2", "/odata"])


def api_collection(rng: Rng, resource: str | None = None) -> str:
    base = api_base(rng)
    res = resource or rng.pick(RESOURCES)
    if rng.chance(0.25):
        return f"{base}/{rng.pick(['accounts', 'orgs', 'projects', 'stores'])}/{_id(rng)}/{res}"
    return f"{base}/{res}"


def api_item(rng: Rng, resource: str | None = None) -> str:
    path = f"{api_collection(rng, resource)}/{_id(rng)}"
    if rng.chance(0.2):
        path += "/" + rng.pick(["comments", "items", "history", "attachments", "status", "members", "lines"])
    return path


STATIC_VARIANTS = ("next", "vite", "wordpress", "rails", "django", "cdn_npm", "images", "fonts", "uploads",
                   "icons", "cra", "java", "legacy")  # fmt: skip
_EXT_DEST = {"js": "script", "mjs": "script", "css": "style", "png": "image", "jpg": "image", "jpeg": "image", "webp": "image",
             "svg": "image", "gif": "image", "avif": "image", "ico": "image", "woff2": "font", "woff": "font", "ttf": "font"}  # fmt: skip


def static(rng: Rng, variant: str) -> tuple[str, list[tuple[str, str]], str]:
    """(path, query, fetch destination) of a static asset in one framework's layout."""
    h8, q = rng.hexid(8), []
    name = vocab.slug(rng, rng.randrange(1, 3))
    img = rng.pick(["png", "jpg", "webp", "svg", "gif", "avif"])
    if variant == "next":
        path = rng.pick([f"/_next/static/chunks/pages/{name}-{rng.hexid(16)}.js", f"/_next/static/css/{rng.hexid(16)}.css", f"/_next/static/media/{name}.{h8}.woff2", "/_next/image"])
        if path == "/_next/image":
            q = [("url", f"/images/{name}.{img}"), ("w", str(rng.pick([640, 828, 1080, 1920]))), ("q", "75")]
    elif variant == "vite":
        path = f"/assets/{rng.pick(['index', name, 'vendor'])}-{rng.alnum(8, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-')}.{rng.pick(['js', 'css', img])}"
    elif variant == "wordpress":
        path = rng.pick([f"/wp-content/themes/{vocab.slug(rng, 1)}/style.css", f"/wp-content/uploads/{rng.randrange(2015, 2027)}/{rng.randrange(1, 13):02d}/{name}-1024x768.{img}",
                         "/wp-includes/js/jquery/jquery.min.js", f"/wp-content/plugins/{vocab.slug(rng, 2)}/assets/js/frontend.min.js"])  # fmt: skip
        if rng.chance(0.6) and not path.endswith(img):
            q = [("ver", rng.pick(["6.4.2", "6.5.3", "3.7.1", "1.0.0", str(rng.randrange(10**9, 10**10))]))]
    elif variant == "rails":
        path = rng.pick([f"/assets/application-{rng.hexid(64)}.{rng.pick(['css', 'js'])}", f"/packs/js/{name}-{rng.hexid(20)}.js", f"/rails/active_storage/blobs/redirect/{rng.alnum(40)}/{name}.{img}"])
    elif variant == "django":
        path = rng.pick([f"/static/css/{name}.css", f"/static/js/{name}.js", f"/static/admin/css/{rng.pick(['base', 'forms', 'login'])}.css", f"/static/img/{name}.{img}", f"/media/{name}.{img}"])
    elif variant == "cdn_npm":
        name, ver, file = rng.pick([("bootstrap", "5.3.3", "dist/css/bootstrap.min.css"), ("jquery", "3.7.1", "dist/jquery.min.js"),
                                    ("react", "18.3.1", "umd/react.production.min.js"), ("alpinejs", "3.14.1", "dist/cdn.min.js"),
                                    ("htmx.org", "2.0.2", "dist/htmx.min.js"), ("@fontsource/inter", "5.0.18", "index.css")])  # fmt: skip
        path = rng.pick([f"/npm/{name}@{ver}/{file}", f"/ajax/libs/{name.split('/')[-1]}/{ver}/{file.rsplit('/', 1)[-1]}"])
    elif variant == "images":
        path = rng.pick([f"/images/products/{rng.randrange(1, 10**5)}/{rng.pick(['main', 'thumb', '1', '2'])}.{img}", f"/img/{name}@2x.{img}", f"/images/{name}.{img}"])
        if rng.chance(0.2):
            q = [("w", str(rng.pick([200, 400, 800]))), ("fit", "crop"), ("auto", "format")]
    elif variant == "fonts":
        path = rng.pick([f"/fonts/{rng.pick(['inter-var', 'roboto-regular', 'OpenSans-Bold', 'NotoSansJP-Regular'])}.{rng.pick(['woff2', 'woff', 'ttf'])}", f"/static/fonts/{name}.woff2"])
    elif variant == "uploads":
        path = rng.pick([f"/uploads/avatars/{rng.randrange(1, 10**6)}.{img}", f"/media/cache/{rng.hexid(2)}/{rng.hexid(2)}/{rng.hexid(32)}.{img}", f"/files/{rng.randrange(1000)}/{name}.pdf"])
    elif variant == "icons":
        path = rng.pick(["/favicon.ico", "/apple-touch-icon.png", "/site.webmanifest", "/favicon-32x32.png", "/robots.txt", "/sitemap.xml", "/manifest.json", "/browserconfig.xml"])
    elif variant == "cra":
        path = rng.pick([f"/static/js/main.{h8}.js", f"/static/js/{rng.randrange(100, 999)}.{h8}.chunk.js", f"/static/css/main.{h8}.css", f"/static/media/{name}.{rng.hexid(20)}.{img}"])
    elif variant == "java":
        path = rng.pick([f"/resources/css/{name}.css", "/webjars/jquery/3.6.0/jquery.min.js", f"/javax.faces.resource/{name}.js.xhtml"])
        if path.endswith(".xhtml"):
            q = [("ln", "primefaces"), ("v", "12.0.0")]
    else:  # legacy
        path = rng.pick([f"/js/{name}.js", "/css/style.css", f"/css/{name}.css", f"/scripts/{name}.min.js", f"/img/{name}.{img}"])
        if rng.chance(0.4):
            q = [(rng.pick(["v", "ver", "t"]), rng.pick([str(rng.randrange(1, 40)), vocab.timestamp(rng), rng.hexid(8)]))]
    ext = path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else "png"
    return path, q, _EXT_DEST.get(ext, "empty")
