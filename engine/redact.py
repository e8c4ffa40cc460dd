"""Redaction for the decision journal: credentials out of a request, and out of its canonical text.

`request(features, fields)` returns the request with every credential replaced by PLACEHOLDER:
Authorization and Proxy-Authorization (the scheme kept), every cookie value, Set-Cookie, and any header,
query argument, form field (urlencoded or multipart) or JSON leaf whose name is in `fields`.
`canonical(text, fields)` does the same to a canonical text that was already computed for serving.

The placeholder is chosen so that the canonical text masks it the way it masked the secret: a session id
that served as `[HEX]` is replaced by a hex placeholder, a UUID by a UUID, anything else by PLACEHOLDER,
which reads `[ID]` like a real API key. So the two meet: canonical(text of request) == text of
request(redacted). The journal stores the cheap rewrite of the text serving computed, and training reads
the redacted parts; both see what serving saw, less the secrets. (A short secret, such as `theme=dark`,
reads `[ID]` after redaction: the journal must not keep it.)

Names are compared the way the canonical text writes them (decoded, lower case), by their last
component: `user.password`, `user[password]` and `items[].password` all match `password`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from engine.canonical import ESCAPED_LF, normalize
from engine.features import Features
from engine.fields import (
    MAX_FIELDS, REST, REST_CUT, WIDE, _content_type, _looks_like_form, _param, body_codec, form_charset, is_binary, multipart_split, read_part, rest_item, split_pairs,
    text_of,
)

PLACEHOLDER = "redacted-0000000000000000"  # 25 characters holding a digit: the canonical text masks it [ID]
MASKED = "[ID]"
# a secret the canonical text masked whole keeps its mask: the placeholder of that shape
SHAPES = {"[ID]": PLACEHOLDER, "[HEX]": "0" * 28 + "dead", "[UUID]": "00000000-0000-0000-0000-000000000000",
          "[NUM]": "0" * 12}  # fmt: skip
AUTH_HEADERS = frozenset({"authorization", "proxy-authorization"})
DEFAULT_FIELDS = (
    "password", "passwd", "pwd", "pass", "secret", "token", "access_token", "refresh_token", "id_token",
    "client_secret", "api_key", "apikey", "x-api-key", "x-auth-token", "private_key", "otp", "card_number", "cvv",
)  # fmt: skip
_PARTS = re.compile(r"[.\[\]]+")


def key(name: str) -> str:
    """A normalised field name's last component: what `fields` is matched against."""
    parts = [p for p in _PARTS.split(name) if p]
    return parts[-1] if parts else name


def _hit(raw_name: str, fields: frozenset[str], plus: bool = False) -> bool:
    return key(normalize(raw_name, plus=plus)) in fields


def placeholder(value: str, plus: bool = False) -> str:
    """What replaces `value`: one that the canonical text masks the same way (`[ID]` unless it was masked
    whole as something else)."""
    return SHAPES.get(normalize(value, plus=plus, probe=True), PLACEHOLDER)


def request(features: Features, fields: Iterable[str] = DEFAULT_FIELDS) -> Features:
    """The request without its credentials (the same object when it carried none)."""
    names = frozenset(f.lower() for f in fields)
    headers = tuple((k, _header(k, v, names)) for k, v in features.headers)
    query = _pairs(features.query, names, plus=True) if features.query else ""
    # a compressed body is redacted, and kept, inflated, as the engine read it (engine.fields.inflated reads a body
    # that no longer inflates as it is, so the stored request still reads the same)
    source = features.inspected
    body = _body(source, names) if source.body else b""
    if headers == features.headers and query == features.query and body == features.body:
        return features
    return Features(features.method, features.path, query, headers, body, features.body_size, features.client)


def _header(name: str, value: str, names: frozenset[str]) -> str:
    lname = name.lower()
    if lname in AUTH_HEADERS:
        scheme, space, _ = value.strip().partition(" ")
        return f"{scheme} {PLACEHOLDER}" if space else PLACEHOLDER
    if lname == "cookie":
        return "; ".join(_cookie(part.strip()) for part in value.split(";") if part.strip())
    if value.strip() and (lname == "set-cookie" or key(normalize(lname)) in names):
        return placeholder(value)
    return value


def _cookie(part: str) -> str:
    name, eq, value = part.partition("=")
    return f"{name.strip()}={placeholder(value.strip(), plus=True)}" if eq else placeholder(name, plus=True)


def _pairs(text: str, names: frozenset[str], plus: bool) -> str:
    out = []
    for name, value in split_pairs(text):
        if value is None:
            out.append(name)
        else:
            # a value the canonical text reads as empty (blank, `+`, `%20`) stays as it is, like an empty one
            hit = value and normalize(value, plus=plus) and _hit(name, names, plus)
            out.append(f"{name}={placeholder(value, plus) if hit else value}")
    return "&".join(out)


