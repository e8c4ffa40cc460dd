"""Rich text as editors save it: the HTML (or wikitext) a CMS page, a product description or an e-mail
template carries when someone presses Save.

The shared texts hold HTML as documentation snippets (`<code>mod_rewrite</code>`, a `<nav>` example); what
editors send is whole documents of headings, paragraphs with inline marks and links, figures with `srcset`
and `loading="lazy"`, tables, quotes, code blocks, embedded videos with `allow` and `allowfullscreen`,
inline styles, `&nbsp;`, WordPress block comments, Confluence macros and wikitext templates. On a dev split
that held out whole generator families, one such family (long HTML saved through a form) owned the top
1 % of benign block scores (bench/RESULTS.md, "Recipe variants trained at once on a GPU"). The words come
from the split's own prose, so nothing held out reaches training.
"""

from __future__ import annotations

import html
import json

from engine.corpus import vocab
from engine.corpus.rand import Rng

DIALECTS = ("wp_blocks", "tinymce", "ckeditor", "email", "confluence", "plain")
_COLORS = ["#333333", "#1a73e8", "#d93025", "rgb(34, 34, 34)", "#0b5394", "#38761d", "#7f6000", "var(--wp--preset--color--primary)"]
_EMBEDS = [
    ("https://www.youtube.com/embed/{v}", 'allow="accelerometer; autoplay; clipboard-write; encrypted-media; gyroscope; picture-in-picture" allowfullscreen'),
    ("https://www.youtube-nocookie.com/embed/{v}?rel=0", 'allow="autoplay; encrypted-media" allowfullscreen'),
    ("https://player.vimeo.com/video/{n}?h={h}", 'allow="autoplay; fullscreen; picture-in-picture" allowfullscreen'),
    ("https://www.google.com/maps/embed?pb=!1m18!1m12!1m3!1d{n}!2d-0.1{n}!3d51.5{n}", 'style="border:0;" allowfullscreen="" loading="lazy" referrerpolicy="no-referrer-when-downgrade"'),
    ("https://open.spotify.com/embed/track/{v}", 'allow="clipboard-write; encrypted-media; fullscreen; picture-in-picture" loading="lazy"'),
]  # fmt: skip


