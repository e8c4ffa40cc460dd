"""The rules alone, in a real gateway process with the model disabled, against a real origin: a payload
behind hundreds of JSON records, in one field of a large multipart form, or in one element of a SOAP order, is
blocked with 403 (the rules used to read such values with their document rules only, and forwarded them); the
same bodies without it reach the origin byte for byte."""

from __future__ import annotations

import hashlib
import json

import aiohttp
import pytest

from gateway.server import running
from tests.factories import make_config

SQLI = "1' union select username, password from users--"


def records(q: str | None) -> tuple[bytes, str]:
    items = [{"id": i, "name": f"Customer number {i}", "note": f"Ordered {i % 7} items, delivered on time (ref #{i * 31})",
              "contact": "Seán O'Brien"} for i in range(320)]  # fmt: skip
    return json.dumps({"items": items, **({"q": q} if q else {})}).encode(), "application/json"


def multipart(q: str | None) -> tuple[bytes, str]:
    parts = [f'--b0\r\nContent-Disposition: form-data; name="f{i}"\r\n\r\nvalue number {i}, (ok)\r\n' for i in range(2000)]
    if q:
        parts.append(f'--b0\r\nContent-Disposition: form-data; name="q"\r\n\r\n{q}\r\n')
    return ("".join(parts) + "--b0--\r\n").encode(), "multipart/form-data; boundary=b0"


def soap(q: str | None) -> tuple[bytes, str]:
    lines = "".join(f"<line sku='SKU-{i:04d}' qty='{i % 5 + 1}'><note>Gift wrap, O'Brien &amp; sons (#{i})</note></line>" for i in range(40))
    query = f"<customerRef>{q}</customerRef>" if q else "<customerRef>C-1042</customerRef>"
    envelope = ('<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">'
                f'<soap:Body><PlaceOrder xmlns="urn:shop">{query}<lines>{lines}</lines></PlaceOrder></soap:Body></soap:Envelope>')  # fmt: skip
    return envelope.encode(), "text/xml; charset=utf-8"


@pytest.mark.parametrize("build", [records, multipart, soap], ids=["json-records", "large-multipart", "soap-element"])
async def test_the_rules_alone_block_a_payload_the_model_would_have_read(upstream, build):
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "model": {"enabled": False},
           "headers": {"echo": True}}  # fmt: skip
    async with running(make_config(raw, origin=upstream.url)) as gw, aiohttp.ClientSession() as s:
        bad, ctype = build(SQLI)
        async with s.post(gw.proxy_url + "/api/import", data=bad, headers={"Content-Type": ctype}) as resp:
            assert (resp.status, resp.headers["x-clef-source"]) == (403, "rules")
        good, ctype = build(None)
        async with s.post(gw.proxy_url + "/api/import?ok", data=good, headers={"Content-Type": ctype}) as resp:
            assert resp.status == 200, await resp.text()
    assert upstream.hits("/api/import") == 0
    seen = [x for x in upstream.seen if x.target == "/api/import?ok"]
    assert len(seen) == 1 and (seen[0].size, seen[0].sha256) == (len(good), hashlib.sha256(good).hexdigest())
