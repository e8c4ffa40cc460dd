"""engine/corpus/xmlvalues.py and the `xml` position of engine/corpus/attacks.py (`--xml-values`): a payload lands in
one value of an XML body, reads back as that value, and only when the corpus is built with the flag."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from engine.corpus import attacks, xmlvalues
from engine.corpus.draft import Body, Draft
from engine.corpus.pools import Pools
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx
from engine.features import Features
from rules.engine import RuleEngine

SOAP = ('<?xml version="1.0"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>'
        '<Get xmlns="http://example.com/ws/"><id>7</id><name>Ann</name><comment>Leave it at the door please, thanks</comment>'
        '</Get></soap:Body></soap:Envelope>')  # fmt: skip
RPC = '<methodCall><methodName>wp.getPosts</methodName><params><param><value><string>x</string></value></param></params></methodCall>'
ORDER = '<order id="41"><lines><line sku="AB12" qty="2"><name>Lamp</name></line></lines><note></note></order>'
PAYLOADS = ["1' OR '1'='1", '<script>alert("x")</script>', "${jndi:ldap://203.0.113.9/a}", "a & b ]]> c", "{{7*7}}", "*)(uid=*))(|(uid=*"]
TEXTS = {"prose": [{"text": "Hello there, select one of the options.", "kind": "prose"}]}


def draft(xml: str) -> Draft:
    return Draft(method="POST", path="/ws", headers=[("Host", "h")], body=Body("raw", data=xml, ctype="text/xml"))


def test_spans_are_leaf_texts_and_attributes_but_not_namespaces_or_the_method_name():
    assert [SOAP[a:b] for a, b in xmlvalues.element_spans(SOAP)] == ["7", "Ann", "Leave it at the door please, thanks"]
    assert xmlvalues.attribute_spans(SOAP) == []  # xmlns and xmlns:soap declare, they carry no value
    assert [RPC[a:b] for a, b in xmlvalues.element_spans(RPC)] == ["x"]
    assert [ORDER[a:b] for a, b in xmlvalues.attribute_spans(ORDER)] == ["41", "AB12", "2"]
    assert [ORDER[a:b] for a, b in xmlvalues.element_spans(ORDER)] == ["Lamp", ""]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_an_escaped_cdata_or_attribute_payload_parses_back_as_the_value(payload):
    hows = Counter()
    for i in range(120):
        d = draft(ORDER if i % 2 else SOAP)
        how = xmlvalues.put(Rng("xml", payload, i), d, payload)
        hows[how.split("/")[0] + ("/" + how.split("/")[1] if how.startswith("text") else "")] += 1
        if "raw" in how:
            assert payload in d.body.data  # as a hand-written request sends it
            continue
        root = ET.fromstring(d.body.data)
        values = [el.text or "" for el in root.iter()] + [v for el in root.iter() for v in el.attrib.values()]
        if "inside" in how:
            assert any(payload in v and v != payload for v in values), d.body.data
        else:
            assert payload in values, d.body.data
    assert hows["attr"] and hows["text/escaped"] and hows["text/raw"]
    assert hows["text/cdata"] or "]]>" in payload  # a payload that ends a CDATA section is escaped instead


def test_a_cdata_end_in_the_payload_is_never_put_in_cdata():
    for i in range(200):
        d = draft(SOAP)
        how = xmlvalues.put(Rng("cdata", i), d, "x]]><y/>")
        assert "cdata" not in how


def test_the_xml_position_only_with_xml_values():
    """Without the flag the draws are the documented corpus's: no payload goes to an XML value. With it, some do,
    in every xml_post variant the split may use, and the rules read them there (rules/xmltext.py)."""
    rules = RuleEngine.load()
    made = {flag: Counter() for flag in (False, True)}
    for flag in (False, True):
        pools = Pools("train", texts=TEXTS, xml_values=flag)
        for i in range(600):
            d, how = attacks.embed_param(Ctx(Rng("pos", i), pools, "train"), "1' UNION SELECT password FROM users--", "sqli")
            made[flag][how.split("/")[0]] += 1
            if how.startswith("xml/") and flag:
                method, path, query, headers, body = d.render()
                f = Features.build(method=method, path=path, query=query, headers=headers, body=body)
                assert rules.evaluate(f).blocked, body
                made[flag]["scene:" + d.scene] += 1
    assert made[False]["xml"] == 0
    assert 0.03 < made[True]["xml"] / 600 < 0.12
    assert {k for k in made[True] if k.startswith("scene:")} == {f"scene:xml_post/{v}" for v in ("soap", "xmlrpc", "order_xml", "atom_entry")
                                                               if v in attacks.all_scenes()["xml_post"].usable("train")}  # fmt: skip


def test_crlf_never_goes_to_an_xml_value():
    pools = Pools("train", texts=TEXTS, xml_values=True)
    hows = {attacks.embed_param(Ctx(Rng("crlf", i), pools, "train"), "%0d%0aSet-Cookie:a=b", "crlf")[1].split("/")[0] for i in range(300)}
    assert "xml" not in hows
