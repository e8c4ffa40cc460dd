"""engine/canonical.py and engine/fields.py: decoding tables, masking, layout, and robustness."""

import base64
import binascii
import codecs
import gzip
import json
import zlib
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.canonical import BODY_MARK, canonicalize, decode, normalize, percent_decode
from engine.features import Features
from engine.fields import MAX_FIELDS, REST, REST_CUT, body_fields, request_fields


@pytest.mark.parametrize(
    "raw, plus, want",
    [
        ("%27%20OR%201%3D1--", False, "' OR 1=1--"),
        ("%2527", False, "'"),  # double percent-encoding
        ("%25252e%25252e%25252f", False, "../"),  # triple
        ("%u003cscript%u003e", False, "<script>"),  # IIS %u
        ("%c0%ae%c0%ae%c0%af", False, "../"),  # overlong UTF-8
        ("&#x3c;img&#62;", False, "<img>"),  # HTML entities, hex and decimal
        ("&lt;svg&gt;", False, "<svg>"),
        ("\\u003cscript\\u003e", False, "<script>"),  # JS escapes
        ("\\x3cb\\x3e", False, "<b>"),
        ("\\u{1F600}", False, "\U0001f600"),
        ("a+b", True, "a b"),
        ("a+b", False, "a+b"),
        ("%2B", True, "+"),  # an encoded plus stays a plus
        ("%zz%4", False, "%zz%4"),  # invalid escapes stay
        ("A%F1adir", False, "Añadir"),  # Latin-1 bytes are kept, not replaced
    ],
)
def test_decode_table(raw, plus, want):
    assert decode(raw, plus=plus) == want


@pytest.mark.parametrize(
    "raw, want",
    [
        ("ＳＥＬＥＣＴ", "select"),  # NFKC fullwidth, lower case
        ("＜script＞", "<script>"),
        ("550e8400-e29b-41d4-a716-446655440000", "[UUID]"),
        ("8f14e45fceea167a5a36dedd4bea2543", "[HEX]"),
        ("order 12345678", "order [NUM]"),
        ("abcDEF1234ghiJKL5678mnoPQR", "[ID]"),
        ("a%0d%0aSet-Cookie: x=1", "a\\r\\nset-cookie: x=1"),
        ("x\x00y", "x\\x00y"),
        ("too     many\tspaces", "too many spaces"),
        ("JyBPUiAxPTEtLQ==", "[B64] ' or 1=1-- [/B64]"),  # base64 that decodes to text
    ],
)
def test_normalize_table(raw, want):
    assert normalize(raw) == want


def test_request_layout_and_header_policy():
    f = Features.build(
        "GET",
        "/search",
        "q=union+select&id=7",
        [("Host", "example.com"), ("Accept", "text/html"), ("Accept-Language", "en' or 1=1--"),
         ("User-Agent", "Mozilla/5.0"), ("Cookie", "sid=8f14e45fceea167a5a36dedd4bea2543; theme=dark"),
         ("Authorization", "Bearer secret-token")],
    )
    lines = canonicalize(f).text.split("\n")
    assert lines[:4] == ["m get", "p /search", "q q = union select", "q id = 7"]
    assert "a bearer [CRED]" in lines  # credentials: the scheme only
    assert "h accept-language = en' or 1=1-- [SQLI]" in lines  # a quiet header with an unusual value is kept
    assert not any(line.startswith("h host") or line.startswith("h accept =") for line in lines)
    assert "c sid = [HEX]" in lines and "c theme = dark" in lines
    assert "secret-token" not in canonicalize(f).text


def test_header_order_does_not_change_the_text():
    a = Features.build("GET", "/", "", [("User-Agent", "x"), ("Referer", "http://a/"), ("X-Api", "1")])
    b = Features.build("GET", "/", "", [("X-Api", "1"), ("Referer", "http://a/"), ("User-Agent", "x")])
    assert a.text == b.text


