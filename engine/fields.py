"""Request parts: Features → a flat list of Field(kind, name, value), raw as sent.

Both the canonical text (engine.canonical) and the rule engine (rules/) read requests through this one
split, so "a query argument", "a cookie" or "a JSON leaf" means the same thing everywhere. Values are raw:
query and form values still percent-encoded, JSON leaves as parsed. Decoding is the caller's business.

Kinds: method, path, query (one per argument), header (every header, in order), cookie, form
(urlencoded or multipart text part), upload (multipart file part: name is "field;filename;type"),
json (one per leaf: name is the dotted path), body (any other body, as text).

Bodies are read as UTF-8, with Latin-1 for bytes that are not, except where the application reads them another
way: a declared charset that does not keep ASCII as ASCII (UTF-16, UTF-32, UTF-7, EBCDIC), or UTF-16/32 shown by
a byte-order mark or JSON's zero-byte pattern (body_codec); a gzip or deflate body is read inflated (inflated).
A body or part read as UTF-16 or UTF-32 is read as sent as well (a server that ignores the charset reads that),
and only read so when its bytes hold a zero byte. A
multipart part is read as its own headers say (read_part): its Content-Transfer-Encoding undone, then its
charset, or the form's `_charset_`, where that does not keep ASCII as ASCII. A JSON object that gives a key twice
yields a leaf for each value.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any, Iterator

from engine.features import Features

MAX_FIELDS = 4096  # beyond this, the rest of a body is read as one field, REST
REST = "(rest)"  # its name: the distinct `name=value` items after the MAX_FIELDS-th, one a line, in order
REST_CUT = "(rest, cut)"  # its name where more followed than it holds
MAX_REST_CHARS = 1 << 16  # at most this much of them (padding repeats itself, and a repeated item is read once);
#                          a body with more was not read whole (`cut`): the rules then read it as one unit, and
#                          all of its REST field (request_fields' rest_chars: rules/targets.REST_READ)
MAX_JSON_DEPTH = 64


@dataclass(frozen=True, slots=True)
class Field:
    kind: str
    name: str
    value: str


def text_of(data: bytes) -> str:
    """Bytes → str without losing anything: invalid UTF-8 bytes become their Latin-1 characters."""
    return data.decode("utf-8", "latin1fallback")


def _latin1_fallback(err: UnicodeDecodeError) -> tuple[str, int]:
    return err.object[err.start : err.end].decode("latin-1"), err.end


import codecs  # noqa: E402  (registered once, before any decode)

codecs.register_error("latin1fallback", _latin1_fallback)


# every ASCII character that injection syntax is made of: a charset that encodes these as themselves reads right
# byte by byte (UTF-8, Latin-1, windows-1252, Shift_JIS ...), whatever it does above 0x7f
_ASCII_PROBE = "azAZ09 \t\n<>'\"=&;:/?()[]{}$%`|\\!#*+,-.@^_~"
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))  # fmt: skip  (UTF-32 LE first: its mark starts with UTF-16 LE's)


@functools.lru_cache(maxsize=256)
def foreign_codec(charset: str) -> str | None:
    """The codec of a declared charset in which ASCII is not ASCII (UTF-16, UTF-32, UTF-7, the EBCDIC code pages):
    read byte by byte, a body in it says nothing (every other byte of UTF-16 is zero) or noise, while the
    application that honours the charset reads the payload. None for an ASCII-compatible or unknown charset."""
    try:
        name = codecs.lookup(charset.strip().strip("'\"").lower()).name
        same = _ASCII_PROBE.encode(name) == _ASCII_PROBE.encode("ascii")
    except (LookupError, UnicodeError, TypeError, ValueError):  # unknown, or not a text encoding (rot13, zlib)
        return None
    return None if same else name


def _sniffed_codec(body: bytes, json_like: bool) -> str | None:
    """UTF-16 or UTF-32 shown by a byte-order mark, or, for JSON, by where the zero bytes of its first two
    ASCII characters fall (RFC 4627, section 3: what JSON parsers detect on their own)."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return codec
    if json_like and len(body) >= 4:
        z = tuple(b == 0 for b in body[:4])
        return {(True, True, True, False): "utf-32-be", (True, False, True, False): "utf-16-be",
                (False, True, True, True): "utf-32-le", (False, True, False, True): "utf-16-le"}.get(z)  # fmt: skip
    return None


