"""Operator overrides: allow/deny rules evaluated before the model.

Input: a list of mappings (from the gateway's YAML config), validated at load:

    - id: deny-admin
      action: deny              # deny → block; allow → route_label's decision; or block|cache|origin|allow
      path_prefix: /admin       # matchers, all optional, all must match:
      path_regex: ^/v[0-9]+/internal/
      methods: [POST, PUT]
      networks: [10.0.0.0/8]    # client address in one of these CIDRs
      user_agent_regex: (?i)curl
      header: {name: x-debug, regex: "^1$"}

Output: `Override.verdict(features)`: the Verdict (source OVERRIDE, confidence 1.0) of the first override
whose matchers all match, or None. An override with no matcher matches every request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from engine.features import Features
from engine.labels import route_label
from engine.verdict import LABELS, Source, Verdict
from rules.operators import OperatorError, cidrs, compile_re2, ip_in, utf8
from rules.schema import RuleError

ACTIONS = ("deny", "allow") + LABELS
MATCHER_KEYS = ("path_prefix", "path_regex", "methods", "networks", "user_agent_regex", "header")
OVERRIDE_KEYS = ("id", "action", "description") + MATCHER_KEYS

Matcher = Callable[[Features], bool]


@dataclass(frozen=True)
class Override:
    id: str
    action: str
    matchers: tuple[Matcher, ...]

    def matches(self, features: Features) -> bool:
        return all(m(features) for m in self.matchers)

    def verdict(self, features: Features) -> Verdict:
        label, routing = route_label(features)
        if self.action == "deny":
            label = "block"
        elif self.action != "allow":
            label = self.action
        return Verdict(label, 1.0, features=routing, source=Source.OVERRIDE, model=f"override:{self.id}")


def _regex(value: Any, key: str) -> Any:
    if not isinstance(value, str) or not value:
        raise RuleError(f"{key}: must be a non-empty regex string")
    try:
        return compile_re2(value, "")
    except OperatorError as err:
        raise RuleError(f"{key}: {err}") from None


def _matcher(key: str, value: Any, where: str) -> Matcher:
    full = f"{where}.{key}"
    if key == "path_prefix":
        if not isinstance(value, str) or not value.startswith("/"):
            raise RuleError(f"{full}: must be a path starting with '/'")
        return lambda f: f.path.startswith(value)
    if key == "path_regex":
        rx = _regex(value, full)
        return lambda f: rx.search(utf8(f.path)) is not None
    if key == "methods":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(m, str) and m for m in value):
            raise RuleError(f"{full}: must be a list of HTTP methods")
        methods = frozenset(m.upper() for m in value)
        return lambda f: f.method.upper() in methods
    if key == "networks":
        try:
            nets = cidrs(value)
        except OperatorError as err:
            raise RuleError(f"{full}{err.key[2:]}: {err}") from None
        return lambda f: ip_in(nets, f.client)
    if key == "user_agent_regex":
        rx = _regex(value, full)
        return lambda f: rx.search(utf8(f.header("user-agent"))) is not None
    return _header_matcher(value, full)


def _header_matcher(value: Any, full: str) -> Matcher:
    if not isinstance(value, dict):
        raise RuleError(f"{full}: must be a mapping {{name, regex}}")
    for k in value:
        if k not in ("name", "regex"):
            raise RuleError(f"{full}.{k}: unknown key (expected name, regex)")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise RuleError(f"{full}.name: required, a header name")
    if "regex" not in value:  # presence only
        return lambda f: any(k.lower() == name.lower() for k, _ in f.headers)
    rx = _regex(value["regex"], f"{full}.regex")
    return lambda f: any(k.lower() == name.lower() and rx.search(utf8(v)) for k, v in f.headers)


def parse_override(raw: Any, index: int, prefix: str = "overrides") -> Override:
    where = f"{prefix}[{index}]"
    if not isinstance(raw, dict):
        raise RuleError(f"{where}: must be a mapping")
    for k in raw:
        if k not in OVERRIDE_KEYS:
            raise RuleError(f"{where}.{k}: unknown key (expected one of {', '.join(OVERRIDE_KEYS)})")
    oid = raw.get("id", f"{prefix}[{index}]")
    if not isinstance(oid, str) or not oid:
        raise RuleError(f"{where}.id: must be a non-empty string")
    action = raw.get("action")
    if action not in ACTIONS:
        raise RuleError(f"{where}.action: must be one of {', '.join(ACTIONS)}, got {action!r}")
    if "description" in raw and not isinstance(raw["description"], str):
        raise RuleError(f"{where}.description: must be a string")
    matchers = tuple(_matcher(k, raw[k], where) for k in MATCHER_KEYS if k in raw)
    return Override(id=oid, action=action, matchers=matchers)


def parse_overrides(raws: Iterable[Any], prefix: str = "overrides") -> tuple[Override, ...]:
    if isinstance(raws, dict) or isinstance(raws, str):
        raise RuleError(f"{prefix}: must be a list of overrides")
    out = tuple(parse_override(raw, i, prefix) for i, raw in enumerate(raws))
    ids = [o.id for o in out]
    for i, oid in enumerate(ids):
        if oid in ids[:i]:
            raise RuleError(f"{prefix}[{i}].id: duplicate id {oid!r}")
    return out
