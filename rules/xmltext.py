"""The values of an XML body, for the rules that read arguments: SOAP, XML-RPC and XML APIs carry their
parameters in element text and attribute values, where a JSON API has leaves.

Input: the body as text. Output: (name, value) pairs, at most MAX_VALUES and then the rest of the document as one: each run of element text (named by the innermost
element opened before it) and each attribute value (`element@attribute`), CDATA unwrapped, entities left for
the rules' own `html` transform. Namespace declarations, comments, processing instructions and the DOCTYPE
(the XXE rules read the whole body) are not values.

A scanner, not a parser: it never fetches or expands anything and accepts broken documents (an attack is
seldom well formed). It is linear in the body's length: every search moves forward from where the last one
ended (a `<` that no `>` closes before the next `<` is text), and attributes are read with RE2.
"""

from __future__ import annotations

import re
from typing import Iterator

import re2

from engine.fields import REST  # the name the engine gives what is past its field limit: the same idea here

MAX_VALUES = 8192  # then the rest of the document is one value: reading 400,000 attributes costs seconds
_NAME = re.compile(r"[^\s/>]+")
_ATTR = re2.compile(r"""([^\s=/>"']+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+))""")
_XML_OPENING = re.compile(r"\s*<(?:\?xml|soap)", re.IGNORECASE)  # matched in place: no copy of a large body
_XML_TYPE = re.compile(r"^(?:application|text)/(?:[\w.+-]+\+)?xml$|\+xml$")  # text/xml, application/soap+xml, image/svg+xml


def is_xml(content_type: str, text: str) -> bool:
    """A body declared XML (`*/xml`, `*/*+xml`), or an undeclared or `text/plain` one that opens as an XML
    document does (servers that parse whatever arrives read it as one)."""
    main = content_type.split(";", 1)[0].strip().lower()
    if _XML_TYPE.search(main):
        return True
    return main in ("", "text/plain") and _XML_OPENING.match(text) is not None


def values(text: str) -> Iterator[tuple[str, str]]:
    n = len(text)
    i = run = 0  # where to look next; where the current run of text began
    gt = -1  # the first `>` after the last tag's `<` (n: none), kept while it still lies ahead
    element = ""
    count = 0
    while (lt := text.find("<", i)) >= 0:
        if count >= MAX_VALUES:  # the rest from the text not yet read: text after the last tag is part of it
            element = REST
            break
        if text.startswith(("<!--", "<![CDATA[", "<!", "<?"), lt):
            if chunk := text[run:lt].strip():
                count += 1
                yield element, chunk
            i = _construct(text, lt)
            if text.startswith("<![CDATA[", lt) and (chunk := text[lt + 9 : max(lt + 9, i - 3)].strip()):
                count += 1
                yield element, chunk
            run = i
            continue
        if gt <= lt:
            gt = _find(text, ">", lt + 1)
        if gt >= n or 0 <= text.find("<", lt + 1, gt):  # no `>` before the next `<`: this one is text
            i = lt + 1
            continue
        if chunk := text[run:lt].strip():
            count += 1
            yield element, chunk
        tag = text[lt + 1 : gt]
        if not tag.startswith("/") and (m := _NAME.match(tag)):
            element = m.group(0)
            for a in _ATTR.finditer(tag, m.end()) if "=" in tag else ():
                attr, value = a.group(1), a.group(2) or a.group(3) or a.group(4) or ""
                if value.strip() and attr != "xmlns" and not attr.startswith("xmlns:"):
                    count += 1
                    yield f"{element}@{attr}", value
        i = run = gt + 1
    if chunk := text[run:].strip():
        yield element, chunk


def _construct(text: str, lt: int) -> int:
    """The index just past the comment, CDATA section, processing instruction or declaration at `lt`."""
    if text.startswith("<!--", lt):
        return _find(text, "-->", lt + 4) + 3
    if text.startswith("<![CDATA[", lt):
        return _find(text, "]]>", lt + 9) + 3
    if text.startswith("<?", lt):
        return _find(text, "?>", lt + 2) + 2
    gt = _find(text, ">", lt + 2)  # <!DOCTYPE ...>, and its internal subset, `[...]`, holds `>`s of its own
    bracket = text.find("[", lt + 2, gt)
    if bracket >= 0:
        gt = _find(text, ">", _find(text, "]", bracket + 1))
    return gt + 1


def _find(text: str, token: str, start: int) -> int:
    """The index of the next `token` at or after `start`, or the text's length."""
    at = text.find(token, start)
    return len(text) if at < 0 else at
