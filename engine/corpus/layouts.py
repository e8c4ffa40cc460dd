"""Static assets in more site layouts: where frameworks and CMSs put their files, most of them outside the
folders the labelling policy knows by name (engine.labels.STATIC_PREFIXES).

A model that met assets only under /static/, /assets/ or /images/ learns the folder, not the file: on a
dev split that held out whole generator families, Rails' /packs/js/… and /rails/active_storage/… assets
were routed to origin or allow (bench/RESULTS.md, "Recipe variants trained at once on a GPU"). These
layouts put the same kinds of files under many other folders, so what a request asks for (its extension,
its fetch destination) is what tells an asset. Drawn with `python -m engine.corpus --site-layouts`.
"""

from __future__ import annotations

from engine.corpus import vocab
from engine.corpus.rand import Rng

LAYOUTS = ("nuxt", "sveltekit", "astro", "webpacker", "angular", "drupal", "magento", "shopify", "laravel", "phoenix",
           "gatsby", "typo3", "ghost", "anywhere")  # fmt: skip
DEST = {"js": "script", "mjs": "script", "css": "style", "png": "image", "jpg": "image", "jpeg": "image", "webp": "image",
        "svg": "image", "gif": "image", "avif": "image", "ico": "image", "woff2": "font", "woff": "font", "ttf": "font",
        "otf": "font", "mp4": "video", "webm": "video", "mp3": "audio", "pdf": "document", "map": "empty", "wasm": "empty"}  # fmt: skip
_B64URL = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


def _img(rng: Rng) -> str:
    return rng.pick(["png", "jpg", "jpeg", "webp", "svg", "gif", "avif"])


def _code(rng: Rng) -> str:
    return rng.pick(["js", "js", "css", "mjs"])


def _name(rng: Rng) -> str:
    return vocab.slug(rng, rng.randrange(1, 4))