WIDE = ("utf-16", "utf-32")  # the codecs in which every ASCII character holds a zero byte


def body_codec(body: bytes, ctype: str, opts: dict[str, str]) -> str | None:
    """The codec an application reads `body` (of Content-Type `ctype; opts`, as _content_type splits it) with
    where that is not byte by byte: the foreign charset declared, or the UTF-16/32 it is sniffed as. None for
    every other body (read as UTF-8, with Latin-1 for bytes that are not). Multipart parts: read_part, one by one.
    body_fields reads a body in such a codec as sent too."""
    if not body or ctype.startswith("multipart/"):
        return None
    codec = foreign_codec(opts["charset"]) if opts.get("charset") else None
    return _fits(codec or _sniffed_codec(body, "json" in ctype or not ctype), body)


def _fits(codec: str | None, data: bytes) -> str | None:
    """`codec`, unless it is UTF-16 or UTF-32 and `data` has no zero byte: then the bytes are not in it (every
    ASCII character of either holds one), and decoded they would be CJK noise. ASCII declared UTF-16 is read as
    sent, as most servers read it, whatever it declares."""
    return None if codec and codec.startswith(WIDE) and b"\0" not in data[:65536] else codec


MAX_INFLATED = 1 << 20  # a compressed body is read up to its first MiB once inflated, as the gateway shows the
#                        engine the first MiB of a plain one (model.inspect_bytes); a zip bomb stops here
_CODINGS = {"gzip": 31, "x-gzip": 31, "deflate": 15}  # zlib wbits: the gzip wrapper, the zlib one (raw deflate retried)


def inflate(data: bytes, content_encoding: str, limit: int = MAX_INFLATED) -> bytes | None:
    """`data` with the codings a Content-Encoding value lists undone (gzip, x-gzip, deflate; identity; the last
    listed first), up to `limit` bytes; None for another coding or data that does not inflate."""
    for c in reversed([c.strip() for c in content_encoding.lower().split(",") if c.strip() not in ("", "identity")][:4]):
        wbits = _CODINGS.get(c)
        if wbits is None:
            return None
        for w in (wbits, -15, 31) if c == "deflate" else (wbits,):  # deflate: zlib, raw deflate, or gzip mislabelled
            try:
                data = zlib.decompressobj(w).decompress(data, limit)
                break
            except zlib.error:
                continue
        else:
            return None
    return data


def inflated(features: Features) -> Features:
    """The request with its body decompressed where Content-Encoding says gzip or deflate: an origin that accepts
    compressed request bodies reads the payload inside, which byte by byte is noise. Read up to MAX_INFLATED; a
    body that does not decompress, or in another coding, stays as sent. Read through `Features.inspected`, which
    computes it once per request; the inflated copy is its own `inspected`, so nothing inflates twice."""
    coding = features.header("content-encoding")
    data = inflate(features.body, coding) if coding.strip() and features.body else None
    if data is None or data is features.body:
        return features
    out = dataclasses.replace(features, body=data)
    out.__dict__["inspected"] = out  # the cached_property's slot: the copy is read as it is
    return out


def body_text(features: Features, limit: int | None = None) -> str:
    """The body (its first `limit` bytes) as text: in its body_codec, as the printable strings of a binary body,
    or as UTF-8 with Latin-1 for the rest. A body in UTF-16 or UTF-32 is read as sent too, as body_fields reads it
    (ASCII declared UTF-16 with a few zero bytes put in reaches a server that ignores the charset as ASCII)."""
    body = features.body if limit is None else features.body[:limit]
    codec = body_codec(features.body, *_content_type(features))
    if codec and not codec.startswith(WIDE):
        return body.decode(codec, "replace")
    as_sent = printable_strings(body, limit=1 << 14) if is_binary(body) else text_of(body)
    return body.decode(codec, "replace") + "\n" + as_sent if codec else as_sent


