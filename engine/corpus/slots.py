"""Slots: the places in a request that hold a user-supplied value, and how to put a value there.

A scene (engine.corpus.scenes_*) builds an ordinary request and records its slots: a query argument, a
form field, a JSON leaf, a multipart text part or file, a cookie, a header, a path segment. The builder
then puts a focus value into one slot: a benign text into a comment field, or an attack payload into the
same field of the same kind of request. `put` encodes the value the way that position needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from engine.corpus import encode, params
from engine.corpus.draft import Draft, Part
from engine.corpus.rand import Rng

WHERE = ("query", "form", "json", "multipart", "file", "cookie", "header", "path", "raw")


@dataclass(frozen=True)
class Slot:
    where: str  # one of WHERE
    key: Any  # query/form/multipart/cookie/header: name; json: tuple path; path: segment index; file: part index
    kind: str = "misc"  # parameter kind (engine.corpus.params) of the value that belongs here


def _set_pair(pairs: list, name: str, value: str, rng: Rng) -> None:
    for i, (k, _) in enumerate(pairs):
        if k == name:
            pairs[i] = (k, value)
            return
    pairs.insert(rng.randrange(len(pairs) + 1), (name, value))


def _json_set(obj: Any, path: tuple, value: str) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def put(rng: Rng, d: Draft, slot: Slot, value: str, splice: bool = False) -> None:
    """Put `value` into the draft at `slot`. With `splice`, a text slot keeps its text and the value is
    inserted in its middle (a payload inside a long benign comment)."""
    if slot.where == "raw":  # a text body without fields: the value goes into its middle
        d.body.data = _spliced(rng, d.body.data, value)
        return
    if splice:
        value = _spliced(rng, current(d, slot), value)
    if slot.where == "query":
        _set_pair(d.query, encode.query_value(rng, slot.key, "browser"), encode.query_value(rng, value), rng)
    elif slot.where == "form":
        assert d.body is not None and d.body.kind == "form"
        _set_pair(d.body.pairs, encode.query_value(rng, slot.key, "browser"), encode.query_value(rng, value, "browser" if rng.chance(0.7) else None), rng)
    elif slot.where == "json":
        _json_set(d.body.obj, slot.key, value)
    elif slot.where in ("multipart", "file"):
        parts = d.body.parts
        idx = next((i for i, p in enumerate(parts) if p.name == slot.key), None) if slot.where == "multipart" else slot.key
        if idx is None:
            parts.insert(rng.randrange(len(parts) + 1), Part(slot.key, value))
        else:
            parts[idx].content = value
    elif slot.where == "cookie":
        _set_pair(d.cookies, slot.key, encode.cookie_value(value), rng)
    elif slot.where == "header":
        d.set_header(slot.key, encode.header_value(value))
    elif slot.where == "path":
        segs = d.path.split("/")
        i = slot.key if 0 < slot.key < len(segs) else len(segs) - 1
        segs[i] = encode.path_segment(rng, value)
        d.path = "/".join(segs)


def current(d: Draft, slot: Slot) -> str:
    """The value a slot holds now (raw for JSON and multipart, decoded for a page save's form field; "" when
    unknown)."""
    try:
        if slot.where == "json":
            obj = d.body.obj
            for key in slot.key:
                obj = obj[key]
            return obj if isinstance(obj, str) else ""
        if slot.where == "multipart":
            for p in d.body.parts:
                if p.name == slot.key and isinstance(p.content, str):
                    return p.content
        if slot.where == "form" and d.splice_form:
            names = {slot.key, encode.browser(slot.key)}
            return next((unquote_plus(v or "") for k, v in d.body.pairs if k in names), "")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    return ""


def _spliced(rng: Rng, text: str, value: str) -> str:
    if not text:
        return value
    cut = text.rfind(" ", 0, max(1, int(len(text) * rng.uniform(0.2, 0.8))))
    cut = cut if cut > 0 else len(text) // 2
    return f"{text[:cut]} {value} {text[cut:].lstrip()}"


def add(rng: Rng, d: Draft, where: str, kind: str) -> Slot:
    """A new slot of parameter kind `kind` at `where`, with an ordinary value in it for now."""
    name = params.name_for(rng, kind)
    if where == "form" and (d.body is None or d.body.kind != "form"):
        where = "query"
    if where == "json":
        if d.body is None or d.body.kind != "json" or not isinstance(d.body.obj, dict):
            where = "query"
        else:
            target, path = _json_parent(rng, d.body.obj)
            target[name] = params.value(rng, kind)
            return Slot("json", path + (name,), kind)
    if where == "multipart" and (d.body is None or d.body.kind != "multipart"):
        where = "query"
    slot = Slot(where, name, kind)
    if where in ("query", "form", "multipart", "cookie"):
        put(rng, d, slot, params.value(rng, kind))
    elif where == "header":
        slot = Slot("header", rng.pick(HEADER_NAMES), kind)
    return slot


HEADER_NAMES = ["Referer", "X-Api-Version", "X-Client-Id", "X-User", "X-Search", "X-Tenant",
                "X-Device-Id", "X-Locale", "X-Session", "X-Original-Url", "X-Custom-Header", "True-Client-IP"]  # fmt: skip


def _json_parent(rng: Rng, obj: dict) -> tuple[dict, tuple]:
    """A dict inside obj (possibly obj itself) to add a key to, and its path: payloads sit at some depth."""
    path: tuple = ()
    cur = obj
    for _ in range(rng.randrange(0, 4)):
        subs = [(k, v) for k, v in cur.items() if isinstance(v, dict)]
        lists = [(k, v) for k, v in cur.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
        if subs and (not lists or rng.chance(0.6)):
            k, v = rng.pick(subs)
            cur, path = v, path + (k,)
        elif lists:
            k, v = rng.pick(lists)
            i = len(v) // 2 if rng.chance(0.5) else rng.randrange(len(v))
            cur, path = v[i], path + (k, i)
        else:
            break
    return cur, path


def json_leaves(obj: Any, path: tuple = ()) -> list[tuple]:
    """Paths of the string leaves of a JSON value."""
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in json_leaves(v, path + (k,))]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in json_leaves(v, path + (i,))]
    return [path] if isinstance(obj, str) else []
