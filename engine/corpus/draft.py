"""Draft: a request under construction, kept structured until it is rendered.

Generators fill a Draft (method, path, query pairs, headers, cookies, a body of some kind); the attack
embedder takes a benign Draft and puts a payload into one of its fields; `render()` then produces the
plain (method, path, query, headers, body) that a record stores. Keeping the structure until the end is
what lets an attack sit inside an otherwise ordinary request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.corpus.rand import Rng

if TYPE_CHECKING:
    from engine.corpus.slots import Slot

Pairs = list[tuple[str, str | None]]


@dataclass
class Part:
    """One multipart part: a text field (no filename) or a file."""

    name: str
    content: bytes | str
    filename: str | None = None
    ctype: str | None = None


@dataclass
class Body:
    """kind: form (pairs, already encoded), json (obj), multipart (parts), raw (text or bytes + ctype)."""

    kind: str
    pairs: Pairs = field(default_factory=list)
    obj: Any = None
    parts: list[Part] = field(default_factory=list)
    data: bytes | str = b""
    ctype: str = ""
    boundary: str = ""
    indent: int | None = None
    ascii: bool = False

    def render(self) -> tuple[bytes | str, str]:
        if self.kind == "form":
            return "&".join(k if v is None else f"{k}={v}" for k, v in self.pairs), self.ctype or "application/x-www-form-urlencoded"
        if self.kind == "json":
            sep = (", ", ": ") if self.indent is not None else (",", ":")
            return json.dumps(self.obj, ensure_ascii=self.ascii, indent=self.indent, separators=sep), self.ctype or "application/json"
        if self.kind == "multipart":
            return multipart(self.parts, self.boundary), f"multipart/form-data; boundary={self.boundary}"
        return self.data, self.ctype


def multipart(parts: list[Part], boundary: str) -> bytes:
    out = bytearray()
    for p in parts:
        out += f"--{boundary}\r\n".encode()
        disp = f'form-data; name="{p.name}"' + (f'; filename="{p.filename}"' if p.filename is not None else "")
        out += f"Content-Disposition: {disp}\r\n".encode("utf-8", "surrogatepass")
        if p.ctype:
            out += f"Content-Type: {p.ctype}\r\n".encode()
        out += b"\r\n"
        out += p.content if isinstance(p.content, bytes) else p.content.encode("utf-8", "surrogatepass")
        out += b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out)


def boundary(rng: Rng, client: str) -> str:
    if client in ("chrome", "edge", "safari"):
        return "----WebKitFormBoundary" + rng.alnum(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
    if client == "firefox":
        return "----geckoformboundary" + rng.hexid(32) if rng.chance(0.5) else "-" * 27 + str(rng.getrandbits(96))
    if client == "curl":
        return "-" * 24 + rng.hexid(16)
    if client in ("go", "java"):
        return rng.hexid(60)
    return rng.hexid(32)


@dataclass
class Draft:
    method: str = "GET"
    path: str = "/"
    query: Pairs = field(default_factory=list)
    headers: list[tuple[str, str]] = field(default_factory=list)  # profile headers, Host first
    extra: list[tuple[str, str]] = field(default_factory=list)  # Origin, Referer, app headers, auth
    cookies: list[tuple[str, str]] = field(default_factory=list)
    body: Body | None = None
    client: str = ""
    mode: str = "navigate"
    scene: str = ""
    edge: list[tuple[str, str]] = field(default_factory=list)  # added by the proxies in front of us
    slots: list["Slot"] = field(default_factory=list)  # where a user-supplied value sits (engine.corpus.slots)
    auto_length: bool = True  # add Content-Type/Content-Length for the body (not for raw requests)
    focus: "Slot | None" = None  # the slot a text scene built the request around (the post's body)
    # a spliced value goes into the middle of a form field's text (page saves); the older scenes' form fields
    # are replaced whole, as the documented corpus was built
    splice_form: bool = False

    @property
    def host(self) -> str:
        return self.headers[0][1] if self.headers and self.headers[0][0].lower() == "host" else ""

    def set_header(self, name: str, value: str) -> None:
        """Replace a header wherever it is (profile or extra), or add it to the extra headers."""
        low = name.lower()
        for lst in (self.headers, self.extra, self.edge):
            for i, (k, _) in enumerate(lst):
                if k.lower() == low:
                    lst[i] = (k, value)
                    return
        self.extra.append((name, value))

    def query_string(self) -> str:
        return "&".join(k if v is None else f"{k}={v}" for k, v in self.query)

    def render(self) -> tuple[str, str, str, list[tuple[str, str]], bytes | str]:
        lower = bool(self.headers) and self.headers[0][0] == "host"
        hdrs = list(self.headers)
        body: bytes | str = b""
        tail = list(self.extra)
        if self.body is not None and not self.auto_length:
            body, _ = self.body.render()
        elif self.body is not None:
            body, ctype = self.body.render()
            size = len(body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body)
            if ctype:
                tail.insert(0, ("Content-Type", ctype))
            if not any(k.lower() == "transfer-encoding" for k, _ in tail):
                tail.insert(1 if ctype else 0, ("Content-Length", str(size)))
        if self.cookies:
            tail.append(("Cookie", "; ".join(f"{k}={v}" if k else v for k, v in self.cookies)))
        tail += self.edge
        if lower:
            tail = [(k.lower(), v) for k, v in tail]
        return self.method, self.path, self.query_string(), hdrs + tail, body
