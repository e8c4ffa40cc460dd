"""A payload in an XML body's values: the text of one element, or one attribute, of a SOAP call, an XML-RPC
call, an XML order or an Atom entry (the `xml_post` scene), written the way a client writes it there.

Built with `python -m engine.corpus --xml-values` (Pools.xml_values): the parameter payloads of every class but
CRLF then go to an `xml` position too. Without it, no payload sits in XML element text, so a model has never seen
a SOAP parameter carry an SQL injection (the rules read XML values since rules/xmltext.py; the model learns it
only from a corpus that has it).

    element text   escaped (&amp; &lt; &gt;), in a CDATA section, or as sent (a hand-written request
                   does not always escape); sometimes inside the element's benign text
    attribute      escaped, quotes included
"""

from __future__ import annotations

import re

from engine.corpus.draft import Draft
from engine.corpus.rand import Rng

# a leaf element: its text holds no markup (the scene's values are escaped)
_LEAF = re.compile(r"<([A-Za-z][\w:.-]*)(?:\s[^<>]*)?>([^<]*)</\1>")
_START = re.compile(r"<[A-Za-z][\w:.-]*(\s[^<>]*?)/?>")
_ATTR = re.compile(r'\s([A-Za-z][\w:.-]*)="([^"<]*)"')
_KEEP = ("methodName",)  # names the call; the server dispatches on it and never reads it as data
XMLNS = re.compile(r"xmlns(?::|$)")


def escape(value: str, quote: bool = False) -> str:
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return value.replace('"', "&quot;") if quote else value


def text_form(rng: Rng, payload: str) -> tuple[str, str]:
    """The payload as element text, and how it was written."""
    r = rng.random()
    if r < 0.55:
        return escape(payload), "escaped"
    if r < 0.8 and "]]>" not in payload:
        return f"<![CDATA[{payload}]]>", "cdata"
    return payload, "raw"


def element_spans(xml: str) -> list[tuple[int, int]]:
    """Where the text of each leaf element lies (empty elements included)."""
    return [m.span(2) for m in _LEAF.finditer(xml) if m.group(1) not in _KEEP]


def attribute_spans(xml: str) -> list[tuple[int, int]]:
    """Where each attribute value lies, namespace declarations left out."""
    out = []
    for tag in _START.finditer(xml):  # a start tag with attributes (a bare one does not match)
        base = tag.start(1)
        for a in _ATTR.finditer(tag.group(1)):
            if not XMLNS.match(a.group(1)):
                out.append((base + a.start(2), base + a.end(2)))
    return out


def put(rng: Rng, d: Draft, payload: str) -> str:
    """Put `payload` into one value of the draft's XML body; returns where ("text/escaped", "attr", ...)."""
    xml = d.body.data
    assert isinstance(xml, str), "the xml_post scene writes text"
    texts, attrs = element_spans(xml), attribute_spans(xml)
    if attrs and (not texts or rng.chance(0.2)):
        a, b = rng.pick(attrs)
        d.body.data = xml[:a] + escape(payload, quote=True) + xml[b:]
        return "attr"
    a, b = rng.pick(texts)
    value, how = text_form(rng, payload)
    old = xml[a:b]
    cut = old.rfind(" ", 0, len(old) // 2 + 1)
    if len(old) > 20 and cut > 0 and rng.chance(0.35):  # inside the element's benign text
        value, how = f"{old[:cut]} {value} {old[cut + 1:]}", how + "/inside"
    d.body.data = xml[:a] + value + xml[b:]
    return f"text/{how}"
