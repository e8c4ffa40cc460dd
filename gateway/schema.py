"""Raw YAML values → the config dataclasses, with every error naming its full key.

`build(cls, raw, key)` walks a dataclass's fields by their type hints: it rejects unknown keys, checks each
value's type (an int is not a bool, a float may be written as an int, `X | None` takes null), recurses into
nested dataclasses and tuples of them, and turns the `Bad` a dataclass's own checks raise into a
ConfigError prefixed with the key path: `routes[1].actions.block.min_confidence: must be between 0 and 1`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Mapping

from gateway.errors import ConfigError


class Bad(Exception):
    """A dataclass's check failed on one of its fields; build() adds the path in front."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key
        self.message = message


def digits(text: str) -> bool:
    """Only the ASCII digits 0-9, at least one: what a port, a worker count or an HTTP delta-seconds may hold.
    (str.isdigit() alone also accepts "²", which int() refuses, and "٣", which int() reads as 3.)"""
    return text.isascii() and text.isdigit()


def check(ok: bool, key: str, message: str, value: Any) -> None:
    if not ok:
        raise Bad(key, f"{message}, got {value!r}")


def join(prefix: str, name: str | int) -> str:
    if isinstance(name, int):
        return f"{prefix}[{name}]"
    return f"{prefix}.{name}" if prefix else name


def build(cls: type, raw: Any, key: str) -> Any:
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{key or 'config'}: must be a mapping of keys, got {_kind(raw)}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    for name in raw:
        if name not in names:
            raise ConfigError(f"{join(key, str(name))}: unknown key (expected one of: {', '.join(names)})")
    kwargs = {name: convert(hints[name], value, join(key, name)) for name, value in raw.items()}
    try:
        return cls(**kwargs)
    except Bad as bad:
        raise ConfigError(f"{join(key, bad.key) if bad.key else key}: {bad.message}") from None
    except TypeError as err:  # a required field left out
        raise ConfigError(f"{key or 'config'}: {err}") from None


def convert(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return convert(args[0], value, key)
    if origin is tuple:
        item = typing.get_args(tp)[0]
        if not isinstance(value, list):
            raise ConfigError(f"{key}: must be a list, got {_kind(value)}")
        return tuple(convert(item, v, join(key, i)) for i, v in enumerate(value))
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: must be a mapping of keys, got {_kind(value)}")
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, str) and hasattr(tp, "parse"):
            try:
                return tp.parse(value)
            except Bad as bad:
                raise ConfigError(f"{key}: {bad.message}") from None
        return build(tp, value, key)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: must be true or false, got {_kind(value)} {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: must be an integer, got {_kind(value)} {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: must be a number, got {_kind(value)} {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: must be a string, got {_kind(value)} {value!r}")
        return value
    raise TypeError(f"config field {key} has a type the schema cannot read: {tp!r}")  # our bug, not the user's


def merge_actions(raw: dict, defaults: dict[str, dict]) -> dict:
    """Complete the action map: each label's keys laid over that label's defaults (`block: {min_confidence:
    0.9}` keeps `action: block`), and each route given the whole top-level map with its own keys laid over.

    Shapes that are not mappings are left as they are, for build() to reject with their key.
    """
    raw = dict(raw)
    if isinstance(raw.get("actions"), dict):
        raw["actions"] = _overlay(defaults, raw["actions"])
    routes = raw.get("routes")
    if not isinstance(routes, list):
        return raw
    base = _overlay(defaults, raw["actions"] if isinstance(raw.get("actions"), dict) else {})
    merged = []
    for route in routes:
        if isinstance(route, dict) and isinstance(route.get("actions", {}), dict):
            route = {**route, "actions": _overlay(base, route.get("actions") or {})}
            if raw.get("mode") in ("enforce", "detect"):  # a bad top-level mode is reported as `mode`
                route.setdefault("mode", raw["mode"])
        merged.append(route)
    raw["routes"] = merged
    return raw


def _overlay(base: dict, over: dict) -> dict:
    out = dict(base)
    for label, value in over.items():
        below = out.get(label)
        out[label] = {**below, **value} if isinstance(below, dict) and isinstance(value, dict) else value
    return out


def overlay(raw: Any, env: dict[str, tuple[str, str]], flags: Mapping[str, Any]) -> tuple[dict, dict[str, str]]:
    """The file's keys, then the environment's ({VAR: (dotted key, value)}), then the flags' ({dotted key:
    value}, None meaning unset). Returns the merged mapping and, per key set from the environment, its
    variable's name."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"config: must be a mapping of keys, got {_kind(raw)}")
    raw, sources = dict(raw), {}
    for var, (key, value) in env.items():
        _set(raw, key, value)
        sources[key] = var
    for key, value in flags.items():
        if value is not None:
            _set(raw, key, value)
            sources.pop(key, None)
    return raw, sources


def _set(raw: dict, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node, path = raw, []
    for name in parents:
        path.append(name)
        child = node.get(name)
        if child is None:
            child = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(path)}: must be a mapping of keys, got {_kind(child)}")
        node[name] = child = dict(child)  # a copy: the caller's mapping stays as it was
        node = child
    node[last] = value


def _kind(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping"}.get(
        type(value), "null" if value is None else type(value).__name__
    )