def _body(features: Features, names: frozenset[str]) -> bytes:
    body = features.body
    ctype, opts = _content_type(features)
    codec = body_codec(body, ctype, opts)  # UTF-16, EBCDIC ...: the names are not there as bytes, but they are there
    out = _read_body(body, ctype, opts, codec, names)
    if codec is not None and codec.startswith(WIDE) and out.decode(codec, "replace") == body.decode(codec, "replace"):
        # nothing to hide as decoded: read as sent, as engine.fields.body_fields also does (ASCII declared UTF-16)
        return _read_body(body, ctype, opts, None, names)
    return out


def _read_body(body: bytes, ctype: str, opts: dict[str, str], codec: str | None, names: frozenset[str]) -> bytes:
    if codec is None:
        lower = body.lower()
        if not any(n.encode() in lower for n in names) and not any(e in body for e in (b"%", b"\\", b"&#")):
            return body  # no field of that name can be in it, even encoded (the usual case: a few scans in C)
    if ctype.startswith("multipart/"):
        return _multipart(body, opts.get("boundary", ""), names)
    if codec is None and is_binary(body):
        return body
    text = body.decode(codec, "replace") if codec else text_of(body)
    encode = (lambda t: t.encode(codec, "replace")) if codec else (lambda t: t.encode("utf-8", "surrogatepass"))
    if ctype == "application/x-www-form-urlencoded" or (not ctype and _looks_like_form(text)):
        return encode(_pairs(text, names, plus=True))
    if "json" in ctype or (not ctype and text.lstrip()[:1] in ("{", "[")):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            return body
        return encode(json.dumps(_json(doc, False, names)))
    return body


def _json(obj: Any, hit: bool, names: frozenset[str]) -> Any:
    """Scalars under a matching key (or in a list under one) become the placeholder; containers are walked."""
    if isinstance(obj, dict):
        if hit and not obj:
            return PLACEHOLDER
        return {k: _json(v, _hit(str(k), names), names) for k, v in obj.items()}
    if isinstance(obj, list):
        if hit and not obj:
            return PLACEHOLDER
        return [_json(v, hit, names) for v in obj]
    if not hit or (isinstance(obj, str) and not normalize(obj)):
        return obj  # nothing to hide in a blank string, and the canonical text reads it as empty
    return placeholder(obj if isinstance(obj, str) else json.dumps(obj))


def _multipart(body: bytes, boundary: str, names: frozenset[str]) -> bytes:
    # every part, past the engine's limit and after the close delimiter too: a secret there is still a secret
    split = multipart_split(body, boundary, epilogue_parts=True)
    if split is None:
        return body
    delim, chunks, parts, _ = split
    charset = form_charset([(p.headers, p.content) for p in parts[:MAX_FIELDS] if not p.epilogue])  # as the engine reads it
    for p in parts:
        disp = p.headers.get("content-disposition", "")
        if not p.sep or "filename" in disp.lower():  # file parts are not credentials
            continue
        name = _param(disp, "name")
        if name is not None and _hit(name, names):
            coding, value = read_part(p.headers, p.content, charset)
            # written as the part carries its content (transfer encoding, charset), so it reads back as itself
            chunks[p.index] = p.lead + p.head + p.sep + coding.encode(placeholder(value)) + p.tail
    return delim.join(chunks)


def _rest_item(item: str, names: frozenset[str]) -> str:
    name, value = rest_item(item)
    if name and value not in SHAPES and key(name) in names:
        return f"{name}={MASKED}"
    return item


def canonical(text: str, fields: Iterable[str] = DEFAULT_FIELDS) -> str:
    """The canonical text of a request, with the lines redaction would change rewritten to match."""
    names = frozenset(f.lower() for f in fields)
    lines = text.split("\n")
    for i, line in enumerate(lines):
        tag = line[:2]
        if tag not in ("c ", "h ", "q ", "f ", "j "):
            continue
        name, eq, value = line[2:].partition(" = ")
        if not eq:
            continue
        if name in (REST, REST_CUT) and tag in ("f ", "j "):  # the fields past the 4,096th, `name=value` a line
            lines[i] = f"{tag}{name} = " + ESCAPED_LF.join(_rest_item(item, names) for item in value.split(ESCAPED_LF))
            continue
        if value in SHAPES:
            continue  # masked whole already: its placeholder reads the same
        # a cookie is always redacted; a named field only when it holds something (an empty one stays empty)
        if tag == "c " or (value and (key(name) in names or (tag == "h " and name == "set-cookie"))):
            lines[i] = f"{tag}{name} = {MASKED}"
    return "\n".join(lines)
