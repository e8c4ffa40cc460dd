"""Features: one HTTP request as the engine sees it, independent of any web framework.

The gateway builds it from a live request (`gateway.parse`), the corpus builder from a JSONL record,
the decision API from its structured input. Everything downstream (canonical text, the model, the rules,
the decision cache key) reads this one type, so training and serving see requests the same way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Mapping

Headers = tuple[tuple[str, str], ...]


def _headers(raw: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> Headers:
    if raw is None:
        return ()
    items = raw.items() if isinstance(raw, Mapping) else raw
    return tuple((str(k), str(v)) for k, v in items)


@dataclass(frozen=True)
class Features:
    """A request: method, raw path, raw query (no '?'), headers in order, and the body the engine may read.

    `body` is the part of the body the engine saw (at most the configured budget); `body_size` is the full
    size when known (Content-Length), so the engine can tell that it saw only part of it.
    """

    method: str = "GET"
    path: str = "/"
    query: str = ""
    headers: Headers = ()
    body: bytes = b""
    body_size: int | None = None
    client: str = ""

    @classmethod
    def build(
        cls,
        method: str = "GET",
        path: str = "/",
        query: str = "",
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        body: bytes | str = b"",
        body_size: int | None = None,
        client: str = "",
    ) -> "Features":
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogatepass")
        if "?" in path and not query:
            path, _, query = path.partition("?")
        return cls(
            method=(method or "GET").upper(),
            path=path or "/",
            query=query or "",
            headers=_headers(headers),
            body=body,
            body_size=len(body) if body_size is None else body_size,
            client=client,
        )

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> "Features":
        """A request-shaped JSONL record (the schema of ../shared/data/requests_*.jsonl)."""
        return cls.build(
            method=rec.get("method") or "GET",
            path=rec.get("path") or "/",
            query=rec.get("query") or "",
            headers=rec.get("headers") or (),
            body=rec.get("body") or "",
        )

    @classmethod
    def from_text(cls, text: str) -> "Features":
        """A free-text input to the decision API: the text is the body of a `text/plain` POST to `/` (so its routing
        label is `origin`, an unsafe method; the block score reads the text)."""
        return cls.build(method="POST", path="/", headers=(("content-type", "text/plain"),), body=text)

    @property
    def truncated(self) -> bool:
        return self.body_size is not None and self.body_size > len(self.body)

    def header(self, name: str, default: str = "") -> str:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    @cached_property
    def canonical(self):
        from engine.canonical import canonicalize

        return canonicalize(self)

    @cached_property
    def inspected(self) -> "Features":
        """This request as the engine reads it: its body inflated where Content-Encoding compressed it
        (engine.fields.inflated). Once per request, for the canonical text, the rules and redaction alike."""
        from engine.fields import inflated

        return inflated(self)

    @property
    def text(self) -> str:
        return self.canonical.text

    def cache_key(self, model_version: str) -> str:
        """Covers everything the model sees (the canonical text) plus the model version."""
        h = hashlib.blake2b(digest_size=20)
        h.update(model_version.encode())
        h.update(b"\0")
        h.update(self.canonical.text.encode("utf-8", "surrogatepass"))
        h.update(b"\0T" if self.truncated else b"\0F")
        return h.hexdigest()
