"""Raw HTTP/1.1 over a socket, for requests no HTTP client library would send.

`send(url, data)` writes the bytes as they are (in `pieces`, optionally, to trickle them), reads until the
server closes the connection or goes quiet, and returns what came back as a `Reply`: the status line's
code (None when nothing parseable came back), the headers, the body and whether the server closed.
`parser(name)` selects aiohttp's C (llhttp) or pure-Python request parser for servers started after it.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Iterator

from yarl import URL


@dataclass
class Reply:
    status: int | None
    headers: dict[str, str] = field(default_factory=dict)  # lowercased names, last one wins
    body: bytes = b""
    closed: bool = False  # the server closed the connection (EOF or reset)
    raw: bytes = b""

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def parse_reply(raw: bytes, closed: bool) -> Reply:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2) if lines and lines[0] else []
    status = int(parts[1]) if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit() else None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return Reply(status, headers, body, closed, raw)


async def send(url: str, data: bytes | list[bytes], quiet_s: float = 3.0, gap_s: float = 0.0) -> Reply:
    """Send `data` (a list: one write each, `gap_s` apart) and read until EOF, or `quiet_s` of silence."""
    u = URL(url)
    reader, writer = await asyncio.open_connection(u.host, u.port)
    closed = False
    try:
        for i, piece in enumerate(data if isinstance(data, list) else [data]):
            if i and gap_s:
                await asyncio.sleep(gap_s)  # trickling is the point of the test, not a wait for the server
            writer.write(piece)
            try:
                await writer.drain()
            except ConnectionError:
                closed = True
                break
        raw = b""
        while not closed:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), quiet_s)
            except asyncio.TimeoutError:
                break
            except ConnectionError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            raw += chunk
        else:
            with contextlib.suppress(Exception):
                raw = await asyncio.wait_for(reader.read(65536), 0.5)
        return parse_reply(raw, closed)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


@contextlib.contextmanager
def parser(name: str) -> Iterator[None]:
    """aiohttp's request parser for servers made inside the block: "c" (llhttp, the default) or "py"."""
    import aiohttp.http_parser
    import aiohttp.web_protocol

    chosen = aiohttp.http_parser.HttpRequestParserPy if name == "py" else aiohttp.http_parser.HttpRequestParser
    saved = aiohttp.web_protocol.HttpRequestParser
    aiohttp.web_protocol.HttpRequestParser = chosen
    try:
        yield
    finally:
        aiohttp.web_protocol.HttpRequestParser = saved