def test_json_form_and_multipart_bodies():
    j = Features.build("POST", "/api", headers={"Content-Type": "application/json"},
                       body=json.dumps({"user": {"name": "O'Brien"}, "tags": ["a"], "n": 3}))
    assert j.canonical.body.split("\n") == ["j user.name = o'brien", "j tags[] = a", "j n = 3"]
    assert BODY_MARK in j.text
    form = Features.build("POST", "/c", headers={"content-type": "application/x-www-form-urlencoded"},
                          body="comment=%3Cb%3Ehi%3C%2Fb%3E&x=1+2")
    assert form.canonical.body == "f comment = <b>hi</b>\nf x = 1 2"
    mp = (b"--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nHello\r\n"
          b"--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"s.php\"\r\nContent-Type: image/png\r\n\r\n"
          b"<?php system($_GET['c']); ?>\r\n--XyZ--\r\n")
    m = Features.build("POST", "/up", headers={"Content-Type": "multipart/form-data; boundary=XyZ"}, body=mp)
    assert m.canonical.body.split("\n") == ["f title = hello", "u f;s.php;image/png = <?php system($_get['c']); ?>"]
    # bare LFs, as lenient parsers take them: the line break before a delimiter is the delimiter's, not the value's
    lf = Features.build("POST", "/up", headers={"Content-Type": "multipart/form-data; boundary=XyZ"},
                        body=mp.replace(b"\r\n", b"\n"))
    assert lf.canonical.body == m.canonical.body


SQLI_JSON = {"name": "x", "q": "1' union select password from users--"}


@pytest.mark.parametrize(
    "ctype,body",
    [
        ("application/json; charset=utf-16", json.dumps(SQLI_JSON).encode("utf-16")),  # declared (with its mark)
        ("application/json; charset=UTF-16BE", json.dumps(SQLI_JSON).encode("utf-16-be")),
        ("application/json", json.dumps(SQLI_JSON).encode("utf-16-le")),  # no mark, no charset: RFC 4627's zero bytes
        ("application/json", json.dumps(SQLI_JSON).encode("utf-32")),  # the byte-order mark
        ("", json.dumps(SQLI_JSON).encode("utf-32-be")),
        ('application/json; charset="ibm037"', json.dumps(SQLI_JSON).encode("cp037")),  # EBCDIC
        ("application/x-www-form-urlencoded; charset=cp500", "name=x&q=1' union select password from users--".encode("cp500")),
    ],
)
def test_a_body_in_a_foreign_charset_is_read_as_its_application_reads_it(ctype, body):
    """Read byte by byte, UTF-16 is every other byte zero (a binary body: no printable run) and EBCDIC is noise,
    so neither the model nor the rules would see the payload that the application decodes."""
    f = Features.build("POST", "/api/search", headers={"Content-Type": ctype} if ctype else {}, body=body)
    fields = {(x.kind, x.name): x.value for x in request_fields(f)}
    assert fields.get(("json", "q"), fields.get(("form", "q"))) == "1' union select password from users--"
    assert "union select password" in f.canonical.body


@pytest.mark.parametrize(
    "ctype,body,wide",
    [
        ("application/x-www-form-urlencoded; charset=utf-16", b"name=x&q=1'+union+select+password+from+users--", "utf-16"),
        ("application/json; charset=utf-32", json.dumps(SQLI_JSON).encode(), "utf-32"),
        ("application/json", codecs.BOM_UTF16_LE + json.dumps(SQLI_JSON).encode(), "utf-16"),  # a mark, then ASCII
        # zero bytes put in to look the part: read both ways
        ("application/x-www-form-urlencoded; charset=utf-16", b"pad=\0\0\0\0&name=x&q=1'+union+select+password+from+users--", "utf-16"),
    ],
)
def test_ascii_declared_or_marked_wide_is_read_as_sent_too(ctype, body, wide):
    """Decoded as UTF-16 or UTF-32, an ASCII body is CJK noise, while a server that ignores the charset (most do)
    or the mark reads the payload. A body that really is UTF-16 has no printable run as sent, so reading both
    costs it nothing."""
    f = Features.build("POST", "/api/search", headers={"Content-Type": ctype}, body=body)
    assert "union select password" in f.canonical.body
    assert any("1' union select password from users--" in x.value.replace("+", " ") for x in request_fields(f))
    real = Features.build("POST", "/api/search", headers={"Content-Type": ctype}, body=body.lstrip(codecs.BOM_UTF16_LE).replace(b"\0", b"").decode().encode(wide))
    assert [x.value for x in request_fields(real) if x.kind == "body"] in ([], [""])


