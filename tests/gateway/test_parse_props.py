"""parse → Features on any request-line and header bytes, through both of aiohttp's real parsers.

Hypothesis writes request heads with arbitrary targets (raw bytes, broken percent-escapes, invalid UTF-8,
NULs) and arbitrary header bytes. Each goes through the parser as it would off the wire; then, for what
the parser takes, strict.check and parse.features, and the engine's canonical text and cache key. The only
outcomes allowed: a parse error we turn into a 4xx that quotes nothing of the request, a ClientError
from the strict checks, or Features the engine can read. Never another exception.
"""

from __future__ import annotations

import asyncio

import aiohttp.http_parser
from aiohttp import web
from aiohttp.base_protocol import BaseProtocol
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.test_utils import make_mocked_request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.features import Features
from gateway import parse, strict
from gateway.errors import ClientError
from gateway.protocol import parse_error
from tests.factories import make_config

CONFIG = make_config({"limits": {"max_header_bytes": 4096}, "model": {"inspect_bytes": 256}})
PARSERS = {"c": aiohttp.http_parser.HttpRequestParser, "py": aiohttp.http_parser.HttpRequestParserPy}

visible = st.binary(max_size=40).map(lambda b: bytes(c % 94 + 33 for c in b))  # printable ASCII, no space
escapes = st.lists(st.sampled_from([b"%", b"%2", b"%zz", b"%ff", b"%c0%af", b"%00", b"%e2%80%ae", b"%25", b"+"]),
                   max_size=6).map(b"".join)  # fmt: skip
targets = st.one_of(
    st.builds(lambda a, b, c: b"/" + a + b + c, visible, escapes, visible),
    st.builds(lambda a, n: b"/?" + b"&".join(b"p%d=%s" % (i, a) for i in range(n)), visible, st.integers(0, 300)),
    st.binary(max_size=60),
)
known = st.sampled_from([b"Cookie", b"Content-Type", b"User-Agent", b"X-A", b"Transfer-Encoding", b"Content-Length",
                         b"Upgrade", b"Host"])  # fmt: skip
names = st.one_of(known, known, known, st.binary(min_size=1, max_size=12))  # mostly names a parser takes
values = st.one_of(visible, visible.map(lambda b: b + b" \xff\xfe caf\xc3\xa9\t"), st.binary(max_size=40))
heads = st.builds(
    lambda method, target, version, headers, body: (
        method + b" " + target + b" " + version + b"\r\n"
        + b"".join(n + b": " + v + b"\r\n" for n, v in headers) + b"\r\n" + body
    ),
    st.sampled_from([b"GET", b"POST", b"PUT", b"get", b"OPTIONS", b"X"]),
    targets,
    st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.1", b"HTTP/2.0"]),
    st.lists(st.tuples(names, values), max_size=6).map(lambda hs: [(b"Host", b"a"), *hs]),
    st.binary(max_size=50),
)


async def through(parser_cls: type, data: bytes) -> list[str]:
    """What became of `data`: one word per request the parser saw (or its refusal)."""
    loop = asyncio.get_running_loop()
    parser = parser_cls(BaseProtocol(loop), loop, 2**16, max_line_size=8190, max_field_size=8190, max_headers=128)
    try:
        messages, _, _ = parser.feed_data(data)
    except HttpProcessingError as exc:
        err = parse_error(exc)
        assert err.status in (400, 431) and "b'" not in err.message and err.message
        return ["refused by the parser"]
    outcomes = []
    for message, payload in messages:
        payload.feed_eof()
        mock = make_mocked_request("GET", "/")
        request = web.Request(message, payload, mock.protocol, mock.writer, mock.task, loop)
        try:
            request = strict.check(request, CONFIG.limits)
        except ClientError as err:
            assert 400 <= err.status < 500
            outcomes.append("refused by strict")
            continue
        try:
            features = await parse.features(request, CONFIG, parse.Deadline(CONFIG.limits))
        except ClientError:  # a body whose chunked framing breaks after the head
            outcomes.append("refused reading the body")
            continue
        assert isinstance(features, Features)
        assert isinstance(features.canonical.text, str) and features.cache_key("m@1")
        outcomes.append("decidable")
    return outcomes


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(heads, st.sampled_from(sorted(PARSERS)))
def test_any_head_is_refused_or_becomes_features(data, parser):
    assert asyncio.run(through(PARSERS[parser], data)) is not None


def test_the_strategy_reaches_the_engine():
    """Not every example is thrown out at the door: plain but hostile heads do get decided."""
    hostile = b"GET /%ff%fe%00/..%2f..%c0%af?a=%zz&b=%%%&" + b"&".join(b"p%d=1" % i for i in range(1000))
    data = hostile + b" HTTP/1.1\r\nHost: a\r\nX-A: \xff\xfe caf\xc3\xa9\r\n\r\n"
    for cls in PARSERS.values():
        assert asyncio.run(through(cls, data)) == ["decidable"]
