"""Per-split pools of the shared data: the benign texts, API records and benign values one split may use.

Training requests are built only from training data and test requests from test data, for focus values
and filler alike (a long benign body around a test payload is made of test texts), so nothing held out
reaches training through the padding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.corpus import split
from engine.corpus.rand import Rng
from engine.corpus.split import short, skeleton

SHORT_CHARS = 160


def api_group(rec: dict[str, Any]) -> str:
    src, path = rec["source"], rec["source_path"]
    if src == "octokit/webhooks":  # payload-examples/<host>/<event>/<file>: variants of one event stay together
        parts = path.split("/")
        return f"api:github:{parts[2] if len(parts) > 3 else path}"
    if src == "stripe/openapi":
        obj = rec["payload"].split('"object":"', 1)[-1].split('"', 1)[0]
        return f"api:stripe:{obj}"
    return f"api:{rec['context']}:{src}:{path}"


def api_category(rec: dict[str, Any]) -> str:
    ctx, src, path = rec["context"], rec["source"], rec["source_path"]
    if ctx == "graphql":
        return "graphql"
    if ctx == "token" or ctx.startswith("header:"):
        return "token"
    if ctx == "request":
        return "raw"
    if src == "octokit/webhooks":
        return "github"
    if src == "stripe/openapi":
        return "stripe"
    if path.startswith("analytics_beacon"):
        return "beacon_url" if ctx == "url" else "beacon_body"
    return "oauth_url" if ctx == "url" else "oauth_body"


def value_group(rec: dict[str, Any]) -> str:
    return f"bp:{short(skeleton(rec['payload']))}"


@dataclass
class Pools:
    split: str
    texts: dict[str, list[dict]] = field(default_factory=dict)  # kind → records
    short: dict[str, list[dict]] = field(default_factory=dict)  # kind → records of one short line
    api: dict[str, list[dict]] = field(default_factory=dict)  # category → records
    values: list[dict] = field(default_factory=list)  # benign payload values (param context)
    agents: list[dict] = field(default_factory=list)  # benign User-Agent values
    tokens: list[str] = field(default_factory=list)
    cache: dict[str, list] = field(default_factory=dict)  # generated building blocks of long bodies, made once
    image_uploads: bool = False  # uploads draw SVG, GIF, ICO and metadata-bearing images (engine.corpus.images)
    xml_values: bool = False  # parameter payloads go into XML element text and attributes too (engine.corpus.xmlvalues)
    site_layouts: bool = False  # assets in more layouts and CMS page saves, both sides (engine.corpus.scenes_site)
    mounts: bool = False  # sites served from a folder (/public/, /wordpress/, ...), both sides (scenes_site.mounted)
    legacy_folders: bool = False  # CGI applications under /cgi-bin/, sites under /site/, /includes/, ... (scenes_site)
    oauth_flows: bool = False  # OAuth 2.0, OpenID Connect and SAML requests, both sides (scenes_auth)
    bare_clients: bool = False  # requests with next to no headers, both sides (scenes_web.bare, profiles.bare)

    def cached(self, key: str, make, n: int) -> list:
        """n values from `make()` made once per pool: long exports reuse them instead of generating
        thousands of fresh items per request (the build must stay within minutes)."""
        if key not in self.cache:
            self.cache[key] = [make() for _ in range(n)]
        return self.cache[key]

    def text(self, rng: Rng, kinds: tuple[str, ...], short: bool = False) -> dict:
        """A random text of one of `kinds` (any kind if none is available)."""
        src = self.short if short else self.texts
        have = [k for k in kinds if src.get(k)] or [k for k in src if src[k]] or [k for k in self.texts if self.texts[k]]
        kind = rng.pick(have)
        pool = src.get(kind) or self.texts[kind]
        return rng.pick(pool)


def build_pools(texts: list[dict], api: list[dict], values: list[dict]) -> dict[str, Pools]:
    pools = {s: Pools(s) for s in ("train", "test")}
    for rec in texts:
        p = pools["test" if split.text_is_test(rec) else "train"]
        rec["group"] = split.text_group(rec)
        p.texts.setdefault(rec["kind"], []).append(rec)
        t = rec["text"]
        if len(t) <= SHORT_CHARS and "\n" not in t:
            p.short.setdefault(rec["kind"], []).append(rec)
    for category, recs in _grouped(api, api_group, api_category).items():
        test = split.choose_test(_counts(recs))
        for rec in recs:
            p = pools["test" if rec["group"] in test else "train"]
            p.api.setdefault(category, []).append(rec)
            if category == "token" and rec["context"] == "token":
                p.tokens.append(rec["payload"])
    for context, recs in _grouped(values, value_group, lambda r: r["context"]).items():
        test = split.choose_test(_counts(recs))
        for rec in recs:
            p = pools["test" if rec["group"] in test else "train"]
            (p.agents if context == "header:User-Agent" else p.values).append(rec)
    return pools


def _grouped(recs: list[dict], group, category) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for rec in recs:
        rec["group"] = group(rec)
        out.setdefault(category(rec), []).append(rec)
    return out


def _counts(recs: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in recs:
        out[rec["group"]] = out.get(rec["group"], 0) + 1
    return out