def is_binary(data: bytes) -> bool:
    """Looks like a binary file (image, archive), not text a person or program typed."""
    sample = data[:4096]
    if not sample:
        return False
    if b"\0" in sample or sample.startswith(b"%PDF-"):  # a PDF's compressed streams, read as text, are noise
        return True
    try:
        sample.decode("utf-8")
        return False
    except UnicodeDecodeError as err:
        if err.start > len(sample) - 4:  # a multi-byte character cut at the sample's end
            return False
    bad = sum(1 for b in sample if b < 9 or 13 < b < 32 or b == 127)
    return bad > len(sample) // 20


_PRINTABLE_RUN = re.compile(rb"[\x20-\x7e\t]{4,}")


_XMP_OPEN = (b"<?xpacket begin=", b"<x:xmpmeta")
_XMP_CLOSE = {b"<?xpacket begin=": b"<?xpacket end=", b"<x:xmpmeta": b"</x:xmpmeta>"}
_XML_TAG = re.compile(rb"<[^<>]{0,4096}>")
_XMP_TAG = re.compile(rb"</?[\w.-]+:[\w.-]+(?:\s[^<>]*)?>|<\?xpacket\s[^<>]*\?>")  # prefixed, as RDF's elements are
_XML_ATTR = re.compile(rb"""\s([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_HANDLER = re.compile(rb"(?i)\son\w*\s*=")


def _xmp_values(packet: bytes) -> bytes:
    """An XMP packet as the values it holds: every attribute value and text, without the RDF markup and the
    namespace declarations around them. A packet that holds anything else stays as it is: a tag without a
    namespace prefix (`<script>`, `<img>`), an event-handler attribute, a declaration (`<!DOCTYPE`,
    `<!ENTITY`) or another processing instruction (`<?php`). That is not metadata."""
    tags = _XML_TAG.findall(packet)
    if b"<!" in packet or packet.count(b"<") != len(tags) or not all(_XMP_TAG.fullmatch(t) and not _HANDLER.search(t) for t in tags):
        return packet

    def values(tag: re.Match) -> bytes:
        if tag.group(0).startswith(b"<?"):
            return b" "  # <?xpacket begin="BOM" id="W5M0MpCehiHzreSzNTczkc9d"?>: the same in every packet
        kept = [v1 or v2 for name, v1, v2 in _XML_ATTR.findall(tag.group(0)) if not name.startswith(b"xmlns") and (v1 or v2)]
        return b" " + b" ".join(kept) + b" "

    return re.sub(rb"\s+", b" ", _XML_TAG.sub(values, packet))


def xmp_read(data: bytes) -> bytes:
    """`data` with each XMP metadata packet (images, PDFs: Photoshop, Lightroom, phone cameras and screenshot
    tools write one) reduced to its values (_xmp_values). Read as markup, a photo's metadata is XML full of
    namespaces, which the model had only seen in XML attacks: on an upload form it blocked 9 of 12 distinct
    real PNGs carrying one (bench/uploads.py). Values stay, so a payload placed in a metadata field is still read. One pass, linear in `data`."""
    if b"xmp" not in data:
        return data
    out, at = [], 0
    while True:
        starts = [(i, o) for o in _XMP_OPEN if (i := data.find(o, at)) >= 0]
        if not starts:
            break
        start, opener = min(starts)
        end = data.find(_XMP_CLOSE[opener], start + len(opener))
        if end < 0:
            break
        end = data.find(b">", end) + 1 or len(data)
        out += [data[at:start], _xmp_values(data[start:end])]
        at = end
    return b"".join(out) + data[at:] if out else data


LONG_RUN = 12  # printable characters: random bytes hold a run this long about once in 150 KB ((95/256)^12)
MAX_LONG_RUNS = 1024


def printable_strings(data: bytes, limit: int = 64) -> str:
    """The printable runs inside binary data (like `strings`), so that a payload hidden in a file is still seen:
    the first `limit` runs (a file's header and metadata, whatever their length), then every later run of at
    least LONG_RUN characters, up to MAX_LONG_RUNS of them. Code appended to an image (a polyglot web shell) or
    a comment chunk after its pixels is such a run; the short runs that compressed pixels are full of are
    noise. An XMP metadata packet is read as its values (xmp_read)."""
    runs = _PRINTABLE_RUN.findall(xmp_read(data[: 1 << 20]))
    if len(runs) > limit:
        runs = runs[:limit] + [r for r in runs[limit:] if len(r) >= LONG_RUN][:MAX_LONG_RUNS]
    return " ".join(r.decode("ascii") for r in runs)


def split_pairs(s: str, sep: str = "&") -> Iterator[tuple[str, str | None]]:
    """`a=1&b&c=` → (a, 1), (b, None), (c, ''). Values raw."""
    for part in s.split(sep):
        if not part:
            continue
        name, eq, value = part.partition("=")
        yield name, (value if eq else None)


def cookies(header_value: str) -> Iterator[tuple[str, str]]:
    for part in header_value.split(";"):
        part = part.strip()
        if not part:
            continue
        name, eq, value = part.partition("=")
        yield (name.strip(), value.strip()) if eq else ("", name.strip())


def _content_type(features: Features) -> tuple[str, dict[str, str]]:
    return _media_type(features.header("content-type"))


class _Duplicates(list):
    """A JSON object that gives a key twice, as its (key, value) pairs in order. Parsers disagree on which value
    an application reads (the first, the last), so every one is a leaf: `{"q": "<attack>", "q": "shoes"}` does
    not hide its first `q`."""


def _json_object(pairs: list[tuple[str, Any]]) -> dict | _Duplicates:
    obj = dict(pairs)
    return obj if len(obj) == len(pairs) else _Duplicates(pairs)


class _Rest:
    """The fields of a body after its MAX_FIELDS-th, read as one (REST): each distinct `name=value` item (or value)
    once, in order, up to `limit` characters (MAX_REST_CHARS: what the model reads). Dropping them would hide a payload behind 4,096 padding fields from the model
    and the rules alike; one field keeps the cost of a huge body bounded and its padding collapses."""

    def __init__(self, limit: int = MAX_REST_CHARS) -> None:
        self.items: dict[tuple[str, str], None] = {}
        self.size = 0
        self.limit = limit

    @property
    def full(self) -> bool:
        return self.size >= self.limit

    def add(self, name: str, value: str) -> None:
        key = (name, value)
        if key not in self.items and self.size < self.limit:
            self.items[key] = None
            self.size += len(name) + len(value) + 2

    def field(self, kind: str) -> list[Field]:
        text = "\n".join(f"{n}={v}" if n else v for n, v in self.items)[: self.limit]
        return [Field(kind, REST_CUT if self.full else REST, text)] if text else []


def rest_item(item: str) -> tuple[str, str]:
    """One line of a REST field → (name, value): `name=value` as _Rest writes it, or ("", item) for a bare value
    (one holding `=` reads as named: a reader that must not miss it reads the item whole too)."""
    name, eq, value = item.partition("=")
    return (name, value) if eq and value else ("", item)


def cut(fields: list[Field]) -> bool:
    """Whether a body's fields leave part of it unread: a REST field that is full."""
    return any(f.name == REST_CUT for f in fields)


def _capped(kind: str, pairs: Iterator[tuple[str, str]], rest_chars: int = MAX_REST_CHARS) -> list[Field]:
    """`kind` fields of (name, value) pairs: the first MAX_FIELDS, then the rest as one (_Rest)."""
    out, rest = [], _Rest(rest_chars)
    for name, value in pairs:
        if len(out) < MAX_FIELDS:
            out.append(Field(kind, name, value))
        elif rest.full:
            break
        else:
            rest.add(name, value)
    return out + rest.field(kind)


def _json_leaves(obj: Any, path: str, depth: int, out: list[Field]) -> None:
    if len(out) >= MAX_FIELDS:
        return
    if depth > MAX_JSON_DEPTH:
        out.append(Field("json", path, json.dumps(obj)[:4096]))
    elif isinstance(obj, (dict, _Duplicates)):
        if not obj:
            out.append(Field("json", path, "{}"))
        for k, v in obj.items() if isinstance(obj, dict) else obj:
            _json_leaves(v, f"{path}.{k}" if path else str(k), depth + 1, out)
    elif isinstance(obj, list):
        if not obj:
            out.append(Field("json", path, "[]"))
        for v in obj:
            _json_leaves(v, path + "[]", depth + 1, out)
    elif isinstance(obj, str):
        out.append(Field("json", path, obj))
    else:
        out.append(Field("json", path, json.dumps(obj)))


_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"(?:\s*:\s*"((?:[^"\\]|\\.)*)")?')  # a string, or a key and its string value


def _json_rest(text: str, out: list[Field], rest_chars: int = MAX_REST_CHARS) -> list[Field]:
    """A document of more than MAX_FIELDS leaves: every distinct string in it that its first leaves do not hold, as
    one REST field (`key=value` where a key holds a string, the string alone otherwise). Numbers and literals carry
    no payload, and walking them leaf by leaf is slow: reading a 1 MB array of 330,000 numbers took 0.7 s that way,
    about 0.1 s with this regex pass."""
    seen = {f.value for f in out}
    for f in out:
        seen.update(f.name.replace("[]", ".").split("."))
    rest = _Rest(rest_chars)
    for key, value in dict.fromkeys(_JSON_STRING.findall(text)):
        if rest.full:
            break
        key, value = _json_string(key), _json_string(value)
        if value and value not in seen:
            rest.add(key, value)  # `key=value`, so that redaction finds a credential by its name (engine.redact)
        elif not value and key not in seen:
            rest.add("", key)
    return rest.field("json")


def _json_string(raw: str) -> str:
    if "\\" not in raw:
        return raw
    try:
        return json.loads(f'"{raw}"')
    except ValueError:
        return raw


@dataclass(frozen=True, slots=True)
class Part:
    """One multipart part as split: `chunks[index] == lead + head + sep + content + tail`, where `chunks` is the
    body split at the delimiter (multipart_split), so a part can be rewritten in place (engine.redact)."""

    index: int
    lead: bytes  # the line break that ends the delimiter line
    head: bytes
    sep: bytes  # the blank line: CRLF CRLF, or LF LF for a body that takes bare LFs
    content: bytes  # as read: without the line break that precedes the next delimiter
    tail: bytes
    headers: dict[str, str]
    epilogue: bool = False  # after the close delimiter (split so only with epilogue_parts)


def multipart_split(body: bytes, boundary: str, epilogue_parts: bool = False) -> tuple[bytes, list[bytes], list[Part], bytes] | None:
    """A multipart body → (delimiter, the body split at it, all its parts, the epilogue); None
    without a boundary or a delimiter. The one splitter for the engine's reading and the journal's redaction.
    With `epilogue_parts`, what follows the close delimiter is split into parts too, as a lenient parser reads it
    (redaction: a secret there is still a secret), and the epilogue returned is empty."""
    if not boundary:
        return None
    delim = b"--" + boundary.encode("latin-1", "replace")
    chunks = body.split(delim)
    if len(chunks) < 2:
        return None
    parts: list[Part] = []
    epilogue = b""
    closed = False
    for k, chunk in enumerate(chunks[1:], 1):
        closed = closed or chunk.startswith(b"--")
        if closed and not epilogue_parts:
            # the epilogue: compliant parsers drop it, but a lenient one (or one that took another boundary from a
            # Content-Type naming two) reads parts there, so it is read too, as one more text part
            epilogue = delim.join(chunks[k:])[2:]
            break
        rest = chunk[2:] if chunk.startswith(b"\r\n") else chunk.lstrip(b"\n")
        lead = chunk[: len(chunk) - len(rest)]
        head, sep, content = rest.partition(b"\r\n\r\n")
        if not sep:
            head, sep, content = rest.partition(b"\n\n")
        # the line break before the next delimiter belongs to it: CRLF, or a bare LF (as lenient parsers take it)
        tail = b"\r\n" if content.endswith(b"\r\n") else b"\n" if content.endswith(b"\n") else b""
        parts.append(Part(k, lead, head, sep, content[: len(content) - len(tail)], tail, part_headers(head), closed))
    return delim, chunks, parts, epilogue


def _multipart(body: bytes, boundary: str, rest_chars: int = MAX_REST_CHARS) -> list[Field] | None:
    split = multipart_split(body, boundary)
    if split is None:
        return None
    _, _, pieces, epilogue = split
    parts = [(p.headers, p.content) for p in pieces]
    charset = form_charset(parts[:MAX_FIELDS])
    out: list[Field] = []
    rest = _Rest(rest_chars)
    for hdrs, content in parts:
        disp = hdrs.get("content-disposition", "")
        name = _param(disp, "name")
        if len(out) >= MAX_FIELDS:  # the rest as one field: a part after 4,096 others is still read
            if rest.full:
                break
            rest.add(name or "", read_part(hdrs, content, charset)[1])
            continue
        filename = _param(disp, "filename")
        text_part = filename is None and "filename*" not in disp
        coding, value = read_part(hdrs, content, charset if text_part else None)
        kind, key = ("form", name or "") if text_part else ("upload", f"{name or ''};{filename or ''};{hdrs.get('content-type', '')}")
        out.append(Field(kind, key, value))
        if coding.codec and coding.codec.startswith(WIDE):  # also as sent, as body_fields reads a body: a server that ignores the charset reads that
            out.append(Field(kind, key, _bytes_text(coding.decoded(content))))
    out += rest.field("form")
    if epilogue.strip():
        out.append(Field("form", "(epilogue)", _bytes_text(epilogue)))
    return out


def part_headers(head: bytes) -> dict[str, str]:
    """A multipart part's header block → {lower-case name: value} (the last of a repeated name)."""
    hdrs = {}
    for line in text_of(head).splitlines():
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return hdrs


def _media_type(value: str) -> tuple[str, dict[str, str]]:
    """`text/plain; charset="utf-16"` → ("text/plain", {"charset": "utf-16"})."""
    main, *params = value.split(";")
    opts = {}
    for p in params:
        k, _, v = p.strip().partition("=")
        opts[k.strip().lower()] = v.strip().strip('"')
    return main.strip().lower(), opts


def form_charset(parts: list[tuple[dict[str, str], bytes]]) -> str | None:
    """The charset a form names for its text parts in a `_charset_` field (HTML's convention, which some servers
    honour for the parts that declare none), or None."""
    for hdrs, content in parts:
        disp = hdrs.get("content-disposition", "")
        if _param(disp, "name") == "_charset_" and _param(disp, "filename") is None:
            return text_of(content[:64]).strip() or None
    return None


_TRANSFER = ("quoted-printable", "base64")


@dataclass(frozen=True, slots=True)
class PartCoding:
    """How an application that honours a multipart part's own headers reads its content. `transfer`: the
    Content-Transfer-Encoding undone first (quoted-printable, which Go's mime/multipart undoes unasked, or
    base64), "" for none; `codec`: then a charset that does not keep ASCII as ASCII (foreign_codec), declared
    by the part or, for a text part, by the form's `_charset_`, or the UTF-16/32 a byte-order mark shows; None
    to read UTF-8 with Latin-1 for the rest. Read byte by byte, such a part says nothing, or noise, where the
    application reads the payload."""

    transfer: str = ""
    codec: str | None = None

    def decoded(self, content: bytes) -> bytes:
        if self.transfer == "quoted-printable":
            return binascii.a2b_qp(content)
        if self.transfer == "base64":
            try:
                return base64.b64decode(re.sub(rb"\s+", b"", content), validate=True)
            except (binascii.Error, ValueError):
                return content  # not base64 after all: read as sent
        return content

    def encode(self, text: str) -> bytes:
        """`text` written as this part carries its content (redaction: a placeholder that reads back as itself)."""
        data = text.encode(self.codec, "replace") if self.codec else text.encode("utf-8", "surrogatepass")
        if self.transfer == "base64":
            return base64.b64encode(data)
        return binascii.b2a_qp(data) if self.transfer == "quoted-printable" else data


def read_part(hdrs: dict[str, str], content: bytes, charset: str | None = None) -> tuple[PartCoding, str]:
    """A multipart part's coding (PartCoding) and its content as text, as the application reads it. `charset`:
    the form's `_charset_` (form_charset), for a text part that declares none."""
    transfer = hdrs.get("content-transfer-encoding", "").strip().strip('"').lower()
    coding = PartCoding(transfer if transfer in _TRANSFER else "")
    data = coding.decoded(content)
    ptype, opts = _media_type(hdrs.get("content-type", ""))
    declared = opts.get("charset") or charset
    codec = _fits((foreign_codec(declared) if declared else None) or _sniffed_codec(data, "json" in ptype), data)
    if codec:
        return dataclasses.replace(coding, codec=codec), data.decode(codec, "replace")
    return coding, _bytes_text(data)


def _bytes_text(data: bytes) -> str:
    return printable_strings(data) if is_binary(data) else text_of(data)


def _param(header: str, key: str) -> str | None:
    m = re.search(r'(?:^|;)\s*' + key + r'="((?:[^"\\]|\\.)*)"', header, re.I)
    if m:
        return m.group(1)
    m = re.search(r"(?:^|;)\s*" + key + r"=([^;]*)", header, re.I)
    return m.group(1).strip() if m else None


def body_fields(features: Features, rest_chars: int = MAX_REST_CHARS) -> list[Field]:
    """The body's fields; past the MAX_FIELDS-th, one REST field of at most `rest_chars` (the model reads
    MAX_REST_CHARS; the rules, reading what the model did not, read more)."""
    features = features.inspected
    body = features.body
    if not body:
        return []
    ctype, opts = _content_type(features)
    if ctype == "multipart/form-data" or ctype.startswith("multipart/"):
        parts = _multipart(body, opts.get("boundary", ""), rest_chars)
        if parts is not None:
            return parts
    codec = body_codec(body, ctype, opts)
    if codec is None or not codec.startswith(WIDE):  # EBCDIC and UTF-7 declared are blocked (proto-foreign-charset)
        return _text_fields(body, codec, ctype, rest_chars=rest_chars)
    # also as sent: most servers ignore a declared charset, so ASCII declared UTF-16 with a few zero bytes put in to
    # look the part (which, decoded, is CJK noise) still reaches them. A body that really is UTF-16 or UTF-32 has a
    # zero byte in every ASCII character: as sent, it has no printable run at all.
    decoded = _text_fields(body, codec, ctype, rest_chars=rest_chars)
    typed = body.count(b"\0", 0, 4096) * 4 < min(len(body), 4096)  # a few zero bytes: still the form it says it is
    as_sent = _text_fields(body, None, ctype, typed=typed and (ctype == "application/x-www-form-urlencoded" or "json" in ctype), rest_chars=rest_chars)
    return decoded + as_sent[: max(0, MAX_FIELDS - len(decoded))]


def _text_fields(body: bytes, codec: str | None, ctype: str, typed: bool = False, rest_chars: int = MAX_REST_CHARS) -> list[Field]:
    """The fields of a body that is not multipart. `typed`: parse it as its Content-Type says even if it looks
    binary (the zero bytes of UTF-16 read as sent)."""
    text = body.decode(codec, "replace") if codec else None
    if text is None:
        if not typed and is_binary(body):
            return [Field("body", "binary", printable_strings(body))]
        text = text_of(body)
    if ctype == "application/x-www-form-urlencoded" or (not ctype and _looks_like_form(text)):
        return _capped("form", ((n, v if v is not None else "") for n, v in split_pairs(text)), rest_chars)
    if "json" in ctype or (not ctype and text.lstrip()[:1] in ("{", "[")):
        leaves = json_fields(text, rest_chars)
        if leaves is not None:
            return leaves
    return [Field("body", "", text)]


def json_fields(text: str, rest_chars: int = MAX_REST_CHARS) -> list[Field] | None:
    """The leaves of `text` as JSON (`json` fields), or None where it does not parse."""
    try:
        obj = json.loads(text, object_pairs_hook=_json_object)
    except (ValueError, RecursionError):
        return None
    out: list[Field] = []
    _json_leaves(obj, "", 0, out)
    return out + _json_rest(text, out, rest_chars) if len(out) >= MAX_FIELDS else out


_FORM = re.compile(r"^[\w.\-\[\]%+]+=[^\s]*(&[\w.\-\[\]%+]+=[^\s]*)*$")


def _looks_like_form(text: str) -> bool:
    return len(text) < 65536 and bool(_FORM.match(text))


def request_fields(features: Features, rest_chars: int = MAX_REST_CHARS) -> list[Field]:
    out = [Field("method", "", features.method), Field("path", "", features.path)]
    if features.query:
        out.extend(Field("query", n, v if v is not None else "") for n, v in split_pairs(features.query))
    for name, value in features.headers:
        out.append(Field("header", name.lower(), value))
        if name.lower() == "cookie":
            out.extend(Field("cookie", n, v) for n, v in cookies(value))
    out.extend(body_fields(features, rest_chars))
    return out
