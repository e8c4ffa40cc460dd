"""Envoy's config API, offline: a YAML document read into Envoy's own protobuf messages (xds-protos), and
the common rules of the `validate` annotations those messages carry checked on it.

`bootstrap(doc)` parses with protobuf's json_format, which rejects unknown fields, wrong types and unknown
enum names, and resolves every `typed_config` whose type is imported here. `problems(message)` then walks
what is set and reports, by path: a required message, oneof or duration left out, a string under its
min_len, a number not above its `gt` (or below its `gte`), a repeated field under min_items, and any field
marked deprecated. protoc-gen-validate's own Python checker would cover every rule, but it does not run on
protobuf 7, so this covers the rules a hand-written config gets wrong; Envoy itself checks the rest.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

# Imported for their descriptors: the typed_config types the deploy file uses.
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.extensions.filters.http.ext_authz.v3 import ext_authz_pb2  # noqa: F401
from envoy.extensions.filters.http.router.v3 import router_pb2  # noqa: F401
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2  # noqa: F401
from validate import validate_pb2

NUMBERS = ("uint32", "uint64", "int32", "int64", "double", "float")


def bootstrap(doc: dict[str, Any]) -> Any:
    return json_format.ParseDict(doc, bootstrap_pb2.Bootstrap())


def problems(message: Message, path: str = "") -> list[str]:
    out: list[str] = []
    descriptor = message.DESCRIPTOR
    for oneof in descriptor.oneofs:
        if oneof.GetOptions().Extensions[validate_pb2.required] and message.WhichOneof(oneof.name) is None:
            out.append(f"{path or descriptor.name}: one of {oneof.name} is required")
    for field in descriptor.fields:
        where = f"{path}.{field.name}" if path else field.name
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        value = getattr(message, field.name)
        is_set = len(value) > 0 if repeated else _is_set(message, field)
        if is_set and field.GetOptions().deprecated:
            out.append(f"{where}: deprecated")
        if is_set or field.containing_oneof is None:  # a oneof's other members are not there to check
            out += _rules(field, value, is_set, repeated, where)
        if field.message_type is None or not is_set:
            continue
        items = list(value.values() if field.message_type.GetOptions().map_entry else value) if repeated else [value]
        for i, item in enumerate(items):
            if isinstance(item, Message):
                out += problems(_unpacked(item), f"{where}[{i}]" if repeated else where)
    return out


def _is_set(message: Message, field: Any) -> bool:
    if field.message_type is not None or field.containing_oneof is not None or field.has_presence:
        return message.HasField(field.name)
    return getattr(message, field.name) != field.default_value


def _unpacked(item: Message) -> Message:
    """An Any's content, as its own message type (every type this file uses is imported above)."""
    if item.DESCRIPTOR.full_name != "google.protobuf.Any":
        return item
    from google.protobuf import symbol_database

    cls = symbol_database.Default().GetSymbol(item.type_url.rpartition("/")[2])
    inner = cls()
    item.Unpack(inner)
    return inner


def _rules(field: Any, value: Any, is_set: bool, repeated: bool, where: str) -> list[str]:
    rules = field.GetOptions().Extensions[validate_pb2.rules]
    kind = rules.WhichOneof("type")
    if kind is None:
        return []
    r = getattr(rules, kind)
    if field.message_type is not None and kind not in ("message", "repeated", "duration", "any", "timestamp", "map"):
        if not is_set:  # a wrapper (UInt32Value, ...): its rules apply to what it wraps, when it is there
            return []
        value = value.value
    if kind == "message":
        return [f"{where}: required"] if r.required and not is_set else []
    if kind == "repeated":
        return [f"{where}: at least {r.min_items} items"] if r.min_items and len(value) < r.min_items else []
    if kind == "duration":
        if r.required and not is_set:
            return [f"{where}: required"]
        if is_set and r.HasField("gt") and value.ToNanoseconds() <= r.gt.ToNanoseconds():
            return [f"{where}: must be > {r.gt.ToJsonString()}"]
        return []
    if kind == "string" and not repeated:
        if r.min_len and len(value) < r.min_len:
            return [f"{where}: at least {r.min_len} characters"]
        if r.min_bytes and len(value.encode()) < r.min_bytes:
            return [f"{where}: at least {r.min_bytes} bytes"]
        return []
    if kind in NUMBERS and not repeated:
        if r.HasField("gt") and not value > r.gt:
            return [f"{where}: must be > {r.gt}"]
        if r.HasField("gte") and not value >= r.gte:
            return [f"{where}: must be >= {r.gte}"]
    return []
