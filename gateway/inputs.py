"""The decision API's input: a JSON body → the Features to decide, checked field by field.

    {"input": "text", "max_tokens": 128}                  one decision
    {"input": ["a", "b", {...}]}                          a batch, answered in order
    {"input": {"method", "path", "query", "headers", "body"}}   a structured HTTP request

Wrong JSON or wrong types are ClientError (400); well-typed values that are not a valid input (an empty or
oversized batch, max_tokens <= 0, an unknown field) are Unprocessable (422). A string becomes
Features.from_text(text), as the engine defines it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.features import Features
from gateway.errors import ClientError, Unprocessable

FIELDS = ("input", "max_tokens")
REQUEST_FIELDS = ("method", "path", "query", "headers", "body")


@dataclass(frozen=True)
class DecisionRequest:
    items: tuple[Features, ...]
    batch: bool  # the input was a list: answer {"decisions": [...]}
    max_tokens: int | None  # accepted and checked; see admin.decision for how it is applied


def decision_request(raw: bytes, max_batch: int) -> DecisionRequest:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ClientError(f"body is not valid JSON: {err}") from None
    if not isinstance(doc, dict):
        raise ClientError(f"body must be a JSON object, got {_kind(doc)}")
    for name in doc:
        if name not in FIELDS:
            raise Unprocessable(f"unknown field {name!r} (expected: {', '.join(FIELDS)})")
    if "input" not in doc:
        raise Unprocessable("missing field 'input'")
    max_tokens = doc.get("max_tokens")
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise ClientError(f"max_tokens must be an integer, got {_kind(max_tokens)}")
        if max_tokens <= 0:
            raise Unprocessable(f"max_tokens must be > 0, got {max_tokens}")
    value = doc["input"]
    if isinstance(value, list):
        if not value:
            raise Unprocessable("input is an empty list")
        if len(value) > max_batch:
            raise Unprocessable(f"input has {len(value)} items, more than the batch limit of {max_batch}")
        items = tuple(one(v, f"input[{i}]") for i, v in enumerate(value))
        return DecisionRequest(items, batch=True, max_tokens=max_tokens)
    return DecisionRequest((one(value, "input"),), batch=False, max_tokens=max_tokens)


def one(value: Any, where: str) -> Features:
    if isinstance(value, str):
        return Features.from_text(value)
    if isinstance(value, dict):
        return structured(value, where)
    raise ClientError(f"{where} must be a string or a request object, got {_kind(value)}")


def structured(obj: dict, where: str) -> Features:
    for name in obj:
        if name not in REQUEST_FIELDS:
            raise Unprocessable(f"{where}: unknown field {name!r} (expected: {', '.join(REQUEST_FIELDS)})")
    for name in ("method", "path", "query", "body"):
        if name in obj and not isinstance(obj[name], str):
            raise ClientError(f"{where}.{name} must be a string, got {_kind(obj[name])}")
    path = obj.get("path", "/")
    if not path.startswith("/"):
        raise Unprocessable(f"{where}.path must start with /, got {path!r}")
    return Features.build(
        method=obj.get("method", "GET"),
        path=path,
        query=obj.get("query", ""),
        headers=_headers(obj.get("headers"), f"{where}.headers"),
        body=obj.get("body", ""),
    )


def _headers(value: Any, where: str) -> list[tuple[str, str]]:
    """An object {"name": "value"} or, to keep order and repeats, a list of [name, value] pairs."""
    if value is None:
        return []
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
        pairs = [tuple(p) for p in value]
    else:
        raise ClientError(f"{where} must be an object or a list of [name, value] pairs")
    for name, val in pairs:
        if not isinstance(name, str) or not isinstance(val, str):
            raise ClientError(f"{where}: names and values must be strings")
    return pairs


def _kind(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "object"}.get(
        type(value), "null" if value is None else type(value).__name__
    )