class Writer:
    """Draws sentences from a split's prose and code texts and lays them out as one editor would."""

    def __init__(self, rng: Rng, pools, dialect: str, host: str) -> None:
        self.rng, self.pools, self.dialect, self.host = rng, pools, dialect, host

    def sentence(self) -> str:
        t = self.pools.text(self.rng, ("prose",), short=True)["text"].strip()
        return t if len(t) < 400 else t[:400].rsplit(" ", 1)[0] + "."

    def url(self) -> str:
        rng = self.rng
        if rng.chance(0.5):
            return f"https://{self.host}/{vocab.slug(rng, rng.randrange(1, 4))}/"
        return f"https://{vocab.domain(rng)}/{vocab.slug(rng, rng.randrange(1, 3))}" + (f"?utm_source={vocab.slug(rng, 1)}" if rng.chance(0.2) else "")

    def image(self) -> str:
        rng = self.rng
        name, ext = vocab.slug(rng, 2), rng.pick(["jpg", "png", "webp"])
        src = f"https://{self.host}/wp-content/uploads/{rng.randrange(2018, 2027)}/{rng.randrange(1, 13):02d}/{name}" if self.dialect == "wp_blocks" else f"/{rng.pick(['media', 'uploads', 'files', 'images'])}/{name}"
        w = rng.pick([640, 800, 1024, 1200])
        if self.dialect == "confluence":
            return f'<ac:image ac:width="{w}"><ri:attachment ri:filename="{name}.{ext}" /></ac:image>'
        attrs = f'src="{src}.{ext}" alt="{html.escape(vocab.title(rng))}"'
        if rng.chance(0.6):
            attrs += f' width="{w}" height="{w * 2 // 3}"'
        if rng.chance(0.4):
            attrs += f' srcset="{src}-300x200.{ext} 300w, {src}-768x512.{ext} 768w, {src}.{ext} {w}w" sizes="(max-width: {w}px) 100vw, {w}px"'
        if rng.chance(0.5):
            attrs += ' loading="lazy" decoding="async"'
        if self.dialect == "wp_blocks":
            attrs += f' class="wp-image-{rng.randrange(10, 9000)}"'
        return f"<img {attrs}>" if self.dialect != "email" else f'<img {attrs} style="display:block;border:0;max-width:100%;">'

    def inline(self, text: str) -> str:
        """Escape a sentence and mark a few of its words up (bold, italic, a link, code, a coloured span)."""
        rng = self.rng
        words = html.escape(text, quote=False).split(" ")
        for _ in range(rng.randrange(0, 3)):
            if len(words) < 4:
                break
            i = rng.randrange(0, len(words) - 2)
            span = " ".join(words[i : i + rng.randrange(1, 3)])
            mark = rng.pick(["strong", "em", "a", "a", "code", "span", "u", "s"])
            if mark == "a":
                extra = ' target="_blank" rel="noreferrer noopener"' if rng.chance(0.4) else ""
                new = f'<a href="{self.url()}"{extra}>{span}</a>'
            elif mark == "span":
                new = f'<span style="color: {rng.pick(_COLORS)};">{span}</span>'
            else:
                new = f"<{mark}>{span}</{mark}>"
            words[i : i + len(span.split(" "))] = [new]
        out = " ".join(words)
        if self.dialect in ("tinymce", "ckeditor") and self.rng.chance(0.2):
            out += "&nbsp;"
        return out

    def paragraph(self) -> str:
        return " ".join(self.inline(self.sentence()) for _ in range(self.rng.randrange(1, 5)))

    def block(self) -> str:
        """One block of the document in this dialect."""
        rng = self.rng
        kind = rng.pick(["p", "p", "p", "p", "h", "list", "figure", "quote", "table", "code", "embed", "hr", "button"])
        wp = self.dialect == "wp_blocks"
        if kind == "h":
            level = rng.pick([2, 2, 3, 4])
            inner = f'<h{level} class="wp-block-heading">' if wp else f"<h{level}>"
            out = f"{inner}{html.escape(vocab.title(rng), quote=False)}</h{level}>"
            if not wp:
                return out
            attrs = "" if level == 2 else f' {{"level":{level}}}'
            return f"<!-- wp:heading{attrs} -->\n{out}\n<!-- /wp:heading -->"
        if kind == "list":
            tag = rng.pick(["ul", "ol"])
            items = "".join(f"<li>{self.inline(self.sentence())}</li>" for _ in range(rng.randrange(2, 7)))
            out = f'<{tag} class="wp-block-list">{items}</{tag}>' if wp else f"<{tag}>{items}</{tag}>"
            return f"<!-- wp:list -->\n{out}\n<!-- /wp:list -->" if wp else out
        if kind == "figure":
            cap = f"<figcaption>{self.inline(self.sentence())}</figcaption>" if rng.chance(0.5) else ""
            if wp:
                n = rng.randrange(10, 9000)
                return f'<!-- wp:image {{"id":{n},"sizeSlug":"large","linkDestination":"none"}} -->\n<figure class="wp-block-image size-large">{self.image()}{cap}</figure>\n<!-- /wp:image -->'
            if self.dialect == "ckeditor":
                return f'<figure class="image{rng.pick(["", " image-style-side", " image_resized"])}">{self.image()}{cap}</figure>'
            return f"<p>{self.image()}</p>" if not cap else f"<figure>{self.image()}{cap}</figure>"
        if kind == "quote":
            cite = f"<cite>{html.escape(vocab.full_name(rng))}</cite>" if rng.chance(0.5) else ""
            inner = f"<p>{self.inline(self.sentence())}</p>{cite}</blockquote>"
            return f'<!-- wp:quote -->\n<blockquote class="wp-block-quote">{inner}\n<!-- /wp:quote -->' if wp else f"<blockquote>{inner}"
        if kind == "table":
            cols = rng.randrange(2, 5)
            head = "".join(f"<th>{html.escape(vocab.slug(rng, 1).title())}</th>" for _ in range(cols))
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(rng.pick([vocab.product(rng), vocab.price(rng, True), vocab.city(rng), str(rng.randrange(1, 500))]))}</td>" for _ in range(cols)) + "</tr>" for _ in range(rng.randrange(2, 8)))
            style = ' style="border-collapse: collapse; width: 100%;" border="1"' if self.dialect == "tinymce" else ""
            out = f"<table{style}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
            return f'<!-- wp:table -->\n<figure class="wp-block-table">{out}</figure>\n<!-- /wp:table -->' if wp else f'<figure class="table">{out}</figure>' if self.dialect == "ckeditor" else out
        if kind == "code":
            code = self.pools.text(rng, ("code", "shell", "config"))["text"]
            code = html.escape(code[:1500], quote=False)
            lang = rng.pick(["javascript", "python", "bash", "php", "css", "plaintext"])
            out = f'<pre class="wp-block-code"><code>{code}</code></pre>' if wp else f'<pre><code class="language-{lang}">{code}</code></pre>'
            return f"<!-- wp:code -->\n{out}\n<!-- /wp:code -->" if wp else out
        if kind == "embed":
            src, attrs = rng.pick(_EMBEDS)
            src = src.format(v=rng.alnum(11, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"), n=rng.randrange(10**6, 10**9), h=rng.hexid(10))
            frame = f'<iframe width="560" height="315" src="{src}" title="{html.escape(vocab.title(rng))}" frameborder="0" {attrs}></iframe>'
            if wp:
                return f'<!-- wp:embed {{"url":"{src}","type":"video","providerNameSlug":"youtube"}} -->\n<figure class="wp-block-embed is-type-video"><div class="wp-block-embed__wrapper">\n{src}\n</div></figure>\n<!-- /wp:embed -->'
            return f'<div class="{rng.pick(["video-wrapper", "embed-responsive embed-responsive-16by9", "media"])}">{frame}</div>'
        if kind == "hr":
            return '<!-- wp:separator -->\n<hr class="wp-block-separator has-alpha-channel-opacity"/>\n<!-- /wp:separator -->' if wp else "<hr>"
        if kind == "button":
            label = html.escape(vocab.title(rng))
            if wp:
                return f'<!-- wp:buttons -->\n<div class="wp-block-buttons"><!-- wp:button -->\n<div class="wp-block-button"><a class="wp-block-button__link wp-element-button" href="{self.url()}">{label}</a></div>\n<!-- /wp:button --></div>\n<!-- /wp:buttons -->'
            return f'<p><a class="{rng.pick(["btn btn-primary", "button", "cta"])}" href="{self.url()}">{label}</a></p>'
        p = self.paragraph()
        if wp:
            return f"<!-- wp:paragraph -->\n<p>{p}</p>\n<!-- /wp:paragraph -->"
        if self.dialect == "tinymce" and rng.chance(0.2):
            return f'<p style="text-align: {rng.pick(["center", "justify", "right"])};">{p}</p>'
        return f"<p>{p}</p>"

    def document(self, size: int) -> str:
        """Blocks up to about `size` characters, wrapped as the dialect wraps a document."""
        out, n = [], 0
        while n < size:
            b = self.block()
            out.append(b)
            n += len(b) + 1
        sep = "\n\n" if self.dialect == "wp_blocks" else "\n" if self.rng.chance(0.5) else ""
        body = sep.join(out)
        if self.dialect == "email":
            return email_wrap(self.rng, body)
        if self.dialect == "confluence":
            return confluence(self.rng, body)
        return body


def email_wrap(rng: Rng, body: str) -> str:
    """An e-mail template: tables for layout, inline styles, a preheader and an unsubscribe footer."""
    font = rng.pick(["Arial, Helvetica, sans-serif", "'Helvetica Neue', Helvetica, Arial, sans-serif", "Georgia, serif"])
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<style>body{{margin:0;padding:0}} @media only screen and (max-width:600px){{.container{{width:100%!important}}}}</style></head>'
        f'<body style="margin:0;padding:0;background:#f4f4f4;"><span style="display:none;max-height:0;overflow:hidden;">{{{{preheader}}}}</span>'
        f'<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0"><tr><td align="center">'
        f'<table class="container" role="presentation" width="600" cellpadding="0" cellspacing="0" style="background:#ffffff;font-family:{font};">'
        f'<tr><td style="padding:24px;">{body}</td></tr>'
        '<tr><td style="padding:16px;font-size:12px;color:#888888;">Hi {{first_name}}, you are receiving this because you subscribed. '
        '<a href="{{unsubscribe_url}}" style="color:#888888;">Unsubscribe</a></td></tr></table></td></tr></table></body></html>'
    )


def confluence(rng: Rng, body: str) -> str:
    """Confluence storage format: XHTML with macros around some of the blocks."""
    macro = rng.pick(["info", "note", "tip", "warning"])
    toc = '<ac:structured-macro ac:name="toc" ac:schema-version="1"><ac:parameter ac:name="maxLevel">3</ac:parameter></ac:structured-macro>'
    panel = f'<ac:structured-macro ac:name="{macro}" ac:schema-version="1" ac:macro-id="{vocab.uuid(rng)}"><ac:rich-text-body><p>{html.escape(vocab.title(rng))}</p></ac:rich-text-body></ac:structured-macro>'
    user = f'<p><ac:link><ri:user ri:account-id="{rng.hexid(24)}" /></ac:link> {html.escape(vocab.title(rng))}</p>'
    return (toc if rng.chance(0.4) else "") + panel + body + (user if rng.chance(0.5) else "")


def wikitext(rng: Rng, w: Writer, size: int) -> str:
    """MediaWiki source: headings, bold and italics, internal and external links, templates, references,
    lists and a table."""
    out, n = [], 0
    if rng.chance(0.5):
        out.append("{{" + rng.pick(["Infobox company", "Infobox person", "Short description|" + vocab.title(rng), "Use dmy dates|date=March 2024"]) + "}}")
    while n < size:
        kind = rng.pick(["p", "p", "p", "h", "list", "table", "ref"])
        if kind == "h":
            eq = "=" * rng.pick([2, 2, 3])
            b = f"{eq} {vocab.title(rng)} {eq}"
        elif kind == "list":
            mark = rng.pick(["*", "#"])
            b = "\n".join(f"{mark} [[{vocab.title(rng)}]] – {w.sentence()}" for _ in range(rng.randrange(2, 6)))
        elif kind == "table":
            rows = "\n|-\n".join(f"| {vocab.city(rng)} || {rng.randrange(1, 10**6):,} || {vocab.date(rng)}" for _ in range(rng.randrange(2, 6)))
            b = '{| class="wikitable sortable"\n! City !! Population !! Date\n|-\n' + rows + "\n|}"
        elif kind == "ref":
            b = f"{w.sentence()}<ref>{{{{cite web |url={w.url()} |title={vocab.title(rng)} |access-date={vocab.date(rng)[:10]}}}}}</ref>"
        else:
            s = w.sentence()
            words = s.split(" ")
            if len(words) > 4:
                i = rng.randrange(0, len(words) - 1)
                words[i] = rng.pick([f"[[{words[i]}]]", f"'''{words[i]}'''", f"''{words[i]}''", f"[[{vocab.title(rng)}|{words[i]}]]"])
            b = " ".join(words) + (" " + w.sentence() if rng.chance(0.5) else "")
        out.append(b)
        n += len(b) + 2
    if rng.chance(0.5):
        out.append("== References ==\n{{reflist}}\n\n[[Category:" + vocab.title(rng) + "]]")
    return "\n\n".join(out)


def lexical(rng: Rng, w: Writer, size: int) -> str:
    """Ghost's Lexical editor state: a JSON tree of paragraphs and headings, serialised as a string."""
    children, n = [], 0
    while n < size:
        if rng.chance(0.2):
            node = {"children": [{"detail": 0, "format": 0, "mode": "normal", "style": "", "text": vocab.title(rng), "type": "extended-text", "version": 1}],
                    "direction": "ltr", "format": "", "indent": 0, "type": "extended-heading", "version": 1, "tag": rng.pick(["h2", "h3"])}  # fmt: skip
        else:
            text = w.sentence()
            node = {"children": [{"detail": 0, "format": rng.pick([0, 0, 1, 2]), "mode": "normal", "style": "", "text": text, "type": "extended-text", "version": 1}],
                    "direction": "ltr", "format": "", "indent": 0, "type": "paragraph", "version": 1}  # fmt: skip
        children.append(node)
        n += len(json.dumps(node))
    return json.dumps({"root": {"children": children, "direction": "ltr", "format": "", "indent": 0, "type": "root", "version": 1}}, ensure_ascii=False)