def asset(rng: Rng, layout: str) -> tuple[str, list[tuple[str, str]], str]:
    """(path, query, fetch destination) of one asset in `layout`."""
    name, img, q = _name(rng), _img(rng), []
    if layout == "nuxt":
        path = rng.pick([f"/_nuxt/{rng.alnum(8, _B64URL)}.js", f"/_nuxt/entry.{rng.hexid(8)}.css", f"/_nuxt/{name}.{rng.hexid(8)}.{img}",
                         f"/_nuxt/builds/meta/{rng.hexid(8)}-{rng.hexid(4)}-{rng.hexid(4)}.json", f"/_nuxt/{name.title().replace('-', '')}.{rng.alnum(8, _B64URL)}.js"])  # fmt: skip
    elif layout == "sveltekit":
        path = rng.pick([f"/_app/immutable/chunks/{name}.{rng.alnum(8, _B64URL)}.js", f"/_app/immutable/entry/app.{rng.alnum(8, _B64URL)}.js",
                         f"/_app/immutable/assets/{name}.{rng.hexid(8)}.css", f"/_app/immutable/assets/{name}.{rng.hexid(8)}.{rng.pick(['woff2', img])}",
                         "/_app/version.json"])  # fmt: skip
    elif layout == "astro":
        path = f"/_astro/{rng.pick([name, 'index', 'client', 'hoisted'])}.{rng.alnum(8, _B64URL)}.{rng.pick(['js', 'css', 'webp', 'avif', img])}"
        if path.endswith(("webp", "avif", "png", "jpg")) and rng.chance(0.3):
            path = "/_image"
            q = [("href", f"/_astro/{name}.{rng.alnum(8, _B64URL)}.{img}"), ("w", str(rng.pick([400, 800, 1200]))), ("f", "webp")]
    elif layout == "webpacker":
        path = rng.pick([f"/packs/js/{name}-{rng.hexid(20)}.js", f"/packs/css/{name}-{rng.hexid(20)}.css", f"/packs/media/images/{name}-{rng.hexid(20)}.{img}",
                         f"/packs/js/{name}-{rng.hexid(20)}.js.map", f"/rails/active_storage/representations/redirect/{rng.alnum(40, _B64URL)}/{name}.{img}",
                         f"/rails/active_storage/blobs/proxy/{rng.alnum(40, _B64URL)}/{name}.{rng.pick([img, 'pdf'])}"])  # fmt: skip
    elif layout == "angular":
        path = rng.pick([f"/main.{rng.hexid(16)}.js", f"/polyfills.{rng.hexid(16)}.js", f"/runtime.{rng.hexid(16)}.js", f"/styles.{rng.hexid(16)}.css",
                         f"/{rng.randrange(100, 999)}.{rng.hexid(16)}.js", f"/chunk-{rng.alnum(8, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')}.js",
                         f"/media/{name}.{rng.hexid(16)}.woff2"])  # fmt: skip
    elif layout == "drupal":
        path = rng.pick([f"/sites/default/files/styles/{rng.pick(['large', 'medium', 'wide', 'thumbnail'])}/public/{rng.randrange(2016, 2027)}-{rng.randrange(1, 13):02d}/{name}.{img}",
                         "/core/misc/drupal.js", "/core/assets/vendor/jquery/jquery.min.js", f"/themes/contrib/{rng.pick(['olivero', 'gin', 'claro'])}/css/{name}.css",
                         f"/sites/default/files/css/css_{rng.alnum(43, _B64URL)}.css", f"/modules/contrib/{vocab.slug(rng, 1)}/js/{name}.js"])  # fmt: skip
        if "/styles/" in path:
            q = [("itok", rng.alnum(8, _B64URL))]
        elif "/css/css_" in path:
            q = [("delta", str(rng.randrange(0, 3))), ("language", rng.pick(["en", "de", "fr"])), ("theme", "olivero"), ("include", rng.alnum(40, _B64URL))]
        elif rng.chance(0.6):
            q = [("v", rng.pick(["10.2.4", "10.3.1", "9.5.11", rng.alnum(6)]))]
    elif layout == "magento":
        path = rng.pick([f"/static/version{rng.randrange(1600000000, 1800000000)}/frontend/Magento/luma/en_US/{rng.pick(['mage/calendar.css', 'css/styles-m.css', 'requirejs/require.js', 'Magento_Theme/favicon.ico'])}",
                         f"/media/catalog/product/cache/{rng.hexid(32)}/{name[0]}/{name[-1]}/{name}-{rng.randrange(1, 9)}.{img}", f"/pub/media/wysiwyg/{name}.{img}"])  # fmt: skip
    elif layout == "shopify":
        path = rng.pick([f"/cdn/shop/files/{name}.{img}", f"/cdn/shop/products/{name}_{rng.randrange(1, 9)}.{img}", f"/cdn/shop/t/{rng.randrange(1, 60)}/assets/{rng.pick(['theme', 'base', 'global', name])}.{_code(rng)}",
                         f"/s/files/1/{rng.randrange(1000, 9999):04d}/{rng.randrange(1000, 9999):04d}/{rng.randrange(1000, 9999):04d}/files/{name}.{img}"])  # fmt: skip
        q = [("v", str(rng.randrange(1600000000, 1800000000)))] + ([("width", str(rng.pick([360, 533, 720, 940, 1066, 1500])))] if path.endswith(img) and rng.chance(0.5) else [])
    elif layout == "laravel":
        path = rng.pick([f"/build/assets/{rng.pick(['app', name])}-{rng.alnum(8, _B64URL)}.{_code(rng)}", "/js/app.js", "/css/app.css", "/vendor/livewire/livewire.js",
                         f"/storage/{rng.pick(['avatars', 'uploads', 'products'])}/{rng.alnum(40)}.{img}"])  # fmt: skip
        if path in ("/js/app.js", "/css/app.css", "/vendor/livewire/livewire.js"):
            q = [("id", rng.hexid(rng.pick([8, 20, 32])))]
    elif layout == "phoenix":
        path = rng.pick([f"/assets/app-{rng.hexid(32)}.{rng.pick(['js', 'css'])}", f"/images/{name}-{rng.hexid(32)}.{img}", f"/fonts/{name}-{rng.hexid(32)}.woff2"])
        if rng.chance(0.5):
            q = [("vsn", "d")]
    elif layout == "gatsby":
        path = rng.pick([f"/static/{rng.hexid(32)}/{rng.randrange(1000, 9999)}/{name}.{img}", f"/{rng.pick(['app', 'framework', 'webpack-runtime', 'commons'])}-{rng.hexid(20)}.js",
                         f"/component---src-pages-{name}-{rng.pick(['js', 'tsx'])}-{rng.hexid(20)}.js", f"/styles.{rng.hexid(20)}.css",
                         f"/page-data/{name}/page-data.json"])  # fmt: skip
    elif layout == "typo3":
        path = rng.pick([f"/typo3conf/ext/{vocab.slug(rng, 1)}/Resources/Public/{rng.pick(['Css', 'JavaScript', 'Images', 'Fonts'])}/{name}.{rng.pick(['css', 'js', img, 'woff2'])}",
                         f"/fileadmin/_processed_/{rng.hexid(1)}/{rng.hexid(1)}/csm_{name}_{rng.hexid(10)}.{img}", f"/fileadmin/user_upload/{name}.{rng.pick([img, 'pdf'])}",
                         f"/typo3temp/assets/compressed/merged-{rng.hexid(32)}.{rng.pick(['css', 'js'])}"])  # fmt: skip
        if rng.chance(0.5) and "/_processed_/" not in path:
            q = [(str(rng.randrange(1600000000, 1800000000)), "")]
    elif layout == "ghost":
        path = rng.pick([f"/content/images/size/w{rng.pick([300, 600, 1000, 2000])}/{rng.randrange(2018, 2027)}/{rng.randrange(1, 13):02d}/{name}.{img}",
                         f"/content/images/{rng.randrange(2018, 2027)}/{rng.randrange(1, 13):02d}/{name}.{img}", f"/assets/built/{rng.pick(['screen', 'casper', 'source'])}.{rng.pick(['css', 'js'])}",
                         f"/public/{rng.pick(['cards.min.css', 'cards.min.js', 'member-attribution.min.js'])}"])  # fmt: skip
        if "/assets/built/" in path or path.startswith("/public/"):
            q = [("v", rng.hexid(10))]
    else:  # anywhere: the site's own folders, a hashed or plain file name
        folders = "/".join(vocab.slug(rng, 1) for _ in range(rng.randrange(1, 5)))
        ext = rng.pick(["js", "css", img, img, "woff2", "mp4", "pdf", "svg", "ico", "map", "webm", "mp3", "ttf"])
        stem = rng.pick([name, f"{name}.{rng.hexid(8)}", f"{name}-{rng.hexid(rng.pick([8, 10, 20]))}", f"{name}.min"])
        path = f"/{folders}/{stem}.{ext}"
        if rng.chance(0.35):
            q = [(rng.pick(["v", "ver", "version", "t", "rev", "h", "cb"]), rng.pick([rng.hexid(8), str(rng.randrange(1, 900)), vocab.timestamp(rng)]))]
    last = path.rsplit("/", 1)[-1]
    ext = last.rsplit(".", 1)[-1] if "." in last else "webp" if path == "/_image" else ""
    return path, q, DEST.get(ext, "empty")