@pytest.mark.parametrize(
    "ctype,body",
    [
        ("application/json; charset=iso-8859-1", json.dumps({"q": "caf\u00e9"}).encode()),  # ASCII-compatible: as before
        ("application/json; charset=rot13", json.dumps({"q": "x"}).encode()),  # not a text encoding
        ("application/json; charset=no-such-charset", json.dumps({"q": "x"}).encode()),
        ("text/plain", "plain words".encode()),
    ],
)
def test_other_charsets_read_as_before(ctype, body):
    from engine.fields import _content_type, body_codec, body_fields, foreign_codec

    f = Features.build("POST", "/api", headers={"Content-Type": ctype}, body=body)
    assert body_codec(f.body, *_content_type(f)) is None and body_fields(f)
    assert foreign_codec("windows-1252") is None and foreign_codec("shift_jis") is None and foreign_codec("utf-8") is None
    assert foreign_codec("UTF-16") == "utf-16" and foreign_codec("ibm037") == "cp037" and foreign_codec("utf-7") == "utf-7"


@pytest.mark.parametrize("coding,pack", [
    ("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", zlib.compress),
    ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some clients send it
    ("gzip, gzip", lambda b: gzip.compress(gzip.compress(b))),  # codings listed in the order applied
])  # fmt: skip
def test_a_compressed_body_is_read_inflated(coding, pack):
    data = pack(json.dumps(SQLI_JSON).encode())
    f = Features.build("POST", "/api", headers={"Content-Type": "application/json", "Content-Encoding": coding}, body=data)
    assert "union select password" in f.canonical.body
    assert f.body == data  # the request itself is untouched: what is forwarded


def test_a_body_that_does_not_inflate_is_read_as_sent_and_a_bomb_stops_at_a_mib():
    from engine.fields import MAX_INFLATED, inflated

    plain = Features.build("POST", "/api", headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
                           body=json.dumps(SQLI_JSON))
    assert inflated(plain) is plain and "union select password" in plain.canonical.body
    unknown = Features.build("POST", "/api", headers={"Content-Encoding": "br"}, body=b"\x8b\x00junk")
    assert inflated(unknown) is unknown
    bomb = Features.build("POST", "/api", headers={"Content-Encoding": "gzip"}, body=gzip.compress(b"x" * (64 << 20)))
    assert len(bomb.body) < 100_000 and len(inflated(bomb).body) == MAX_INFLATED
    # once per request: the canonical text and the rules share one inflated copy, which is read as it is
    assert plain.inspected is plain and bomb.inspected is bomb.inspected and bomb.inspected.inspected is bomb.inspected


def test_a_multipart_epilogue_is_read_and_an_empty_one_adds_nothing():
    """Parts after the closing delimiter are dropped by compliant parsers and read by lenient ones."""
    head = b'--b\r\nContent-Disposition: form-data; name="title"\r\n\r\nhello\r\n--b--\r\n'
    hidden = b'--a\r\nContent-Disposition: form-data; name="q"\r\n\r\n1\' union select 1--\r\n--a--\r\n'
    ctype = {"Content-Type": "multipart/form-data; boundary=b"}
    fields = [(x.kind, x.name) for x in request_fields(Features.build("POST", "/up", headers=ctype, body=head + hidden))]
    assert fields[-2:] == [("form", "title"), ("form", "(epilogue)")]
    assert "union select 1" in Features.build("POST", "/up", headers=ctype, body=head + hidden).canonical.body
    plain = [(x.kind, x.name) for x in request_fields(Features.build("POST", "/up", headers=ctype, body=head))]
    assert plain[-1] == ("form", "title")


