"""Raw HTTP/1.x text → request parts: whole requests (`request` context) and header lines (`header`).

Malformed input is the point of several of these records (protocol anomalies, smuggling probes), so
parsing keeps whatever it can: a request line without a version, header lines without a colon, bare LF
line ends, a body after a blank line. Nothing is repaired except what a request must have to exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

STANDARD_METHODS = frozenset("GET HEAD POST PUT PATCH DELETE OPTIONS".split())


@dataclass
class RawRequest:
    method: str = "GET"
    target: str = "/"
    version: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: str = ""

    @property
    def path(self) -> str:
        return self.target.partition("?")[0] or "/"

    @property
    def query(self) -> str:
        return self.target.partition("?")[2]


def header_lines(text: str) -> list[tuple[str, str]]:
    """`Name: value` lines (CRLF or LF). A line without a colon becomes a header with an empty value; a
    continuation line (obs-fold) stays its own header, name and leading space included, as sent."""
    out = []
    for line in re.split(r"\r?\n", text):
        if line == "":
            continue
        name, sep, value = line.partition(":")
        out.append((name, value[1:] if value.startswith(" ") else value) if sep else (line, ""))
    return out


def parse_request(text: str) -> RawRequest:
    head, sep, body = text.partition("\r\n\r\n")
    if not sep:
        head, sep, body = text.partition("\n\n")
    lines = re.split(r"\r?\n", head)
    parts = lines[0].split(" ")
    parts = [p for p in parts if p != ""] if len(parts) > 3 and parts.count("") else parts
    req = RawRequest()
    if parts and parts[0]:
        req.method = parts[0]
    if len(parts) >= 2:
        # a target with spaces (`GET /a b/c HTTP/1.1`): everything between method and version
        has_version = len(parts) >= 3 and "/" in parts[-1] and parts[-1].split("/")[0].isalpha()
        req.target = " ".join(parts[1:-1]) if has_version else " ".join(parts[1:])
        req.version = parts[-1] if has_version else ""
    req.headers = header_lines("\n".join(lines[1:]))
    req.body = body
    return req


def visible_anomaly(req: RawRequest) -> bool:
    """Whether what is odd about a raw request survives into the request the engine sees (Features and its
    canonical text). A bad HTTP version, a missing, empty or duplicated Host, a lower-case method or a
    quiet Content-Length value do not: Features has no version, upper-cases the method, and the canonical
    text leaves Host and Content-Length out while their values look ordinary."""
    from engine.canonical import canonical_text
    from engine.features import Features

    if req.method.upper() not in STANDARD_METHODS or not req.target.startswith("/"):
        return True
    if re.search(r"\s|%00|\x00", req.target) or (req.body and req.method.upper() in ("GET", "HEAD")):
        return True
    full = Features.build(method=req.method, path=req.path, query=req.query, headers=req.headers, body=req.body)
    ctype = [(k, v) for k, v in req.headers if k.lower() == "content-type"]
    bare = Features.build(method=req.method, path=req.path, query=req.query, headers=ctype, body=req.body)
    return canonical_text(full) != canonical_text(bare)
