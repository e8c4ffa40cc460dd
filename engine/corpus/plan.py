"""How many records of each kind a build makes (at --scale 1.0), and which payload records are usable.

Attack classes are rebalanced: the huge template lists (path traversal, sqli, rfi) are capped by drawing
round-robin over their groups, and thin classes are oversampled by embedding the same payload in up to
MAX_REPEAT different requests (different positions, encodings and surrounding requests).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from engine.corpus.rand import Rng
from engine.corpus.raw import parse_request, visible_anomaly

TRAIN_TARGETS = {
    "sqli": 20000, "xss": 16000, "path_traversal": 12000, "cmdi": 9000, "code_injection": 7000, "scanner": 8000,
    "ssrf": 6000, "ssti": 6000, "rfi": 4500, "xxe": 4500, "jndi": 5000, "deserialization": 4500, "nosqli": 3500,
    "crlf": 3000, "ldapi": 2500, "open_redirect": 4000, "protocol_anomaly": 4000, "ssi": 2500, "format_string": 2000,
    "xpathi": 1200, "graphql": 3000, "prototype_pollution": 2000, "mail_injection": 2500, "session_fixation": 2500,
}  # fmt: skip
TEST_SHARE, TEST_MIN = 0.16, 60
MAX_REPEAT = 200
EVASION_TOTAL = 12000
APACHE_SCANNER_REPEAT = 4  # 29 real probes: each sent with a few different header profiles
# scanner-list entries that are ordinary paths on any site: as attacks they would contradict benign traffic
# (every application has an /admin, a /dashboard, a /config page: one request for one of them is not a probe)
GENERIC_PATHS = frozenset({"", "search", "sitemap.xml", "robots.txt", "index.html", "index.php", "index.htm", "favicon.ico", "login",
                           "admin", "administrator", "wp-admin", "dashboard", "config", "console", "settings", "manager", "manual",
                           "downloads", "download", "account", "accounts", "user", "users", "register", "signup", "signin",
                           "contact", "about", "cart", "api", "status", "docs", "help", "uploads", "media", "images", "feed",
                           "blog", "news", "portal", "home", "reports", "logout"})  # fmt: skip


# a path made only of plain words (`fotos/`, `blog/old/`, `mqseries/`): fuzzdb's directory-guessing lists hold
# thousands, and one request for one of them is an ordinary 404, not a probe. CGI scripts stay (`cgi-bin/phf`).
PLAIN_WORD_PATH = re.compile(r"/?[A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)*/?")
MIN_PAYLOAD_CHARS = 3  # `!`, `*`, `@*`, `%21`, `1'`: evidence of nothing on its own (and common in real input)


def decoded_length(payload: str) -> int:
    """Characters a payload holds once percent- and backslash-hex escapes are read (`%21`, `\\21` → 1)."""
    return len(re.sub(r"\\[0-9A-Fa-f]{2}", "x", unquote(payload)).strip())


def usable(rec: dict[str, Any]) -> str | None:
    """None when the payload record can be used, else the reason it is dropped."""
    if rec["attack_class"] == "scanner" and rec["context"] == "path":
        path = rec["payload"]
        if path.strip("/").lower() in GENERIC_PATHS:
            return "scanner path that is an ordinary page"
        if PLAIN_WORD_PATH.fullmatch(path) and "cgi-bin" not in path.lower():
            return "scanner path of plain words (a directory guess, not evidence of a probe)"
    if rec["context"] in ("param", "path") and decoded_length(rec["payload"]) < MIN_PAYLOAD_CHARS:
        return f"attack value shorter than {MIN_PAYLOAD_CHARS} characters once decoded"
    if rec["context"] == "request" and not visible_anomaly(parse_request(rec["payload"])):
        return "protocol anomaly invisible after parsing (HTTP version, Host, method case, quiet Content-Length)"
    return None


def targets(split: str, scale: float) -> dict[str, int]:
    if split == "train":
        return {c: max(1, round(n * scale)) for c, n in TRAIN_TARGETS.items()}
    return {c: max(1, round(max(TEST_MIN, n * TEST_SHARE) * scale)) for c, n in TRAIN_TARGETS.items()}


def schedule(rng: Rng, recs: list[dict], n: int, max_repeat: int = MAX_REPEAT) -> list[dict]:
    """n payload records drawn round-robin over their groups (shuffled), so no template list dominates;
    when the class has fewer than n records, the sequence repeats (each repeat is embedded anew)."""
    groups: dict[str, list[dict]] = {}
    for rec in recs:
        groups.setdefault(rec["group"], []).append(rec)
    keys = list(groups)
    rng.shuffle(keys)
    for k in keys:
        rng.shuffle(groups[k])
    seq: list[dict] = []
    depth = 0
    while len(seq) < len(recs):
        seq += [groups[k][depth] for k in keys if depth < len(groups[k])]
        depth += 1
    out: list[dict] = []
    for _ in range(max_repeat):
        if len(out) >= n or not seq:
            break
        out += seq[: n - len(out)]
    return out
