"""Embed a bare value into a request, the way an attacker (or a user) would send it.

Input: a payload string and its context, as in ../shared/data/payloads*.jsonl and benign_api.jsonl
(`param`, `path`, `body`, `header:<Name>`, `url`, `header`, `request`, `upload`, `graphql`, `token`), or a
free-text snippet (`from_text`: form field, JSON string or query value). Output: Features.

Used by `rules.eval` and the tests; deterministic (no randomness), so figures are reproducible.
"""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

from engine.features import Features

BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
BASE_HEADERS = (("Host", "shop.example"), ("User-Agent", BROWSER_UA), ("Accept", "*/*"))
BOUNDARY = "----clefboundary7MA4YWxkTrZu0gW"


def _headers(*extra: tuple[str, str], drop: str = "") -> list[tuple[str, str]]:
    base = [(k, v) for k, v in BASE_HEADERS if k.lower() != drop.lower()]
    return base + list(extra)


def _body_type(body: str) -> str:
    head = body.lstrip()[:1]
    if head == "<":
        return "application/xml"
    if head in ("{", "["):
        return "application/json"
    if "=" in body and "\n" not in body.strip() and " " not in body.strip():
        return "application/x-www-form-urlencoded"
    return "text/plain"


def _raw_headers(block: str) -> list[tuple[str, str]]:
    out = []
    for line in block.replace("\r\n", "\n").split("\n"):
        if not line:
            continue
        name, sep, value = line.partition(":")
        out.append((name, value.strip()) if sep else (line, ""))
    return out


def _raw_request(raw: str) -> Features:
    head, _, body = raw.replace("\r\n", "\n").partition("\n\n")
    first, _, rest = head.partition("\n")
    parts = first.split(" ")
    method = parts[0] if parts and parts[0] else "GET"
    target = " ".join(parts[1:-1]) if len(parts) > 2 else (parts[1] if len(parts) > 1 else "/")
    return Features.build(method=method, path=target or "/", headers=_raw_headers(rest), body=body)


def _multipart(content: str, filename: str = "upload.txt") -> tuple[str, str]:
    body = (
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
        f"Content-Type: application/octet-stream\r\n\r\n{content}\r\n--{BOUNDARY}--\r\n"
    )
    return body, f"multipart/form-data; boundary={BOUNDARY}"


def from_payload(payload: str, context: str = "param") -> Features:
    if context == "param":
        return Features.build("GET", "/search", query="q=" + quote(payload, safe=""), headers=_headers())
    if context == "path":
        path = payload if payload.startswith("/") else "/" + payload
        return Features.build("GET", path.replace(" ", "%20"), headers=_headers())
    if context == "url":
        url = payload if payload.startswith("/") else "/" + payload
        return Features.build("GET", url.replace(" ", "%20"), headers=_headers())
    if context.startswith("header:"):
        name = context.split(":", 1)[1]
        return Features.build("GET", "/", headers=_headers((name, payload), drop=name))
    if context == "header":
        return Features.build("POST", "/", headers=_headers(*_raw_headers(payload)), body="0\r\n\r\n")
    if context == "request":
        return _raw_request(payload)
    if context == "upload":
        body, ctype = _multipart(payload)
        return Features.build("POST", "/upload", headers=_headers(("Content-Type", ctype)), body=body)
    if context == "graphql":
        body = json.dumps({"query": payload})
        return Features.build("POST", "/graphql", headers=_headers(("Content-Type", "application/json")), body=body)
    if context == "token":
        return Features.build("GET", "/api/me", headers=_headers(("Authorization", "Bearer " + payload)))
    ctype = _body_type(payload)  # body and anything unknown
    return Features.build("POST", "/submit", headers=_headers(("Content-Type", ctype)), body=payload)


def from_text(text: str, how: str = "form") -> Features:
    """Free text as a user would submit it: a form field, a JSON string value, or a query value."""
    if how == "json":
        body = json.dumps({"title": "note", "content": text})
        return Features.build("POST", "/api/notes", headers=_headers(("Content-Type", "application/json")), body=body)
    if how == "query":
        return Features.build("GET", "/search", query="q=" + quote_plus(text), headers=_headers())
    body = "title=note&comment=" + quote_plus(text)
    ctype = ("Content-Type", "application/x-www-form-urlencoded")
    return Features.build("POST", "/comments", headers=_headers(ctype), body=body)
