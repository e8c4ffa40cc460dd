"""rules/xmltext.py: the values of an XML body, as a table of document → (name, value) pairs."""

import pytest

from rules.xmltext import MAX_VALUES, REST, is_xml, values

SOAP = ('<?xml version="1.0"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">'
        '<soap:Body><GetUser><id>42</id><note lang="en">hello</note></GetUser></soap:Body></soap:Envelope>')  # fmt: skip


@pytest.mark.parametrize(
    "doc,expected",
    [
        (SOAP, [("id", "42"), ("note@lang", "en"), ("note", "hello")]),
        # attributes quoted either way or not at all; namespace declarations are not values
        ("<a x=\"1\" y='2' z=3 xmlns='urn:a' xmlns:b=\"urn:b\"/>", [("a@x", "1"), ("a@y", "2"), ("a@z", "3")]),
        # CDATA unwrapped; entities left for the rules' html transform
        ("<q><![CDATA[<script>alert(1)</script>]]></q>", [("q", "<script>alert(1)</script>")]),
        ("<q>&lt;b&gt; &amp; x</q>", [("q", "&lt;b&gt; &amp; x")]),
        # comments, processing instructions and the DOCTYPE with its internal subset are not values
        ('<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><foo>&xxe;</foo>', [("foo", "&xxe;")]),
        ("<a><!-- note --><?pi data?>v</a>", [("a", "v")]),
        # text after a closing tag is named by the innermost element opened before it
        ("<p>one <b>two</b> three</p>", [("p", "one"), ("b", "two"), ("b", "three")]),
        # broken documents: a `<` no `>` closes is text; an unclosed comment or quote ends the values
        ("a < b and <c>d</c>", [("", "a < b and"), ("c", "d")]),
        ("<a>unclosed <!-- comment", [("a", "unclosed")]),
        ('<a b="x', [("", '<a b="x')]),
        ("", []),
        ("   ", []),
    ],
)
def test_values(doc, expected):
    assert list(values(doc)) == expected


def test_past_max_values_the_rest_is_one_value():
    doc = "<r>" + "<i>v</i>" * (MAX_VALUES + 10) + "<q>1' or 1=1--</q></r>"
    got = list(values(doc))
    assert len(got) == MAX_VALUES + 1
    name, rest = got[-1]
    assert name == REST and rest.startswith("<i>v</i>") and rest.endswith("<q>1' or 1=1--</q></r>")


def test_the_rest_keeps_the_text_after_the_last_value_read():
    doc = "<r>" + '<i a="v"/>' * MAX_VALUES + "1' or 1=1--<q/></r>"
    name, rest = list(values(doc))[-1]
    assert name == REST and rest.startswith("1' or 1=1--")


@pytest.mark.parametrize(
    "ctype,text,xml",
    [
        ("text/xml; charset=utf-8", "", True),
        ("application/xml", "", True),
        ("application/soap+xml; action=x", "", True),
        ("image/svg+xml", "", True),
        ("", "  <?xml version='1.0'?><a/>", True),
        ("text/plain", "<soap:Envelope>", True),
        ("text/plain", "<p>a post</p>", False),
        ("text/html", "<?xml version='1.0'?>", False),
        ("application/xml-dtd", "", False),
        ("application/json", "<a/>", False),
    ],
)
def test_is_xml(ctype, text, xml):
    assert is_xml(ctype, text) is xml
