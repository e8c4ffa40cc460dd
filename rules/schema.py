"""Ruleset files: YAML → validated, compiled `Ruleset`, or a `RuleError` naming file, rule and key.

Input: a YAML document

    name: clef-default          # the ruleset's name and version appear in Verdict.model
    version: "1"
    threshold: 5                # anomaly score at which a request is blocked
    rules:
      - id: sqli-libinjection
        description: ...        # optional, free text
        targets: [args, cookies, headers:user-agent]
        transforms: [urldecode, html]
        operator: {sqli: true}  # regex | phrases | phrases_file | equals | ip | length | sqli | xss; negate
        severity: critical      # critical 5, error 4, warning 3, notice 2 (CRS); or score: <int>
        tags: [sqli]            # from engine.labels.FEATURES
        min_length: 0           # optional bounds on the value's length as decoded (percent, `+`, entities,
                                #   escapes, NFKC: what it says, not how it was written; rules/plans.read_length)
        max_length: 4096
        label: origin           # optional: a decision for a request this rule matches, below the threshold
        chain: [...]            # optional: more {targets, transforms, operator, min/max_length}, all must match
        except:                 # optional: arguments this rule does not read (a target exclusion)
          - names: [redirect_uri]          # argument names (JSON leaves as paths: `redirect_uris[]`)
            with_args: [client_id]         # optional: only in a request that has one of these arguments
        enabled: true

Output: `Ruleset(name, version, threshold, rules)` with every regex, phrase list and CIDR compiled.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.labels import FEATURES
from engine.verdict import LABELS
from rules.operators import Operator, OperatorError, compile_operator
from rules.targets import NAMED_PREFIX, TARGETS, valid_target
from rules.transforms import TRANSFORMS

SEVERITIES = {"critical": 5, "error": 4, "warning": 3, "notice": 2}
DEFAULT_THRESHOLD = 5
RULESET_KEYS = {"name", "version", "threshold", "rules", "description", "definitions"}  # definitions: YAML anchors
CONDITION_KEYS = {"targets", "transforms", "operator", "min_length", "max_length"}
RULE_KEYS = CONDITION_KEYS | {"id", "description", "severity", "score", "tags", "label", "chain", "enabled", "except"}
EXCEPT_KEYS = {"names", "with_args"}


class RuleError(ValueError):
    """A ruleset or override that cannot be loaded; the message names the file, the rule and the key."""


@dataclass(frozen=True)
class Condition:
    targets: tuple[str, ...]
    transforms: tuple[str, ...]
    operator: Operator
    min_length: int = 0
    max_length: int | None = None

    def accepts(self, n: int) -> bool:
        """Whether a value of `n` characters (rules.plans.read_length) is within the bounds."""
        return n >= self.min_length and (self.max_length is None or n <= self.max_length)


@dataclass(frozen=True)
class Except:
    """Arguments a rule does not read: those named `names`, in any request or (with `with_args`) only in a request
    that has an argument of one of those names. CRS writes the same as a target exclusion (ctl:ruleRemoveTargetById)."""

    names: frozenset[str]
    with_args: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Rule(Condition):
    id: str = ""
    description: str = ""
    score: int = 0
    tags: tuple[str, ...] = ()
    label: str | None = None
    chain: tuple[Condition, ...] = ()
    excepts: tuple[Except, ...] = ()


@dataclass(frozen=True)
class Ruleset:
    name: str
    version: str
    threshold: int
    rules: tuple[Rule, ...]


class _Where:
    """Builds error messages: `<file>: rule '<id>': <key>: <message>`."""

    def __init__(self, source: str, rule: str):
        self.source, self.rule = source, rule

    def error(self, key: str, message: str) -> RuleError:
        where = f"{self.source}: {self.rule}" if self.rule else self.source
        return RuleError(f"{where}: {key}: {message}" if key else f"{where}: {message}")


def _str_list(value: Any, key: str, where: _Where) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise where.error(key, "must be a list of non-empty strings")
    return value


def _targets(value: Any, key: str, where: _Where) -> tuple[str, ...]:
    out = []
    for i, t in enumerate(_str_list(value, key, where)):
        t = t.strip().lower()
        if not valid_target(t):
            raise where.error(f"{key}[{i}]", f"unknown target {t!r} (known: {', '.join(TARGETS)}, {NAMED_PREFIX}<name>)")
        out.append(t)
    if not out:
        raise where.error(key, "at least one target is required")
    return tuple(dict.fromkeys(out))


def _transforms(value: Any, key: str, where: _Where) -> tuple[str, ...]:
    names = _str_list(value or [], key, where)
    for i, t in enumerate(names):
        if t not in TRANSFORMS and t != "none":
            raise where.error(f"{key}[{i}]", f"unknown transformation {t!r} (known: {', '.join(TRANSFORMS)})")
    return tuple(t for t in names if t != "none")


def _int(value: Any, key: str, where: _Where, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise where.error(key, f"must be an integer >= {minimum}, got {value!r}")
    return value


def _condition(raw: Any, prefix: str, where: _Where, base: Path, allowed: set[str]) -> dict:
    if not isinstance(raw, dict):
        raise where.error(prefix.rstrip("."), "must be a mapping")
    for k in raw:
        if k not in allowed:
            raise where.error(f"{prefix}{k}", f"unknown key (expected one of {', '.join(sorted(allowed))})")
    for k in ("targets", "operator"):
        if k not in raw:
            raise where.error(f"{prefix}{k}", "required")
    try:
        op = compile_operator(raw["operator"], base)
    except OperatorError as err:
        key = f"{prefix}operator.{err.key}" if err.key else f"{prefix}operator"
        raise where.error(key, str(err)) from None
    out = {
        "targets": _targets(raw["targets"], f"{prefix}targets", where),
        "transforms": _transforms(raw.get("transforms"), f"{prefix}transforms", where),
        "operator": op,
        "min_length": _int(raw.get("min_length", 0), f"{prefix}min_length", where),
        "max_length": None,
    }
    if raw.get("max_length") is not None:
        out["max_length"] = _int(raw["max_length"], f"{prefix}max_length", where)
    return out


def _score(raw: dict, where: _Where) -> int:
    if "score" in raw:
        return _int(raw["score"], "score", where)
    severity = raw.get("severity", "critical")
    if severity not in SEVERITIES:
        raise where.error("severity", f"must be one of {', '.join(SEVERITIES)}, got {severity!r}")
    return SEVERITIES[severity]


def _tags(raw: dict, where: _Where) -> tuple[str, ...]:
    tags = _str_list(raw.get("tags", []), "tags", where)
    for i, t in enumerate(tags):
        if t not in FEATURES:
            raise where.error(f"tags[{i}]", f"unknown tag {t!r} (known: {', '.join(FEATURES)})")
    return tuple(tags)


def _excepts(raw: Any, where: _Where) -> tuple[Except, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise where.error("except", "must be a list of {names, with_args}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise where.error(f"except[{i}]", "must be a mapping with names (and with_args)")
        for k in item:
            if k not in EXCEPT_KEYS:
                raise where.error(f"except[{i}].{k}", f"unknown key (expected one of {', '.join(sorted(EXCEPT_KEYS))})")
        if "names" not in item:
            raise where.error(f"except[{i}].names", "required")
        names = _str_list(item["names"], f"except[{i}].names", where)
        if not names:
            raise where.error(f"except[{i}].names", "at least one argument name is required")
        with_args = _str_list(item.get("with_args", []), f"except[{i}].with_args", where)
        out.append(Except(frozenset(names), frozenset(with_args)))
    return tuple(out)


def parse_rule(raw: Any, index: int, source: str, base: Path) -> Rule | None:
    """One rule mapping → Rule (None when `enabled: false`)."""
    rid = raw.get("id") if isinstance(raw, dict) else None
    where = _Where(source, f"rule {rid!r}" if isinstance(rid, str) and rid else f"rules[{index}]")
    if not isinstance(raw, dict):
        raise where.error("", "must be a mapping")
    if not isinstance(rid, str) or not rid:
        raise where.error("id", "required, a non-empty string")
    cond = _condition(raw, "", where, base, RULE_KEYS)
    chain = raw.get("chain") or []
    if not isinstance(chain, list):
        raise where.error("chain", "must be a list of conditions")
    links = tuple(Condition(**_condition(c, f"chain[{i}].", where, base, CONDITION_KEYS)) for i, c in enumerate(chain))
    label = raw.get("label")
    if label is not None and label not in LABELS:
        raise where.error("label", f"must be one of {', '.join(LABELS)}, got {label!r}")
    desc = raw.get("description", "")
    if not isinstance(desc, str):
        raise where.error("description", "must be a string")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise where.error("enabled", "must be true or false")
    rule = Rule(**cond, id=rid, description=desc, score=_score(raw, where), tags=_tags(raw, where), label=label, chain=links,
                excepts=_excepts(raw.get("except"), where))  # fmt: skip
    return rule if enabled else None


def parse_ruleset(doc: Any, source: str, base: Path) -> Ruleset:
    where = _Where(source, "")
    if not isinstance(doc, dict):
        raise where.error("", "must be a mapping with name, version, threshold and rules")
    for k in doc:
        if k not in RULESET_KEYS:
            raise where.error(str(k), f"unknown key (expected one of {', '.join(sorted(RULESET_KEYS))})")
    name, version = doc.get("name", Path(source).stem), str(doc.get("version", "0"))
    if not isinstance(name, str) or not name:
        raise where.error("name", "must be a non-empty string")
    threshold = _int(doc.get("threshold", DEFAULT_THRESHOLD), "threshold", where, minimum=1)
    raw_rules = doc.get("rules") or []
    if not isinstance(raw_rules, list):
        raise where.error("rules", "must be a list")
    rules, seen = [], set()
    for i, raw in enumerate(raw_rules):
        rule = parse_rule(raw, i, source, base)
        rid = raw["id"]
        if rid in seen:
            raise _Where(source, f"rule {rid!r}").error("id", "duplicate id")
        seen.add(rid)
        if rule is not None:
            rules.append(rule)
    return Ruleset(name=name, version=version, threshold=threshold, rules=tuple(rules))


def load_ruleset(path: Path, source: str | None = None) -> Ruleset:
    """Read and validate a ruleset file; `source` is the name errors use (default: the path)."""
    source = source or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise RuleError(f"{source}: cannot read: {err.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise RuleError(f"{source}: invalid YAML: {err}") from None
    return parse_ruleset(doc, source, path.parent)
