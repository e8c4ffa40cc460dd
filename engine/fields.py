"""Request parts: Features → a flat list of Field(kind, name, value), raw as sent.

Both the canonical text (engine.canonical) and the rule engine (rules/) read requests through this one
split, so "a query argument", "a cookie" or "a JSON leaf" means the same thing everywhere. Values are raw:
query and form values still percent-encoded, JSON leaves as parsed. Decoding is the caller's business.

Kinds: method, path, query (one per argument), header (every header, in order), cookie, form
(urlencoded or multipart text part), upload (multipart file part: name is "field;filename;type"),
json (one per leaf: name is the dotted path), body (any other body, as text).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

from engine.features import Features

MAX_FIELDS = 4096  # beyond this, the rest of a body is kept as one raw `body` field
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


def is_binary(data: bytes) -> bool:
    """Looks like a binary file (image, archive), not text a person or program typed."""
    sample = data[:4096]
    if not sample:
        return False
    if b"\0" in sample:
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


def printable_strings(data: bytes, limit: int = 64) -> str:
    """The printable runs inside binary data (like `strings`): a payload hidden in a file is still seen."""
    runs = _PRINTABLE_RUN.findall(data[: 1 << 20])
    return " ".join(r.decode("ascii") for r in runs[:limit])


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
    raw = features.header("content-type")
    main, *params = raw.split(";")
    opts = {}
    for p in params:
        k, _, v = p.strip().partition("=")
        opts[k.strip().lower()] = v.strip().strip('"')
    return main.strip().lower(), opts


def _json_leaves(obj: Any, path: str, depth: int, out: list[Field]) -> None:
    if len(out) >= MAX_FIELDS:
        return
    if depth > MAX_JSON_DEPTH:
        out.append(Field("json", path, json.dumps(obj)[:4096]))
    elif isinstance(obj, dict):
        if not obj:
            out.append(Field("json", path, "{}"))
        for k, v in obj.items():
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


def _multipart(body: bytes, boundary: str) -> list[Field] | None:
    if not boundary:
        return None
    delim = b"--" + boundary.encode("latin-1", "replace")
    chunks = body.split(delim)
    if len(chunks) < 2:
        return None
    out: list[Field] = []
    for chunk in chunks[1:]:
        if chunk.startswith(b"--"):
            break
        chunk = chunk[2:] if chunk.startswith(b"\r\n") else chunk.lstrip(b"\n")
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            head, sep, content = chunk.partition(b"\n\n")
        if content.endswith(b"\r\n"):
            content = content[:-2]
        hdrs = {}
        for line in text_of(head).splitlines():
            k, _, v = line.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        disp = hdrs.get("content-disposition", "")
        name = _param(disp, "name")
        filename = _param(disp, "filename")
        if filename is None and "filename*" not in disp:
            value = printable_strings(content) if is_binary(content) else text_of(content)
            out.append(Field("form", name or "", value))
        else:
            ctype = hdrs.get("content-type", "")
            value = printable_strings(content) if is_binary(content) else text_of(content)
            out.append(Field("upload", f"{name or ''};{filename or ''};{ctype}", value))
        if len(out) >= MAX_FIELDS:
            break
    return out


def _param(header: str, key: str) -> str | None:
    m = re.search(r'(?:^|;)\s*' + key + r'="((?:[^"\\]|\\.)*)"', header, re.I)
    if m:
        return m.group(1)
    m = re.search(r"(?:^|;)\s*" + key + r"=([^;]*)", header, re.I)
    return m.group(1).strip() if m else None


def body_fields(features: Features) -> list[Field]:
    body = features.body
    if not body:
        return []
    ctype, opts = _content_type(features)
    if ctype == "multipart/form-data" or ctype.startswith("multipart/"):
        parts = _multipart(body, opts.get("boundary", ""))
        if parts is not None:
            return parts
    if is_binary(body):
        return [Field("body", "binary", printable_strings(body))]
    text = text_of(body)
    if ctype == "application/x-www-form-urlencoded" or (not ctype and _looks_like_form(text)):
        return [Field("form", n, v if v is not None else "") for n, v in split_pairs(text)][:MAX_FIELDS]
    if "json" in ctype or (not ctype and text.lstrip()[:1] in ("{", "[")):
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            pass
        else:
            out: list[Field] = []
            _json_leaves(obj, "", 0, out)
            return out
    return [Field("body", "", text)]


_FORM = re.compile(r"^[\w.\-\[\]%+]+=[^\s]*(&[\w.\-\[\]%+]+=[^\s]*)*$")


def _looks_like_form(text: str) -> bool:
    return len(text) < 65536 and bool(_FORM.match(text))


def request_fields(features: Features) -> list[Field]:
    out = [Field("method", "", features.method), Field("path", "", features.path)]
    if features.query:
        out.extend(Field("query", n, v if v is not None else "") for n, v in split_pairs(features.query))
    for name, value in features.headers:
        out.append(Field("header", name.lower(), value))
        if name.lower() == "cookie":
            out.extend(Field("cookie", n, v) for n, v in cookies(value))
    out.extend(body_fields(features))
    return out