def _part(headers: list[str], content: bytes) -> bytes:
    return b"--b\r\n" + b"".join(h.encode() + b"\r\n" for h in headers) + b"\r\n" + content + b"\r\n"


SQLI = "1' union select password from users--"
TEXT_PART = ['Content-Disposition: form-data; name="bio"']


@pytest.mark.parametrize(
    "parts",
    [
        # Content-Transfer-Encoding (Go's mime/multipart undoes quoted-printable unasked): every byte escaped
        [_part(TEXT_PART + ["Content-Transfer-Encoding: quoted-printable"], "".join(f"={b:02X}" for b in SQLI.encode()).encode())],
        [_part(TEXT_PART + ["Content-Transfer-Encoding: base64"], base64.encodebytes(SQLI.encode()))],
        # the part's own charset, or a byte-order mark
        [_part(TEXT_PART + ["Content-Type: text/plain; charset=utf-16"], SQLI.encode("utf-16"))],
        [_part(TEXT_PART + ['Content-Type: text/plain; charset="UTF-16LE"'], SQLI.encode("utf-16-le"))],
        [_part(TEXT_PART + ["Content-Type: text/plain; charset=ibm037"], SQLI.encode("cp037"))],
        [_part(TEXT_PART, SQLI.encode("utf-32"))],
        [_part(TEXT_PART + ["Content-Type: application/json"], json.dumps({"q": SQLI}).encode("utf-16-le"))],
        # the form's _charset_ names the charset of its text parts
        [_part(['Content-Disposition: form-data; name="_charset_"'], b"UTF-16LE"), _part(TEXT_PART, SQLI.encode("utf-16-le"))],
        # both, in a file part
        [_part(['Content-Disposition: form-data; name="doc"; filename="q.txt"', "Content-Type: text/plain; charset=utf-16",
                "Content-Transfer-Encoding: base64"], base64.b64encode(SQLI.encode("utf-16")))],
    ],
)
def test_a_multipart_part_is_read_as_its_own_headers_say(parts):
    """A part in a transfer encoding or a charset that does not keep ASCII as ASCII reads, byte by byte, as
    `=31=27=20...`, every other byte zero or EBCDIC noise, while an application that honours its headers reads
    the payload."""
    f = Features.build("POST", "/profile", headers={"Content-Type": "multipart/form-data; boundary=b"},
                       body=b"".join(parts) + b"--b--\r\n")
    assert SQLI in [x.value for x in request_fields(f)] + [json.loads(x.value)["q"] for x in request_fields(f) if x.value.startswith("{")]
    assert "union select password" in f.canonical.body


def test_other_multipart_parts_read_as_before():
    from engine.fields import PartCoding, read_part

    gif = base64.b64decode("R0lGODlhAQABAJH/AP///wAAAMDAwAAAACH5BAEAAAIALAAAAAABAAEAAAICVAEAOw==")
    assert read_part({}, "caf\u00e9 = 3".encode()) == (PartCoding(), "caf\u00e9 = 3")
    assert read_part({"content-type": "text/plain; charset=iso-8859-1"}, b"caf\xe9") == (PartCoding(), "caf\u00e9")
    assert read_part({"content-transfer-encoding": "8bit"}, b"a=3D") == (PartCoding(), "a=3D")  # not quoted-printable
    # base64 that is not base64 is read as sent; a binary file inside base64 is read as its printable strings
    assert read_part({"content-transfer-encoding": "base64"}, b"not base64!") == (PartCoding("base64"), "not base64!")
    assert read_part({"content-transfer-encoding": "base64"}, base64.b64encode(gif))[1] == read_part({}, gif)[1]
    coding, text = read_part({"content-type": "text/plain; charset=utf-16", "content-transfer-encoding": "quoted-printable"},
                             binascii.b2a_qp("x=1".encode("utf-16")))
    assert text == "x=1" and read_part({"content-type": "text/plain; charset=utf-16", "content-transfer-encoding": "quoted-printable"},
                                       coding.encode("hello"))[1] == "hello"  # encode() writes what reads back


