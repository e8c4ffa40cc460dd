"""The labelling policy: which decision a request deserves, and which feature tags describe it.

Used to label the training corpus, and by the rules as their routing fallback, so the model and the rules
learn and apply one written policy:

- `block`:  an attack payload anywhere in the request, or hostile probing (scanners, exploit paths).
- `origin`: benign, but must reach the origin fresh: an unsafe method, credentials (Authorization; a
            cookie on anything but a static asset), a personalised area, or a client asking for no-cache.
- `cache`:  benign, GET/HEAD, no credentials, a static or public resource (by extension or folder).
- `allow`:  benign, GET/HEAD/OPTIONS, dynamic public content.

The routing half is a function of the request alone, so a model trained on labels this policy wrote can
only approximate it; a bundle that records `routing: policy` (engine/bundle.py) has the policy route what
it lets through (`by_policy`) and keeps to its real question, block or not.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterable

from engine.features import Features
from engine.verdict import LABELS, Source, Verdict

ATTACK_FEATURES = (
    "sqli", "xss", "rce", "traversal", "ssrf", "xxe", "ssti", "nosqli", "ldapi", "xpathi", "jndi", "crlf",
    "scanner", "rfi", "deserialization", "prototype_pollution", "graphql", "protocol", "mail_injection",
    "session_fixation", "open_redirect", "format_string", "ssi",
)  # fmt: skip
ROUTING_FEATURES = ("static", "auth", "unsafe_method")
FEATURES = ATTACK_FEATURES + ROUTING_FEATURES

# the corpus's attack_class → our feature tag (None: an attack with no class, such as CSIC's anomalies)
CLASS_FEATURE: dict[str, str | None] = {
    "sqli": "sqli", "xss": "xss", "cmdi": "rce", "code_injection": "rce", "path_traversal": "traversal",
    "ssrf": "ssrf", "xxe": "xxe", "ssti": "ssti", "nosqli": "nosqli", "ldapi": "ldapi", "xpathi": "xpathi",
    "jndi": "jndi", "crlf": "crlf", "scanner": "scanner", "rfi": "rfi", "deserialization": "deserialization",
    "prototype_pollution": "prototype_pollution", "graphql": "graphql", "protocol_anomaly": "protocol",
    "mail_injection": "mail_injection", "session_fixation": "session_fixation",
    "open_redirect": "open_redirect", "format_string": "format_string", "ssi": "ssi", "unknown": None,
}  # fmt: skip

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
STATIC_EXTENSIONS = frozenset(
    """css js mjs map png jpg jpeg gif webp avif svg ico bmp tif tiff woff woff2 ttf otf eot mp4 webm ogg
    mp3 wav flac m4a mov avi pdf zip gz tgz bz2 xz 7z rar txt csv xml rss atom wasm json5 webmanifest
    md5 sha256 swf apk dmg exe deb rpm iso""".split()
)
STATIC_PREFIXES = (
    "/static/", "/assets/", "/public/", "/dist/", "/build/", "/_next/static/", "/images/", "/img/",
    "/css/", "/js/", "/fonts/", "/media/", "/favicon", "/robots.txt", "/sitemap", "/cdn/", "/vendor/",
)  # fmt: skip
PERSONAL = re.compile(
    r"^/(?:[a-z]{2}(?:-[a-z]{2})?/)?(?:api/(?:v\d+/)?)?"
    r"(?:account|accounts|me|my|cart|basket|checkout|user|users/me|profile|settings|admin|login|logout|"
    r"signin|signout|signup|register|session|sessions|auth|oauth|dashboard|orders|billing|wallet|inbox|"
    r"messages|notifications|preferences|password|subscriptions)(?:/|$|\.)",
    re.I,
)
NO_CACHE = re.compile(r"no-cache|no-store|max-age=0", re.I)


def is_static(path: str) -> bool:
    p = path.split(";", 1)[0].lower()
    if p.startswith(STATIC_PREFIXES):
        return True
    last = p.rsplit("/", 1)[-1]
    return "." in last and last.rsplit(".", 1)[-1] in STATIC_EXTENSIONS


def has_credentials(f: Features, static: bool) -> bool:
    if f.header("authorization") or f.header("proxy-authorization"):
        return True
    return bool(f.header("cookie")) and not static


def route_label(f: Features) -> tuple[str, tuple[str, ...]]:
    """The routing decision for a benign request, with its routing feature tags."""
    static = is_static(f.path)
    creds = has_credentials(f, static)
    unsafe = f.method not in SAFE_METHODS
    tags = tuple(t for t, on in (("static", static), ("auth", creds), ("unsafe_method", unsafe)) if on)
    if unsafe or creds:
        return "origin", tags
    if NO_CACHE.search(f.header("cache-control")) or NO_CACHE.search(f.header("pragma")):
        return "origin", tags
    if PERSONAL.match(f.path):
        return "origin", tags
    if static and f.method in ("GET", "HEAD"):
        return "cache", tags
    return "allow", tags


def attack_tags(classes: Iterable[str | None]) -> tuple[str, ...]:
    out = []
    for c in classes:
        tag = CLASS_FEATURE.get(c or "unknown")
        if tag and tag not in out:
            out.append(tag)
    return tuple(out)


def label(f: Features, attack_classes: Iterable[str | None] | None = None) -> tuple[str, tuple[str, ...]]:
    """The full policy: `block` with the attack's tags for an attack, else the routing decision."""
    route, routing_tags = route_label(f)
    if attack_classes is not None:
        return "block", attack_tags(attack_classes) + routing_tags
    return route, routing_tags


def follows_policy(labelled: Iterable[tuple[Features, str]]) -> bool:
    """Whether every benign label among (request, label) pairs is the routing decision this policy gives."""
    return all(lab == "block" or route_label(f)[0] == lab for f, lab in labelled)


def by_policy(verdict: Verdict, f: Features) -> Verdict:
    """A model verdict that lets the request through, routed by this policy: its label and routing tags are
    route_label's, and its confidence is the model's that the request is benign (1 - the block score),
    since the route itself is certain. Blocks and verdicts of other sources are returned as they are."""
    if verdict.blocked or verdict.source is not Source.MODEL:
        return verdict
    label, routing = route_label(f)
    tags = tuple(t for t in verdict.features if t not in ROUTING_FEATURES) + routing
    conf = 1.0 - verdict.scores[LABELS.index("block")] if len(verdict.scores) == len(LABELS) else verdict.confidence
    return replace(verdict, label=label, features=tags, confidence=max(0.0, min(1.0, conf)))
