"""Targets: the request parts a rule can select, and the split of one request into scan units.

Input: Features (through engine.fields.request_fields, so "a query argument" or "a JSON leaf" means what
it means for the canonical text). Output: a bounded list of `Unit`s, each one raw string together with the
target names it belongs to (a query value belongs to `query` and `args`; a User-Agent value to `headers`
and `headers:user-agent`).

Bounds: plain tokens (ids, numbers, words, dates: nothing but letters, digits and `_.:@-`) rarely carry an
injection, and then only as a whole value (`whoami`), so all plain tokens of one kind are joined into runs that
keep their values, read value by value by the pattern rules only, wherever the model read them; at most `PER_KIND`
other values of one kind are kept separate and the rest of that kind is joined too (separated by JOIN), in
runs of at most CHUNK characters. A JSON body with ten thousand leaves is then scanned in a handful of passes
instead of ten thousand. A run keeps its values (`Unit.parts`): where the model did not read them, a rule
holds on a run only where it holds on one of its values, at that value's length (rules/engine.py), and its
anchors hold at each value's start and end (rules/plans.joined_pattern). JOIN is neither a space nor a line
break, so no rule reads it as a separator, and no transformation carries a comment across it. A body
over LARGE_BODY that the model did not read whole is also one unit, read by the rules that read documents
(rules/plans.py gives it one pass); it is split into fields too. Where the model read it whole, it is only
split.

Bare arguments: a query or form item with no `=` (or an empty value) whose name is not a plain token is
scanned as a value as well as a name: `?cat%20/etc/passwd` carries its payload where a value would.

Base64: a value (argument, cookie, header) holding a base64 token that decodes to text gets a second unit,
the value with that text in the token's place (the `base64` transform: the model's own decoding),
under the same targets. Every rule then reads `q=PHNjcmlwdD4...` as it reads `q=<script>...`, anchors and
length limits included, without a base64 step in every chain; the raw value stays for rules that look
for base64 itself (a serialized PHP object). A token in fullwidth forms is read through NFKC first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.canonical import QUIET_HEADERS, QUIET_PREFIXES, _b64_text
from engine.features import Features
from engine.fields import REST, REST_CUT, Field, body_text, json_fields, request_fields, rest_item
from rules import xmltext
from rules.transforms import JOIN, base64_decode, nfkc

# target name → what it selects
TARGETS = {
    "method": "the request method",
    "path": "the raw path",
    "uri": "path and query as sent (`/a?b=c`)",
    "query_string": "the raw query string",
    "query": "query argument values",
    "query_names": "query argument names",
    "form": "form and multipart text values",
    "form_names": "form and multipart text field names",
    "json": "JSON leaf values",
    "json_names": "JSON leaf paths (`a.b[].c`)",
    "xml": "XML element text and attribute values (an XML body: SOAP, XML-RPC, XML APIs)",
    "args": "query, form, JSON and XML values",
    "args_names": "query, form and JSON names",
    "uploads": "multipart file contents (printable strings of binary files)",
    "upload_names": "multipart file names",
    "headers": "header values, except quiet headers in their usual shape and Cookie; `headers:<name>`: one header",
    "header_names": "header names",
    "header_list": "all header names, lower case, one a line in order (duplicates, combinations)",
    "cookies": "cookie values",
    "cookie_names": "cookie names",
    "body": "the whole body as text",
    "client": "the client address",
}
NAMED_PREFIX = "headers:"
PER_KIND = 256  # a 50 KB JSON document of prose and records has ~200 such leaves; 3,000 cost ~35 ms
CHUNK = 1 << 15  # values past PER_KIND are joined in runs of this many characters at most (rules/plans.LARGE_VALUE is 2x)
LARGE_BODY = 1 << 16  # above this the body is also one unit, scanned whole once (unless the model read it whole)
LARGE_BODY_TARGETS = {  # content type → what a large body of that type stands for
    "multipart": ("body", "args", "form", "uploads"),
    "form": ("body", "args", "form"),
    "json": ("body", "args", "json"),
    "": ("body",),
}
MAX_BODY_CHARS = 1 << 21  # the gateway caps the body earlier; this only bounds a direct caller
REST_READ = MAX_BODY_CHARS  # a body's fields past the 4,096th: the rules read all of them (engine.fields REST), not
#                            only the 64 KiB the model reads; where that REST is cut the model did not read it whole
# a quiet header (engine.canonical's list) in one of these shapes carries nothing for attack rules; outside
# them it is scanned like any header. Stricter than the canonical text's shape: `*`, `(`, quotes and the
# like are what injections are made of, so they only pass where a header's grammar has them.
_USUAL_DEFAULT = re.compile(r"[A-Za-z0-9 \t\-_.,;:=/+]{0,512}|\?[01]|\"[\w .,;()-]{0,64}\"")  # ?1 "Windows"
_USUAL = {
    "host": re.compile(r"[A-Za-z0-9.-]{1,253}(?::\d{1,5})?|\[[0-9A-Fa-f:.]+\](?::\d{1,5})?"),
    "accept": re.compile(r"[A-Za-z0-9 \t\-_.,;:=/+*]{0,1024}"),
    "if-none-match": re.compile(r"(?:W/)?\"[\w.+/=-]*\"(?:\s*,\s*(?:W/)?\"[\w.+/=-]*\")*|\*"),
    "if-match": re.compile(r"(?:W/)?\"[\w.+/=-]*\"(?:\s*,\s*(?:W/)?\"[\w.+/=-]*\")*|\*"),
    "sec-ch-ua": re.compile(r"(?:\"[\w .;()-]*\";v=\"[\d.]*\"(?:,\s*)?)*"),
}
_USUAL["accept-encoding"] = _USUAL["accept-language"] = _USUAL["accept-charset"] = _USUAL["accept"]


def quiet(name: str, value: str) -> bool:
    """A header the canonical text leaves out, in its usual shape (`name` lower case)."""
    if name not in QUIET_HEADERS and not name.startswith(QUIET_PREFIXES):
        return False
    shape = _USUAL.get(name) or (_USUAL["sec-ch-ua"] if name.startswith("sec-ch-ua-full") else _USUAL_DEFAULT)
    return shape.fullmatch(value) is not None


B64_MAX = 1 << 13  # longer values are not searched for base64 (a large body is scanned as it comes)
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{12}")  # a cheap test before the exact token search
# A whole value that is one short token with base64 padding: 1 to 8 bytes encoded (`JXMlcyVzJXM=` is
# `%s%s%s%s`, `O2lkfA==` is `;id|`). Shorter than the 12 characters a token inside a value needs (a word of
# 12 letters is valid base64 too), read only when padded and when it decodes to text that is not a word.
_B64_SHORT = re.compile(r"([A-Za-z0-9+/_-]{2,11})(?:=|%3[Dd]){1,2}")  # the padding as sent or percent-encoded
_PLAIN = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")
_KEEP = re.compile(r"^\d{8,}$|^0x|localhost|loopback|^(?:Tzo|rO0AB|gASV)")  # plain, yet a rule reads it whole

# field kind → (targets of its value, targets of its name)
_KIND_TARGETS = {
    "query": (("query", "args"), ("query_names", "args_names")),
    "form": (("form", "args"), ("form_names", "args_names")),
    "json": (("json", "args"), ("json_names", "args_names")),
    "cookie": (("cookies",), ("cookie_names",)),
}
XML_VALUES = ("xml", "args")


def valid_target(name: str) -> bool:
    return name in TARGETS or (name.startswith(NAMED_PREFIX) and len(name) > len(NAMED_PREFIX))


@dataclass(slots=True)
class Unit:
    """One value to scan, the targets it belongs to, and its transformed forms (filled by the engine)."""

    targets: tuple[str, ...]
    value: str
    name: str = ""
    cache: dict = field(default_factory=dict)
    parts: tuple[str, ...] = ()  # a joined unit past PER_KIND: the values it joins, each read on its own too
    plain: bool = False  # a run of plain tokens: its values are read one by one by pattern rules only


_FILTERS: dict[tuple[frozenset, tuple[str, ...]], tuple[str, ...]] = {}


def _filtered(wanted: frozenset[str], targets: tuple[str, ...]) -> tuple[str, ...]:
    """`targets` ∩ `wanted`, memoised: the key space is finite (named headers only when a rule names them)."""
    key = (wanted, targets)
    out = _FILTERS.get(key)
    if out is None:
        out = tuple(t for t in targets if t in wanted)
        if len(_FILTERS) < 4096:  # header names are client-chosen: never let them grow the memo unbounded
            _FILTERS[key] = out
    return out


class _Builder:
    def __init__(self, wanted: frozenset[str], runs: bool = True):
        self.wanted = wanted
        self.runs = runs  # values past PER_KIND in runs that keep their values; else one joined unit of one value
        self.units: list[Unit] = []
        self.overflow: dict[tuple[str, ...], list[str]] = {}
        self.plain: dict[tuple[str, ...], list[str]] = {}
        self.counts: dict[tuple[str, ...], int] = {}

    def add(self, targets: tuple[str, ...], value: str, name: str = "", join_plain: bool = False) -> None:
        targets = _filtered(self.wanted, targets)
        if not targets:
            return
        if join_plain and _PLAIN.fullmatch(value) and not _KEEP.search(value):
            self.plain.setdefault(targets, []).append(value)
            return
        n = self.counts.get(targets, 0)
        self.counts[targets] = n + 1
        if n < PER_KIND:
            self.units.append(Unit(targets, value, name))
        else:
            self.overflow.setdefault(targets, []).append(value)

    def finish(self) -> list[Unit]:
        for targets, values in self.plain.items():  # in runs whatever the model read: `^whoami$` holds on one
            self._runs(targets, values, plain=True)
        for targets, values in self.overflow.items():
            if not self.runs:  # the model read every one of them: the rules read them as one value, in one unit
                self.units.append(Unit(targets, JOIN.join(values), "*"))
            else:
                self._runs(targets, values)
        return self.units

    def _runs(self, targets: tuple[str, ...], values: list[str], plain: bool = False) -> None:
        for chunk in _chunks(values):
            parts = tuple(dict.fromkeys(chunk)) if len(chunk) > 1 else ()  # padding repeats itself: read once
            self.units.append(Unit(targets, JOIN.join(chunk), "*", parts=parts, plain=plain))


def _chunks(values: list[str]) -> list[list[str]]:
    """Values past PER_KIND in runs of at most CHUNK characters joined (a value longer than that on its own):
    a run is never a large unit that only document rules read (a single value over LARGE_VALUE still is)."""
    out: list[list[str]] = []
    size = 0
    for v in values:
        if not out or size + len(v) + 1 > CHUNK:
            out.append([])
            size = 0
        out[-1].append(v)
        size += len(v) + 1
    return out


def base64_text(value: str) -> str | None:
    """`value` with its base64 tokens that decode to text replaced by the text, or None when it has none.
    A token written in fullwidth forms (`ＴｚｏｚＭｚｏｉ...`) is read in its plain form first; a value that
    is a single short padded token (`_B64_SHORT`) is read too."""
    if len(value) > B64_MAX:
        return None
    plain = value if value.isascii() else nfkc(value)
    if len(plain) <= 17 and (m := _B64_SHORT.fullmatch(plain)):
        return _b64_text(m.group(1))
    if not _B64_RUN.search(plain):
        return None
    out = base64_decode(plain)
    return None if out == plain else out


def _with_base64(b: _Builder, targets: tuple[str, ...], value: str, name: str, join_plain: bool = False) -> None:
    b.add(targets, value, name, join_plain=join_plain)
    decoded = base64_text(value)
    if decoded is not None:
        b.add(targets, decoded, name + " (base64)")


def _field(b: _Builder, f: Field) -> None:
    if f.kind in _KIND_TARGETS and f.name in (REST, REST_CUT):
        # a body's fields past the MAX_FIELDS-th, one `name=value` item (or a bare value) a line: each is a value
        # here (past PER_KIND, a part of a joined unit), whole and, where it has a name, without it
        values, names = _KIND_TARGETS[f.kind]
        for item in f.value.split("\n"):
            _with_base64(b, values, item, f.name, join_plain=True)
            name, value = rest_item(item)
            if name:
                _with_base64(b, values, value, name, join_plain=True)
                b.add(names, name, name, join_plain=True)
        return
    if f.kind in _KIND_TARGETS:
        values, names = _KIND_TARGETS[f.kind]
        _with_base64(b, values, f.value, f.name, join_plain=True)
        if f.name:
            b.add(names, f.name, f.name, join_plain=True)
            if not f.value and f.kind in ("query", "form") and not _PLAIN.fullmatch(f.name):
                # `?cat%20/etc/passwd`, `?/c+dir`: an argument with no `=` that is not a plain flag is data
                # (the application reads it from the raw query string), so value rules read it too
                _with_base64(b, values, f.name, f.name)
    elif f.kind == "header":
        # `headers` skips quiet headers in their usual shape (Host, Accept, X-Forwarded-For, ...) and the raw
        # Cookie header (its values are `cookies`): both are noise to attack rules. Named targets see all.
        broad = f.name != "cookie" and not quiet(f.name, f.value)
        if broad:
            _with_base64(b, ("headers", NAMED_PREFIX + f.name), f.value, f.name)
        else:
            b.add((NAMED_PREFIX + f.name,), f.value, f.name)
        b.add(("header_names",), f.name, f.name)
    elif f.kind == "upload":
        field_name, _, rest = f.name.partition(";")
        filename = rest.rpartition(";")[0]
        b.add(("uploads",), f.value, f.name)
        if filename:
            b.add(("upload_names",), filename, field_name)
        if field_name:
            b.add(("form_names", "args_names"), field_name, field_name)
    # method, path: added by units(); body: the whole body is one unit there


def _large_body(b: _Builder, features: Features) -> None:
    text = body_text(features, MAX_BODY_CHARS)
    ctype = features.header("content-type").lower()
    kind = next((k for k in ("multipart", "form", "json") if k in ctype), "")
    b.add(LARGE_BODY_TARGETS[kind], text, "*")


def _one_json_document(content_type: str) -> bool:
    """`application/json`, `text/json` or `*/*+json`: one document (not NDJSON or JSON lines, whose many
    documents never parse as one)."""
    main = content_type.split(";", 1)[0].strip().lower()
    return main in ("application/json", "text/json") or main.endswith("+json")


def units(features: Features, wanted: frozenset[str], split_large: bool = False) -> list[Unit]:
    """The request as scan units, restricted to the targets some rule selects (`wanted`). A body over LARGE_BODY
    is one unit for the rules that read documents, and split into fields too, and the values past PER_KIND of a
    kind come in runs that keep their values. `split_large` (the model read all of the request: RuleEngine.scan's
    read_whole): a large body is only split, and those values are one joined unit of one value, as the model
    read them. A compressed body is read inflated (Features.inspected)."""
    features = features.inspected
    b = _Builder(wanted, runs=not split_large)
    b.add(("method",), features.method)
    b.add(("path",), features.path)
    if features.query:
        b.add(("query_string",), features.query)
    b.add(("uri",), features.path + ("?" + features.query if features.query else ""))
    if features.client:
        b.add(("client",), features.client)
    if features.headers:
        b.add(("header_list",), "".join(k.lower() + "\n" for k, _ in features.headers))
    whole = len(features.body) > LARGE_BODY and not split_large
    if whole:
        # the model read only part of this body, or none of it: every rule that reads documents reads all of it
        # as one unit, and its fields are read as in a smaller body, so a short injected value meets the rules
        # bounded to short values wherever it sits
        _large_body(b, features)
    texts, body_targets = [], ("body",)
    ctype = features.header("content-type").split(";", 1)[0].strip().lower()
    for f in request_fields(features, REST_READ):
        if f.kind == "body":
            texts.append(f.value)  # unparsed text, or the printable strings of a binary body (read both ways: two)
            if f.name != "binary" and _one_json_document(ctype):
                # declared JSON that does not parse ({"user": {"$gt": undefined}}): a lenient parser may still
                # read it, so argument rules read it whole, as they read a large body
                body_targets = LARGE_BODY_TARGETS["json"]
            elif f.name != "binary" and ctype and "json" not in ctype and f.value.lstrip()[:1] in ("{", "[") and (leaves := json_fields(f.value, REST_READ)):
                # JSON under another Content-Type (text/plain): many APIs parse the body whatever it declares (a JSON
                # type, or none, body_fields has tried already: what is left did not parse, NDJSON for one)
                for leaf in leaves:
                    _field(b, leaf)
            if f.name != "binary" and xmltext.is_xml(ctype, f.value):
                # an XML API's parameters are its element text and attributes: argument rules read them as they
                # read a JSON body's leaves (the whole body stays one unit for the rules that read documents)
                for name, value in xmltext.values(f.value):
                    _with_base64(b, XML_VALUES, value, name, join_plain=True)
        elif f.kind not in ("method", "path"):
            _field(b, f)
    if features.body and not whole and not wanted.isdisjoint(body_targets):
        b.add(body_targets, "\n".join(t for t in texts if t) or body_text(features, MAX_BODY_CHARS))
    return b.finish()
