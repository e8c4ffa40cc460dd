"""Canonical request text: the one function that turns a request into what the model reads.

Training (engine.corpus) and serving (gateway.parse → engine.decide) both call `canonicalize`, so the
model never sees text shaped differently from what it learned on.

Every value is decoded the way an attacker's evasions need undoing (repeated percent-decoding, `+`,
%uXXXX, overlong UTF-8, HTML entities, JS/unicode escapes, base64 that decodes to text), then NFKC,
lower case, long identifiers masked ([ID], [HEX], [UUID], [NUM]) and control characters made visible.
Each value is also read by libinjection's SQL and XSS tokenisers; a positive adds [SQLI] / [XSS] at the
end of its line (the model learns how far to trust them: SQL in a documentation post is not an attack).
Headers that carry no signal in their usual shape (Accept, Host, tracing ids, ...) are left out, and the
kept ones are sorted, so a client's header profile cannot stand in for its label.

Layout, one field per line, `<tag> <name> = <value>`:

    m post                         method
    p /api/items/[NUM]             path
    q id = 1' or 1=1--             query argument
    h user-agent = mozilla/5.0 ... kept header
    c session = [ID]               cookie
    a bearer [CRED]                authorization: scheme only
    f comment = hello\\nworld       form field, multipart text part
    u file;shell.php;image/png = <?php ...   multipart file part
    j user.name = o'brien          JSON leaf
    b <?xml ...                    any other body

The body fields come after a line `--` so the runtime can keep the head whole and cut the body's middle
when the whole does not fit the model's token budget.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import html
import re
import unicodedata
from dataclasses import dataclass

import libinjection

from engine.features import Features
from engine.fields import Field, body_fields, cookies, cut, split_pairs, text_of

VERSION = 2  # bump when the text changes shape: a bundle records the version it was trained on
BODY_MARK = "\n--\n"
ESCAPED_LF = "\\n"  # how a line break inside a value is written, so that every field stays on one line
MAX_VALUE_CHARS = 1 << 20

# Headers whose usual values say nothing about intent. They are dropped while their value has the usual
# shape, and kept (so the model sees it) when it does not: `Accept-Language: ' or 1=1--` is not dropped.
QUIET_HEADERS = frozenset(
    """host connection keep-alive accept accept-encoding accept-language accept-charset
    upgrade-insecure-requests dnt te priority content-length via x-request-id x-correlation-id
    traceparent tracestate baggage x-amzn-trace-id x-cloud-trace-context x-real-ip x-forwarded-for
    x-forwarded-proto x-forwarded-port x-forwarded-host forwarded cdn-loop if-none-match if-modified-since
    if-match if-unmodified-since save-data purpose sec-purpose x-requested-with content-encoding
    x-csrf-token x-xsrf-token x-client-data""".split()
)
QUIET_PREFIXES = ("sec-", "x-b3-", "cf-", "x-datadog-", "x-clef-")
_QUIET_SHAPE = re.compile(r'^[A-Za-z0-9 \t\-_.,;:=*/+"!?#@~()\[\]]{0,1024}$')

_PCT = re.compile(r"%(?:u([0-9a-fA-F]{4})|([0-9a-fA-F]{2}))")
_BAD_PCT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_OVERLONG = re.compile(rb"[\xc0\xc1][\x80-\xbf]|\xe0[\x80-\x9f][\x80-\xbf]")
_JS_ESC = re.compile(r"\\(?:u\{([0-9a-fA-F]{1,6})\}|u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2}))")
_B64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{12,}={0,2}(?![A-Za-z0-9+/_=-])")
_B64_OPEN, _B64_CLOSE = "\ue000", "\ue001"  # private-use marks, survive NFKC and lower()
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_HEX = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{16,}\b")
_TOKEN = re.compile(r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[a-z])[\w-]{24,}(?![\w-])")
_NUM = re.compile(r"(?<![\w.])\d{7,}(?![\w.])")
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SPACES = re.compile(r"[ \t\f\v\u00a0]{2,}|[\t\f\v\u00a0]")  # single spaces need no rewriting
_DIGIT_RUN = re.compile(r"(?<![\w-])[\w-]*?\d[\w-]*")  # a run of word characters holding a digit
_SURROGATE = re.compile(r"[\ud800-\udfff]")  # lone halves from %uD83D-style escapes: not encodable


def _overlong(m: re.Match) -> bytes:
    b = m.group(0)
    if len(b) == 2:
        return bytes([((b[0] & 0x1F) << 6) | (b[1] & 0x3F)]) if (b[0] & 0x1F) < 2 else b
    return chr(((b[1] & 0x3F) << 6) | (b[2] & 0x3F)).encode("utf-8")


def _percent_bytes(s: str) -> bytes:
    """%XX and %uXXXX, one escape at a time (the rare IIS form, and strings with invalid escapes)."""
    out = bytearray()
    last = 0
    for m in _PCT.finditer(s):
        out += s[last : m.start()].encode("utf-8", "surrogatepass")
        if m.group(1):
            out += chr(int(m.group(1), 16)).encode("utf-8", "surrogatepass")
        else:
            out.append(int(m.group(2), 16))
        last = m.end()
    out += s[last:].encode("utf-8", "surrogatepass")
    return bytes(out)


def percent_decode(s: str) -> str:
    """One round of %XX and %uXXXX decoding; invalid escapes stay as they are; bytes that are not valid
    UTF-8 become Latin-1 characters; overlong UTF-8 forms (%c0%af) become the character they hide.

    The common case (only valid %XX escapes) runs in C: rewritten as \\xXX for codecs.escape_decode.
    A form field of non-Latin text has an escape every character or two, and a Python callback per
    escape would cost ~1 µs each."""
    if "%" not in s:
        return s
    if "%u" in s or "%U" in s or _BAD_PCT.search(s):
        data = _percent_bytes(s)
    else:
        raw = s.encode("utf-8", "surrogatepass")
        data = codecs.escape_decode(raw.replace(b"\\", b"\\\\").replace(b"%", b"\\x"))[0]
    return text_of(_OVERLONG.sub(_overlong, data))


def _js_char(m: re.Match) -> str:
    code = int(m.group(1) or m.group(2) or m.group(3), 16)
    return chr(code) if code <= 0x10FFFF else m.group(0)


def decode(s: str, plus: bool = False, rounds: int = 4) -> str:
    """Undo the encodings attackers stack: repeated percent-decoding, `+` (form values, first round
    only), HTML entities and JS/unicode escapes, until nothing changes or `rounds` is reached."""
    if plus and "+" in s:
        s = s.replace("+", " ")
    for _ in range(rounds):
        prev = s
        s = percent_decode(s)
        if "&" in s:
            s = html.unescape(s)
        if "\\" in s:
            s = _JS_ESC.sub(_js_char, s)
        if s == prev:
            break
    return s


def _printable_ratio(text: str) -> float:
    if not text:
        return 0.0
    ok = sum(1 for ch in text if ch.isprintable() or ch in "\r\n\t")
    return ok / len(text)


def _b64_text(token: str) -> str | None:
    raw = token.rstrip("=")
    if len(raw) % 4 == 1:
        return None
    padded = raw + "=" * (-len(raw) % 4)
    try:
        data = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 4 or _printable_ratio(text) < 0.95:
        return None
    letters = sum(ch.isalpha() for ch in text)
    return text if letters >= 2 and not text.isalnum() or " " in text else None


def expand_base64(s: str) -> str:
    """Mark base64 tokens that decode to text and put the text in their place (one level)."""
    if len(s) < 12:
        return s

    def repl(m: re.Match) -> str:
        text = _b64_text(m.group(0))
        return m.group(0) if text is None else _B64_OPEN + decode(text) + _B64_CLOSE

    return _B64.sub(repl, s)


def _mask_run(m: re.Match) -> str:
    run = m.group(0)
    if len(run) < 7:
        return run
    run = _UUID.sub("[UUID]", run)
    run = _HEX.sub("[HEX]", run)
    run = _TOKEN.sub("[ID]", run)
    return _NUM.sub("[NUM]", run)


def mask(s: str) -> str:
    """Mask identifiers that only add noise: UUIDs, long hex, long mixed tokens, long numbers. Every one
    holds a digit, so only runs with a digit are looked at (prose is passed over in one scan)."""
    return _DIGIT_RUN.sub(_mask_run, s)


def _visible(s: str) -> str:
    s = s.replace("\r", "\\r").replace("\n", ESCAPED_LF)
    s = _CTRL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", s)
    s = _SURROGATE.sub("\ufffd", s)
    return _SPACES.sub(" ", s).strip()


_SQLI_HINT = re.compile(r"['\"`)#;=]|--|/\*|\b(?:or|and|union|select|sleep|benchmark|waitfor|exec)\b", re.I)


def probes(decoded: str) -> str:
    """libinjection's verdicts on a decoded value, as marker tokens the model reads beside the value:
    its SQL and HTML tokenisers catch what a small model learns slowly from a small corpus. Values with
    none of SQL's or HTML's syntax are skipped (most values, and the whole cost on them)."""
    out = ""
    decoded = _SURROGATE.sub("\ufffd", decoded)  # a lone surrogate (from "\ud800" in JSON) is no UTF-8: libinjection raises
    if _SQLI_HINT.search(decoded) and libinjection.is_sql_injection(decoded)["is_sqli"]:
        out += " [SQLI]"
    if "<" in decoded or "=" in decoded or ":" in decoded:
        if libinjection.is_xss(decoded)["is_xss"]:
            out += " [XSS]"
    return out


def normalize(value: str, plus: bool = False, probe: bool = False) -> str:
    """A raw value → its canonical form (decode, base64, NFKC, lower, mask, visible controls), with
    the libinjection markers appended when `probe` is set.

    A pure function of its arguments, so the forms of short values are remembered (NORMALIZED_CACHE
    values of up to NORMALIZED_CACHE_CHARS characters, least recently used out first): header values,
    field names and common field values repeat from request to request, and a request's canonical text
    is built for every request, decision-cache hits included (it is the cache key)."""
    if len(value) <= NORMALIZED_CACHE_CHARS:
        return _normalize_cached(value, plus, probe)
    return _normalize(value, plus, probe)


def _normalize(value: str, plus: bool, probe: bool) -> str:
    if len(value) > MAX_VALUE_CHARS:
        value = value[:MAX_VALUE_CHARS]
    s = expand_base64(decode(value, plus=plus))
    marks = probes(s) if probe and s else ""
    s = mask(unicodedata.normalize("NFKC", s).lower())
    if _B64_OPEN in s:
        s = s.replace(_B64_OPEN, " [B64] ").replace(_B64_CLOSE, " [/B64] ")
    return _visible(s) + marks


NORMALIZED_CACHE = 1 << 14  # entries; each holds a value of at most NORMALIZED_CACHE_CHARS and its form
NORMALIZED_CACHE_CHARS = 256
_normalize_cached = functools.lru_cache(maxsize=NORMALIZED_CACHE)(_normalize)


def forget() -> None:
    """Drop the remembered forms (benchmarks measure a request's cold cost this way)."""
    _normalize_cached.cache_clear()


def _auth(value: str) -> str:
    scheme = value.strip().split(" ", 1)[0].lower()
    return scheme if re.fullmatch(r"[a-z0-9\-]{1,20}", scheme) and " " in value.strip() else "?"


def _quiet(name: str, value: str) -> bool:
    return (name in QUIET_HEADERS or name.startswith(QUIET_PREFIXES)) and bool(_QUIET_SHAPE.match(value))


def head_lines(features: Features) -> list[str]:
    lines = [f"m {normalize(features.method)}", f"p {normalize(features.path, probe=True)}"]
    if features.query:
        for name, value in split_pairs(features.query):
            n = normalize(name, plus=True)
            lines.append(f"q {n}" if value is None else f"q {n} = {normalize(value, plus=True, probe=True)}")
    kept: list[str] = []
    cookie_lines: list[str] = []
    for name, value in features.headers:
        lname = name.lower()
        if lname == "authorization" or lname == "proxy-authorization":
            kept.append(f"a {_auth(value)} [CRED]")
        elif lname == "cookie":
            for cn, cv in cookies(value):
                cookie_lines.append(f"c {normalize(cn)} = {normalize(cv, plus=True, probe=True)}")
        elif not _quiet(lname, value):
            kept.append(f"h {normalize(lname)} = {normalize(value, probe=True)}")
    return lines + sorted(kept) + cookie_lines


def _body_line(f: Field, plus: bool) -> str:
    if f.kind == "form":
        return f"f {normalize(f.name, plus=plus)} = {normalize(f.value, plus=plus, probe=True)}"
    if f.kind == "json":
        return f"j {normalize(f.name)} = {normalize(f.value, probe=True)}"
    if f.kind == "upload":
        return f"u {normalize(f.name)} = {normalize(f.value, probe=True)}"
    return f"b {normalize(f.value, probe=True)}"


@dataclass(frozen=True, slots=True)
class Canonical:
    head: str
    body: str
    truncated: bool

    @property
    def text(self) -> str:
        return self.head + BODY_MARK + self.body if self.body else self.head


def canonicalize(features: Features) -> Canonical:
    head = "\n".join(head_lines(features))
    plus = not features.header("content-type").lower().startswith("multipart/")  # `+` means space only in urlencoded
    fields = body_fields(features)
    body = "\n".join(_body_line(f, plus) for f in fields)
    # a body the gateway cut, or one with more fields than its REST field holds: the model did not read all of it
    return Canonical(head=head, body=body, truncated=features.truncated or cut(fields))


def canonical_text(features: Features) -> str:
    return canonicalize(features).text


__all__ = ["Canonical", "canonicalize", "canonical_text", "decode", "normalize", "mask", "percent_decode"]
_ = text_of  # re-exported for callers that decode raw bytes the same way