def test_a_json_key_given_twice_keeps_both_values():
    """Parsers disagree on which of two equal keys an application reads: neither value may hide."""
    f = Features.build("POST", "/api", headers={"Content-Type": "application/json"},
                       body='{"q": "1\' union select 1--", "q": "shoes", "u": {"n": "a", "n": "b"}, "x": {"k": 1}}')
    assert f.canonical.body.split("\n")[1:] == ["j q = shoes", "j u.n = a", "j u.n = b", "j x.k = 1"]
    assert f.canonical.body.startswith("j q = 1' union select 1--")


def test_binary_body_keeps_its_printable_strings():
    body = b"\x89PNG\r\n\x1a\n\x00\x00\x00" + bytes(range(256)) * 4 + b"<script>alert(1)</script>" + b"\x00" * 10
    f = Features.build("POST", "/img", headers={"content-type": "image/png"}, body=body)
    assert "<script>alert(1)</script>" in f.canonical.body


def test_fields_split():
    f = Features.build("POST", "/p", "a=1&b", {"Cookie": "k=v", "Content-Type": "application/json"}, '{"x": [1]}')
    kinds = [(x.kind, x.name, x.value) for x in request_fields(f)]
    assert ("query", "a", "1") in kinds and ("query", "b", "") in kinds
    assert ("cookie", "k", "v") in kinds and ("json", "x[]", "1") in kinds


def test_truncation_is_recorded_and_keys_differ():
    f = Features.build("POST", "/p", body=b"x" * 10, body_size=100)
    assert f.truncated and f.canonical.truncated
    assert f.cache_key("m@1") != f.cache_key("m@2")
    assert f.cache_key("m@1") != Features.build("POST", "/p", body=b"x" * 10).cache_key("m@1")


def test_deeply_nested_json_does_not_crash():
    body = "[" * 5000 + "]" * 5000
    f = Features.build("POST", "/", headers={"content-type": "application/json"}, body=body)
    assert f.text  # falls back to the raw body


def test_base64_expansion_keeps_jwt_readable():
    token = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    assert '"alg":"hs256"' in normalize(token)


