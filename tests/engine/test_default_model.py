"""The packaged default bundle on everyday requests: the real int8 ONNX model, then the default rules on
what it let through (the gateway's default decision, `rules.ensemble`).

Not an accuracy measure (that is `python -m engine.eval` on the held-out split, bench/RESULTS.md): a guard
that a new default bundle still lets the plainest legitimate traffic of a site through, back office
included, and still blocks the plainest attacks. Written by hand for this test; no corpus record.
"""

from __future__ import annotations

import json

import pytest

from engine import bundle as bundles
from engine.eval import with_rules
from engine.features import Features
from engine.model import Model
from rules import RuleEngine
from tests.factories import INTERIM_BUNDLE

pytestmark = INTERIM_BUNDLE


@pytest.fixture(scope="module")
def model() -> Model:
    m = Model(bundles.load())
    m.rules = RuleEngine.load()
    return m


def decide(model: Model, method: str, target: str, body: str | bytes = "", ctype: str = "") -> str:
    path, _, query = target.partition("?")
    headers = [("Host", "shop.example.com"), ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0")]
    if ctype:
        headers.append(("Content-Type", ctype))
    f = Features.build(method, path, query, headers, body)
    probs, feats = model.run([model.encode(f)])
    return with_rules([model.verdict(probs[0], feats[0])], [f], model.rules)[0].label


EVERYDAY = [
    ("GET", "/"),
    ("GET", "/products/red-running-shoes?variant=4411"),
    ("GET", "/search?q=O%27Brien+family+recipes"),
    ("GET", "/search?q=how+to+drop+a+table+leg+from+a+chair"),
    ("GET", "/static/css/main.3f9a1c2e.css"),
    ("GET", "/api/v1/orders?status=open&page=2"),
    ("GET", "/admin/users"),
    ("GET", "/admin/orders/1043"),
    ("GET", "/wp-admin/edit.php?post_type=page"),
    ("GET", "/dashboard"),
    ("GET", "/settings/profile"),
]


@pytest.mark.parametrize("method,target", EVERYDAY)
def test_everyday_requests_pass(model, method, target):
    assert decide(model, method, target) != "block"


def test_a_post_with_a_name_and_prose_passes(model):
    body = json.dumps({"name": "Siobhán O'Connor", "comment": "Where is my order? I selected express delivery."})
    assert decide(model, "POST", "/api/v1/comments", body, "application/json") != "block"


HOSTILE = [
    ("GET", "/search?q=1%27%20UNION%20SELECT%20username,password%20FROM%20users--"),
    ("GET", "/item?id=1%20OR%201=1"),
    ("GET", "/page?file=../../../../etc/passwd"),
    ("GET", "/search?q=%3Cscript%3Ealert(document.cookie)%3C/script%3E"),
    ("GET", "/ping?host=127.0.0.1;cat%20/etc/passwd"),
    ("GET", "/.env"),
    ("GET", "/.git/config"),
]


@pytest.mark.parametrize("method,target", HOSTILE)
def test_plain_attacks_are_blocked(model, method, target):
    assert decide(model, method, target) == "block"


SQLI = {"name": "x", "q": "1' union select password from users--"}
PROSE = {"name": "Siobhán O'Connor", "comment": "Where is my order? I selected express delivery."}


@pytest.mark.parametrize(
    "body,ctype",
    [
        (json.dumps(SQLI).encode("utf-16"), "application/json; charset=utf-16"),
        (json.dumps(SQLI).encode("utf-16-le"), "application/json"),
        (json.dumps(SQLI).encode("cp037"), "application/json; charset=ibm037"),
        (json.dumps(SQLI).encode(), "application/json; charset=utf-16"),  # ASCII declared UTF-16: CJK noise decoded
    ],
)
def test_an_attack_in_a_foreign_charset_is_blocked(model, body, ctype):
    assert decide(model, "POST", "/api/search", body, ctype) == "block"


def _part(headers: str, content: bytes) -> bytes:
    return (b'--b\r\nContent-Disposition: form-data; name="bio"\r\n' + headers.encode() + b"\r\n" + content
            + b"\r\n--b--\r\n")  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        _part("Content-Transfer-Encoding: quoted-printable\r\n", "".join(f"={c:02X}" for c in SQLI["q"].encode()).encode()),
        _part("Content-Type: text/plain; charset=utf-16\r\n", SQLI["q"].encode("utf-16")),
        _part("Content-Type: text/plain; charset=ibm037\r\n", SQLI["q"].encode("cp037")),
    ],
)
def test_an_attack_in_a_multipart_part_coding_is_blocked(model, body):
    """Read byte by byte, each of these parts got `origin` from the model (at confidence 1.0) and nothing from the rules."""
    assert decide(model, "POST", "/account/profile", body, "multipart/form-data; boundary=b") == "block"


def test_prose_in_a_utf16_part_passes(model):
    body = _part("Content-Type: text/plain; charset=utf-16\r\n", PROSE["comment"].encode("utf-16"))
    assert decide(model, "POST", "/account/profile", body, "multipart/form-data; boundary=b") != "block"


def test_prose_in_utf16_passes(model):
    body = json.dumps(PROSE, ensure_ascii=False).encode("utf-16")
    assert decide(model, "POST", "/api/v1/comments", body, "application/json; charset=utf-16") != "block"
