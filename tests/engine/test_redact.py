"""engine/redact.py: credentials leave the request and its canonical text alike, and the two still meet."""

from __future__ import annotations

import base64
import gzip
import json
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import redact
from engine.canonical import normalize
from engine.features import Features

SECRET = "hunter2-Sup3rS3cret"
JSON = (("content-type", "application/json"),)
FORM = (("content-type", "application/x-www-form-urlencoded"),)
MULTIPART = (("content-type", "multipart/form-data; boundary=XyZ"),)


def multipart(*parts: tuple[str, str, str | None]) -> bytes:
    out = b""
    for name, value, filename in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--XyZ\r\nContent-Disposition: {disp}\r\n\r\n{value}\r\n".encode()
    return out + b"--XyZ--\r\n"


CASES = {
    "bearer": Features.build("GET", "/api/me", headers=[("Authorization", f"Bearer {SECRET}")]),
    "basic no space": Features.build("GET", "/", headers=[("Proxy-Authorization", SECRET)]),
    "cookies": Features.build("GET", "/cart", headers=[("Cookie", f"sid={SECRET}; theme=dark; lonely")]),
    "set-cookie": Features.build("GET", "/", headers=[("Set-Cookie", f"sid={SECRET}; Path=/")]),
    "api key header": Features.build("GET", "/v1/items", headers=[("X-Api-Key", SECRET), ("User-Agent", "curl/8")]),
    "query": Features.build("GET", "/login", f"user=bob&password={urllib.parse.quote(SECRET)}&next=%2F&flag"),
    "query bracket": Features.build("GET", "/x", f"user%5Bpassword%5D={SECRET}&q=shoes"),
    "query encoded name": Features.build("GET", "/x", f"pass%77ord={SECRET}"),
    "form": Features.build("POST", "/login", headers=FORM, body=f"user=bob&password={SECRET}&remember=1"),
    "form empty": Features.build("POST", "/login", headers=FORM, body="user=bob&password=&token="),
    "json nested": Features.build("POST", "/api/users", headers=JSON, body=json.dumps(
        {"user": {"name": "o'brien", "password": SECRET, "token": [SECRET, SECRET], "api_key": {}},
         "items": [{"token": SECRET, "n": 2}], "otp": 123456, "note": ""})),
    "json escaped key": Features.build("POST", "/api", headers=JSON, body='{"pass\\u0077ord": "' + SECRET + '"}'),
    # a body in a foreign charset holds the names, only not as bytes: redacted as read (and the text checks see it)
    "json utf-16": Features.build("POST", "/api/login", headers=(("content-type", "application/json; charset=utf-16"),),
                                  body=json.dumps({"user": "bob", "password": SECRET}).encode("utf-16")),
    "form ebcdic": Features.build("POST", "/login", headers=(("content-type", "application/x-www-form-urlencoded; charset=ibm037"),),
                                  body=f"user=bob&password={SECRET}".encode("cp037")),
    "json gzip": Features.build("POST", "/api/login", headers=JSON + (("content-encoding", "gzip"),),
                                body=gzip.compress(json.dumps({"user": "bob", "password": SECRET}).encode())),
    "multipart": Features.build("POST", "/signup", headers=MULTIPART, body=multipart(
        ("email", "a@example.com", None), ("password", SECRET, None), ("avatar", "GIF89a...", "me.gif"))),
    # the engine's splitter (engine.fields.multipart_split) reads a body that takes bare LFs: so does redaction
    "multipart bare lf": Features.build("POST", "/signup", headers=MULTIPART, body=multipart(
        ("email", "a@example.com", None), ("password", SECRET, None)).replace(b"\r\n", b"\n")),
    # past 4,096 fields the engine reads the rest as one field (engine.fields.REST): a credential there goes too
    "form past 4096 fields": Features.build("POST", "/login", headers=FORM, body="&".join(["a=1"] * 4100) + f"&password={SECRET}&b=2"),
    "json past 4096 leaves": Features.build("POST", "/api/users", headers=JSON, body=json.dumps({"pad": [1] * 4100, "password": SECRET, "b": "x y"})),
    # ASCII declared UTF-16: read as sent too, so redacted as sent
    "form ascii declared utf-16": Features.build("POST", "/login", headers=(("content-type", "application/x-www-form-urlencoded; charset=utf-16"),),
                                                 body=f"user=bob&password={SECRET}".encode()),
    # a multipart part read through its transfer encoding or charset: redacted as read, and written back the same way
    "multipart quoted-printable": Features.build("POST", "/signup", headers=MULTIPART, body=(
        b'--XyZ\r\nContent-Disposition: form-data; name="password"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n'
        + "".join(f"={b:02X}" for b in SECRET.encode()).encode() + b"\r\n--XyZ--\r\n")),
    "multipart utf-16 base64": Features.build("POST", "/signup", headers=MULTIPART, body=(
        b'--XyZ\r\nContent-Disposition: form-data; name="user"\r\n\r\nbob\r\n'
        b'--XyZ\r\nContent-Disposition: form-data; name="password"\r\nContent-Type: text/plain; charset=utf-16\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\n" + base64.b64encode(SECRET.encode("utf-16")) + b"\r\n--XyZ--\r\n")),
}


@pytest.mark.parametrize("shape", sorted(redact.SHAPES))
def test_each_placeholder_reads_as_its_mask(shape):
    for plus in (False, True):
        assert normalize(redact.SHAPES[shape], plus=plus, probe=True) == shape


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_secret_survives_and_the_canonical_texts_meet(name):
    f = CASES[name]
    r = redact.request(f)
    raw = json.dumps([r.method, r.path, r.query, r.headers, r.body.decode("latin-1")])
    assert SECRET not in raw and urllib.parse.quote(SECRET) not in raw
    assert SECRET.lower() not in r.text
    assert redact.canonical(f.text) == r.text  # what the journal stores == what training will compute
    if name.startswith("multipart "):
        assert "f password = [ID]" in r.canonical.body.split("\n")  # the placeholder, read back through the part's coding
    if name in ("multipart quoted-printable", "multipart utf-16 base64"):
        assert base64.b64encode(SECRET.encode("utf-16")) not in r.body and f"={ord(SECRET[0]):02X}".encode() not in r.body
    if name == "json utf-16":
        assert SECRET not in r.body.decode("utf-16") and json.loads(r.body.decode("utf-16"))["user"] == "bob"


def test_what_is_not_a_credential_is_kept_as_sent():
    f = CASES["query"]
    r = redact.request(f)
    assert r.query == f"user=bob&password={redact.PLACEHOLDER}&next=%2F&flag"
    assert r.method == f.method and r.path == f.path and r.body_size == f.body_size
    assert "theme=dark" not in dict(redact.request(CASES["cookies"]).headers)["Cookie"]  # every cookie value goes
    upload = redact.request(CASES["multipart"])
    assert b"GIF89a" in upload.body and b"a@example.com" in upload.body


def test_a_secret_after_the_close_delimiter_leaves_the_request():
    """A lenient parser reads parts after the close delimiter; the engine reads them as one text (the epilogue),
    and redaction takes out a credential part there. That text is not split by names, so the journal's
    canonical text keeps it (the stored text masks names only)."""
    body = multipart(("user", "bob", None)) + multipart(("password", SECRET, None))
    f = Features.build("POST", "/signup", headers=MULTIPART, body=body)
    r = redact.request(f)
    assert SECRET.encode() not in r.body and r.body.count(b"--XyZ--") == 2 and b"bob" in r.body
    assert "f (epilogue) =" in r.canonical.body


def test_a_request_without_credentials_is_the_same_object():
    f = Features.build("POST", "/api/search", headers=JSON, body=json.dumps({"q": "red shoes", "page": 2}))
    assert redact.request(f) is f
    assert redact.canonical(f.text) == f.text


def test_a_long_session_id_and_a_bearer_token_read_the_same_after_redaction():
    """The usual credentials were masked for serving anyway: the model trains on exactly what it served."""
    f = Features.build("GET", "/account", headers=[("Authorization", "Bearer eyJraWQiOiIx.eyJzdWIiOiIx.c2ln"),
                                                   ("Cookie", "sessionid=7f3c2a9e81b04d6fa0c5e2b19d7a4c3e81b0; "
                                                              "csrf=550e8400-e29b-41d4-a716-446655440000")])
    assert "[HEX]" in f.text and "[UUID]" in f.text
    assert redact.request(f).text == f.text


def test_configured_names_are_matched_by_their_last_component():
    f = Features.build("POST", "/pay", headers=JSON, body=json.dumps({"card": {"holder": "Ada Lovelace"}}))
    assert "ada lovelace" in redact.request(f).text
    r = redact.request(f, fields=["HOLDER"])
    assert b"Ada" not in r.body and redact.canonical(f.text, ["holder"]) == r.text


names = st.sampled_from(["password", "token", "q", "user", "Pass%77ord", "x", "api_key", "note"])
values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=40)
leaves = st.one_of(values, st.integers(), st.booleans(), st.none())
docs = st.recursive(leaves, lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(names, kids, max_size=3)),
                    max_leaves=8)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(query=st.lists(st.tuples(names, values), max_size=4), doc=st.dictionaries(names, docs, max_size=4),
       cookie=st.lists(st.tuples(st.sampled_from(["sid", "theme", ""]), values), max_size=3))  # fmt: skip
def test_any_query_json_and_cookie_meet(query, doc, cookie):
    q = "&".join(f"{n}={urllib.parse.quote(v)}" for n, v in query)
    jar = "; ".join(f"{n}={urllib.parse.quote(v)}" if n else urllib.parse.quote(v) for n, v in cookie)
    headers = [*JSON, ("Cookie", jar)] if jar else list(JSON)
    f = Features.build("POST", "/api/x", q, headers, json.dumps(doc))
    assert redact.canonical(f.text) == redact.request(f).text