@settings(max_examples=300, deadline=None)
@given(
    method=st.text(max_size=10),
    path=st.text(max_size=200),
    query=st.text(max_size=200),
    headers=st.lists(st.tuples(st.text(max_size=20), st.text(max_size=80)), max_size=6),
    body=st.binary(max_size=600),
    ctype=st.sampled_from(["", "application/json", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b", "text/xml"]),
)
def test_any_request_canonicalises(method, path, query, headers, body, ctype):
    f = Features.build(method or "GET", path or "/", query, headers + [("content-type", ctype)], body)
    text = f.text
    assert isinstance(text, str)
    text.encode("utf-8")  # always encodable: no lone surrogates reach the tokenizer
    assert "\r" not in text


@pytest.mark.parametrize(
    "value, marks",
    [
        ("1' OR 1=1--", " [SQLI]"),
        ("<script>alert(1)</script>", " [XSS]"),
        ("O'Brien", ""),
        ("select the best union for your team", ""),
        ("hello world", ""),
    ],
)
def test_libinjection_markers(value, marks):
    assert normalize(value, probe=True) == normalize(value) + marks


@pytest.mark.parametrize("body", [b'{"a": "\\ud800 or 1=1--"}', b'{"q": "<a href=\\udfff>"}'])
def test_a_lone_surrogate_from_a_json_escape_is_probed_not_raised(body):
    f = Features.build(method="POST", headers=[("Content-Type", "application/json")], body=body)
    text = canonicalize(f).text  # libinjection raised UnicodeEncodeError on the lone surrogate before
    assert isinstance(text, str) and text


EQUIVALENCE = [
    "", "plain", "a+b%2Bc", "%252e%252e%252f", "%u003cscript%u003e", "%c0%ae%c0%af%e0%80%ae", "100%zz%",
    "%E4%BD%A0%E5%A5%BD" * 50, "%ff%fe%00", "&amp;lt;%26lt%3B", "\\u0027%5Cu0027", "%F0%9F%98%80 \ud83d",
    "%%32%65%%32%65", "%25%32%35%32%65", "a\\x41%41\\%5c\\\\n", "%4", "%41%4",
]


@pytest.mark.parametrize("value", EQUIVALENCE)
def test_fast_percent_decoding_equals_the_escape_by_escape_one(value):
    """percent_decode runs valid %XX in C; the Python path (also %uXXXX, invalid escapes) is the reference."""
    from engine.canonical import _OVERLONG, _overlong, _percent_bytes
    from engine.fields import text_of

    assert percent_decode(value) == text_of(_OVERLONG.sub(_overlong, _percent_bytes(value)))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.booleans(), st.booleans())
def test_remembered_forms_equal_computed_ones(value, plus, probe):
    """normalize remembers the forms of short values; what it returns is what it computes, per flag."""
    from engine import canonical

    want = canonical._normalize(value, plus, probe)
    assert normalize(value, plus=plus, probe=probe) == want
    assert normalize(value, plus=plus, probe=probe) == want  # the remembered form, for short values


def test_remembered_forms_are_kept_apart_by_flag_and_bounded_by_length():
    from engine import canonical

    canonical._normalize_cached.cache_clear()
    assert normalize("a+b") == "a+b" and normalize("a+b", plus=True) == "a b"  # `+` is a space in forms only
    assert normalize("' or 1=1--", probe=True).endswith("[SQLI]") and "[SQLI]" not in normalize("' or 1=1--")
    before = canonical._normalize_cached.cache_info().currsize
    normalize("x" * (canonical.NORMALIZED_CACHE_CHARS + 1))  # a long value is computed, not remembered
    assert canonical._normalize_cached.cache_info().currsize == before == 4


def test_remembered_forms_stay_within_their_bound():
    from engine import canonical

    canonical.forget()
    for i in range(canonical.NORMALIZED_CACHE + 500):
        normalize(f"value {i}")
    assert canonical._normalize_cached.cache_info().currsize == canonical.NORMALIZED_CACHE
    canonical.forget()
    assert canonical._normalize_cached.cache_info().currsize == 0


XMP = (b'<?xpacket begin="\xef\xbb\xbf" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="XMP Core 6.0.0">'
       b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" '
       b'xmlns:exif="http://ns.adobe.com/exif/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/" exif:PixelXDimension="3024">'
       b"<dc:description>%s</dc:description></rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end=\"w\"?>")  # fmt: skip


def _png(meta: bytes) -> bytes:
    return b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x0b\xd0" + b"\x00\x00\x00\x00iTXtXML:com.adobe.xmp\x00\x00\x00\x00\x00" + meta + b"\x00\x00IDATx\x01\xec\xdd\t\x00IEND"


def test_xmp_metadata_is_read_as_its_values():
    """A screenshot's or a photo's XMP packet is namespaced XML: read as markup, it made the model block 20 of 22
    such PNGs on an upload form (bench/uploads.py). Its values are kept, so a payload in one is still read."""
    from engine.fields import printable_strings, xmp_read

    text = printable_strings(_png(XMP % b"Sunset at the beach"))
    assert "Sunset at the beach" in text and "3024" in text and "XMP Core 6.0.0" in text
    assert "rdf:" not in text and "xmlns" not in text and "ns.adobe.com" not in text and "W5M0M" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in printable_strings(_png(XMP % b"&lt;script&gt;alert(1)&lt;/script&gt;"))
    assert "1' union select password from users--" in printable_strings(_png(XMP % b"1' union select password from users--"))
    # anything that is not metadata keeps the packet whole: a tag without a prefix, a handler, a declaration, code
    for odd in (XMP % b"<script>alert(1)</script>", XMP.replace(b"rdf:about=\"\"", b"rdf:about=\"\" onload=\"alert(1)\"") % b"x",
                XMP % b"<!ENTITY e SYSTEM 'file:///etc/passwd'>", XMP % b"<?php system($_GET['c']); ?>"):  # fmt: skip
        assert xmp_read(odd) == odd
    assert xmp_read(b"<x:xmpmeta " * 5000) == b"<x:xmpmeta " * 5000  # an unclosed packet is read as sent, in one pass


def test_a_pdf_is_read_as_its_printable_strings():
    """Its compressed streams, read as text, were noise that the model scored as an attack."""
    from engine.fields import is_binary

    pdf = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\n2 0 obj\n<< /Filter /FlateDecode /Length 9 >>\nstream\nx\xda\xcb\xe7\xea\nendstream\n"
    assert is_binary(pdf) and not is_binary(b"%PD")
    f = Features.build("POST", "/up", headers={"Content-Type": "multipart/form-data; boundary=b"},
                       body=b'--b\r\nContent-Disposition: form-data; name="cv"; filename="cv.pdf"\r\n\r\n' + pdf + b"\r\n--b--\r\n")
    assert "/type /catalog" in f.canonical.body and "ú" not in f.canonical.body  # the stream x\\xda... is gone


def test_a_long_printable_run_late_in_a_binary_file_is_read():
    """A web shell appended to an image used to fall past the first 64 runs, which were all the engine read of a
    binary file; the short runs of compressed pixels stay out."""
    import random

    from engine.fields import LONG_RUN, printable_strings

    rng = random.Random(3)
    pixels = bytes(rng.randrange(256) for _ in range(200_000))
    shell = b'<?php system($_GET["c"]); ?>'
    text = printable_strings(b"\x89PNG\r\n\x1a\n" + pixels + shell)
    assert shell.decode() in text
    kept = text.split(" ")
    assert len(kept) < 200  # 64 runs of any length, then only long ones (random bytes hold a few)
    assert all(len(r) >= LONG_RUN for r in printable_strings(b"\x00".join([b"abcd"] * 100 + [b"x" * 20])).split(" ")[64:])


PADDED = "1' union select username, password from users--"


@pytest.mark.parametrize("ctype,body", [
    ("application/json", json.dumps({"pad": [1] * 4100, "tags": ["a"] * 5000, "q": PADDED})),
    ("application/json", json.dumps([{"id": i, "note": "ok"} for i in range(2100)] + [{"q": PADDED}])),
    ("application/x-www-form-urlencoded", "&".join(["a=1"] * 4100) + "&q=" + urllib.parse.quote_plus(PADDED)),
    ("multipart/form-data; boundary=b", "".join(['--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n'] * 4100)
     + f'--b\r\nContent-Disposition: form-data; name="q"\r\n\r\n{PADDED}\r\n--b--\r\n'),
])  # fmt: skip
def test_a_field_after_4096_others_is_read(ctype, body):
    """Past MAX_FIELDS the rest of a body is one field holding each distinct item once: 4,096 padding fields
    no longer hide a payload from the model and the rules (a 12 KB JSON body did)."""
    f = Features.build("POST", "/api/import", headers={"Content-Type": ctype}, body=body)
    fields = body_fields(f)
    assert len(fields) <= MAX_FIELDS + 1 and fields[-1].name == REST
    assert PADDED.split("'")[1].strip() in f.canonical.body and not f.canonical.truncated
    assert len(fields[-1].value) < 200  # the padding, read once


def test_a_rest_field_that_is_full_marks_the_text_truncated():
    """More distinct items than REST holds: the model did not read all of it, and the decision says so (the rules
    then read the whole body, as they do one the gateway cut)."""
    body = json.dumps([{"id": i, "title": f"item number {i}"} for i in range(12_000)])
    f = Features.build("POST", "/api/import", headers={"Content-Type": "application/json"}, body=body)
    assert body_fields(f)[-1].name == REST_CUT and f.canonical.truncated
    whole = body_fields(f, rest_chars=1 << 21)[-1]  # what the rules read: all of it
    assert whole.name == REST and "title=item number 11999" in whole.value and len(whole.value) > len(body_fields(f)[-1].value)
    small = Features.build("POST", "/api/import", headers={"Content-Type": "application/json"}, body=json.dumps([{"id": 1}] * 5000))
    assert not small.canonical.truncated
