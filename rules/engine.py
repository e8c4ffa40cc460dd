"""The rule engine: the model's fallback, and the home of the operator's overrides.

Input: Features. Output: `evaluate()` → Verdict (source RULES), `scan()` → RuleResult (score, rule ids,
tags), `override()` → Verdict (source OVERRIDE) or None, `second_look()` → the model's verdict or the rules'
block (the gateway's ensemble; a model block that only calls a request for a page asset a probe is the rules'
to decide: `probe_of_asset`).

Scoring is CRS-style anomaly scoring: every matching rule adds its score once (critical 5, error 4,
warning 3, notice 2) and the request is blocked when the total reaches the ruleset's threshold (5 by
default), so one critical rule blocks alone and weaker signals block only together.

Confidence is monotone in the score s, with threshold T:
    blocked (s >= T):  0.75 + 0.24 * (1 - exp(-(s - T) / T))   0.75 at the threshold, → 0.99
    not blocked:       0.90 - 0.40 * s / T                     0.90 with no match, → 0.50 near T
so a block grows surer as evidence piles up, and a pass grows less sure.

Speed: everything is compiled at load (rules/plans.py). For each set of targets a unit can belong to and
each chain of transformations, the patterns of all rules that apply are folded into one `re2.Set`, so one
value is scanned once per distinct chain, not once per rule; a chain is skipped when no rule of it accepts
a value that long, and a large value gets one cheap chain and one scan. A transformed value is computed
once per unit and chain (prefixes shared). Only non-pattern operators (libinjection, equals, ip, length,
negated patterns) run one by one, and they are few. rules/targets.py bounds the number of units.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from engine.features import Features
from engine.labels import ATTACK_FEATURES, route_label
from engine.verdict import Source, Verdict
from rules.overrides import Override, parse_overrides
from rules.plans import LARGE_VALUE, Planner, chain_for, encoded, fits, read_length, transformed
from rules.schema import Condition, Rule, RuleError, Ruleset, load_ruleset
from rules.targets import Unit, units
from rules.transforms import JOIN

DEFAULT_PATH = Path(__file__).with_name("default.yaml")
PER_PART = ("sqli", "xss")  # operators that read each value of a joined unit (rules/targets.py PER_KIND)
_PARTS = ("parts",)  # the unit-cache key of a joined unit's values as units (no transform has that name)
log = logging.getLogger(__name__)

# What a page loads: stylesheets, scripts, images and fonts. Not archives, dumps, texts, maps or documents, which
# are what probes look for (backups, source maps, changelogs).
ASSET_EXTENSIONS = frozenset("css js mjs png jpg jpeg gif webp avif svg ico bmp woff woff2 ttf otf eot".split())


def probe_of_asset(verdict: Verdict, features: Features) -> bool:
    """A model block whose only attack tag is `scanner` (or none), of a GET or HEAD without a body for a page
    asset by the extension of its last path segment, with no dot segment or dotfile on the way. Fetching a
    public stylesheet or icon exploits nothing: what such a block stops is a site whose asset folders the
    model has only seen probes ask for (TYPO3's typo3conf/ext/, a site under /site/: bench/RESULTS.md)."""
    if features.method not in ("GET", "HEAD") or features.body:
        return False
    if any(t in ATTACK_FEATURES and t != "scanner" for t in verdict.features):
        return False
    path = features.path.split("?", 1)[0].lower()
    if "%" in path or "\\" in path:
        return False  # an encoded or backslashed path is not a plain asset URL
    segments = path.split("/")
    if any(seg.startswith(".") for seg in segments):
        return False  # .., ./, .git/, .env
    last = segments[-1]
    return "." in last and last.rsplit(".", 1)[-1] in ASSET_EXTENSIONS

__all__ = ["RuleEngine", "RuleError", "RuleResult", "confidence"]


@dataclass(frozen=True, slots=True)
class RuleResult:
    score: int
    rules: tuple[str, ...]  # ids of the matching rules, in ruleset order
    tags: tuple[str, ...]  # their feature tags, deduplicated, in order
    threshold: int
    label: str | None = None  # a `label:` of a matching rule, if any (first in ruleset order)

    @property
    def blocked(self) -> bool:
        return self.score >= self.threshold


def excepted(rule: Rule, unit: Unit, request_units: list[Unit]) -> bool:
    """Whether `rule` leaves `unit` alone: an argument its `except` names, in a request that has one of the arguments
    the exception asks for (rules/schema.py). Called on a rule's hits only, so a rule without exceptions costs nothing."""
    if not rule.excepts or not unit.name or "args" not in unit.targets:
        return False
    present: set[str] | None = None
    for ex in rule.excepts:
        if unit.name not in ex.names:
            continue
        if not ex.with_args:
            return True
        if present is None:
            present = argument_names(request_units)
        if ex.with_args & present:
            return True
    return False


def argument_names(request_units: list[Unit]) -> set[str]:
    """The names of a request's arguments (query, form, JSON leaf paths), from its `args_names` units."""
    names: set[str] = set()
    for u in request_units:
        if "args_names" in u.targets:
            names.update(u.value.split(JOIN))
    return names


def confidence(score: int, threshold: int) -> float:
    """See the module docstring: increasing in score when blocked, decreasing when not."""
    if score >= threshold:
        return 0.75 + 0.24 * (1.0 - math.exp(-(score - threshold) / threshold))
    return 0.90 - 0.40 * score / threshold


class RuleEngine:
    def __init__(self, ruleset: Ruleset, overrides: tuple[Override, ...] = ()):
        self.ruleset = ruleset
        self.rules = ruleset.rules
        self.overrides = overrides
        self.threshold = ruleset.threshold
        self.model = f"rules:{ruleset.name}@{ruleset.version}"
        self.wanted = frozenset(t for r in self.rules for c in (r, *r.chain) for t in c.targets)
        self.planner = Planner(self.rules, self.wanted)  # compiles every Set now: load fails, not requests
        if any(ex.with_args for r in self.rules for ex in r.excepts):
            self.wanted |= {"args_names"}  # what an exception's with_args reads (argument_names), whether or not a rule does

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Iterable[dict] = ()) -> "RuleEngine":
        """None loads the packaged rules/default.yaml. Raises RuleError on any invalid rule or override."""
        parsed = parse_overrides(list(overrides or ()))  # cheap: fail on them before compiling rules
        if path is None:
            ruleset = load_ruleset(DEFAULT_PATH, source="rules/default.yaml")
        else:
            ruleset = load_ruleset(Path(path))
        return cls(ruleset, parsed)

    # ---- evaluation --------------------------------------------------------------------------

    def _matches(self, rule: Rule, unit: Unit, large_at: float = LARGE_VALUE) -> bool:
        return rule.operator.test(transformed(unit, chain_for(rule, unit, large_at)))

    def _chain_holds(self, rule: Rule, request_units: list[Unit]) -> bool:
        return all(self._condition_holds(c, request_units) for c in rule.chain)

    def _condition_holds(self, cond: Condition, request_units: list[Unit]) -> bool:
        for unit in request_units:
            if any(t in cond.targets for t in unit.targets) and cond.accepts(read_length(unit)):
                if cond.operator.test(transformed(unit, cond.transforms)):
                    return True
        return False

    def _scan_units(self, request_units: list[Unit], large_at: float = LARGE_VALUE) -> set[int]:
        """The indices of the rules that hold. A joined unit with parts is read value by value (_a_part_matches);
        one without (values the model read, joined by units(split_large=True)) is one value."""
        matched: set[int] = set()
        rules = self.rules
        for unit in request_units:
            size = len(unit.value)
            large = size > large_at  # its plans hold only rules that read large values, so `fits` holds for them all
            parts = bool(unit.parts)
            for plan in self.planner.plans_for(unit.targets, large):
                if size > plan.max_len and read_length(unit) > plan.max_len and not parts:
                    continue
                candidates: list[int] = []
                if plan.set is not None:
                    hits = (plan.joined_set if parts else plan.set).Match(encoded(unit, plan))
                    if hits:
                        candidates = [plan.set_rules[h] for h in hits]
                for i in candidates:
                    if i in matched:
                        continue
                    if parts:  # the pattern matched the joined text somewhere: it holds where it holds on one value
                        hit = self._a_part_matches(rules[i], unit)
                    else:
                        hit = (large or rules[i].accepts(read_length(unit))) and (
                            not rules[i].operator.verify or self._matches(rules[i], unit, large_at))
                    if hit and (not rules[i].chain or self._chain_holds(rules[i], request_units)) and not excepted(rules[i], unit, request_units):
                        matched.add(i)
                for i in plan.slow:
                    if i in matched:
                        continue
                    if parts and not unit.plain:  # libinjection reads the values one by one (it fingerprints a value's first tokens)
                        hit = rules[i].operator.name in PER_PART and self._a_part_matches(rules[i], unit)
                    else:
                        hit = (large or rules[i].accepts(read_length(unit))) and self._matches(rules[i], unit, large_at)
                    if hit and (not rules[i].chain or self._chain_holds(rules[i], request_units)) and not excepted(rules[i], unit, request_units):
                        matched.add(i)
        return matched

    def _a_part_matches(self, rule: Rule, unit: Unit) -> bool:
        """Whether the rule holds on one of the values a joined unit (past PER_KIND) joins, at that value's own
        length: its bounds are a value's, not the joined text's, and a match across two values is none. A pattern
        rule gets here only when its pattern matched the joined text somewhere, so padding that no pattern matches
        costs one scan per chain; for that scan a pattern's anchors hold at each value's start and end too
        (plans.joined_pattern), so `^1$` finds a value `1` inside a run. Of the other operators only
        libinjection's are read so (PER_PART)."""
        return self._matching_part(rule, unit) is not None

    def _matching_part(self, rule: Rule, unit: Unit) -> Unit | None:
        """The first of a joined unit's values (as units, made once per unit) that the rule holds on, or None."""
        if not unit.parts:
            return None
        parts = unit.cache.get(_PARTS)
        if parts is None:
            parts = unit.cache[_PARTS] = [Unit(unit.targets, p, unit.name) for p in unit.parts]
        return next((p for p in parts if rule.accepts(read_length(p)) and self._matches(rule, p)), None)

    def scan(self, features: Features, read_whole: bool = False) -> RuleResult:
        """The anomaly score, matching rule ids and tags; no decision. May raise on a broken input.

        `read_whole`: the model read every byte of the request (its verdict is not truncated). A body over
        64 KiB is then split into fields like any other, and rules bounded to documents leave its long
        values to the model, as they do in a smaller body; a run of values joined past PER_KIND is one
        value. Otherwise (the rules alone, or a body the model saw only the head and tail of) the body is
        also one unit that every rule reading documents reads whole, and a run's values are read one by one."""
        matched = sorted(self._scan_units(*self._units(features, read_whole)))
        hits = [self.rules[i] for i in matched]
        tags = tuple(dict.fromkeys(t for r in hits for t in r.tags))
        label = next((r.label for r in hits if r.label), None)
        return RuleResult(sum(r.score for r in hits), tuple(r.id for r in hits), tags, self.threshold, label)

    def _units(self, features: Features, read_whole: bool) -> tuple[list[Unit], float]:
        """The request's units, and the length above which a unit is large (read in one cheap pass, by the
        rules that read documents only): none is large where the model read the whole request."""
        if read_whole:
            return units(features, self.wanted, split_large=True), math.inf
        return units(features, self.wanted), LARGE_VALUE

    def explain(self, features: Features, read_whole: bool = False) -> list[tuple[str, str, str, str]]:
        """For each matching rule: (rule id, target, field name, the transformed value it matched).
        Slow (rule by rule); meant for tuning and for operators reading a block, not for serving."""
        request_units, large_at = self._units(features, read_whole)
        out = []
        for i in sorted(self._scan_units(request_units, large_at)):
            rule = self.rules[i]
            for unit in request_units:
                if not any(t in rule.targets for t in unit.targets) or excepted(rule, unit, request_units):
                    continue
                if fits(rule, unit, large_at) and self._matches(rule, unit, large_at):
                    value = transformed(unit, chain_for(rule, unit, large_at))
                    out.append((rule.id, unit.targets[0], unit.name, value))
                    break
                part = self._matching_part(rule, unit) if _PARTS in unit.cache else None
                if part is not None:  # a value of a joined unit that scan read one by one
                    out.append((rule.id, unit.targets[0], unit.name, transformed(part, rule.transforms)))
                    break
        return out

    def evaluate(self, features: Features, read_whole: bool = False) -> Verdict:
        """Block at the threshold, else the routing decision. Never raises. `read_whole`: see scan()."""
        try:
            result = self.scan(features, read_whole)
        except Exception:  # a rules fallback that crashes would take the gateway down with the model
            log.exception("rule scan failed; answering with the routing decision")
            result = RuleResult(0, (), (), self.threshold)
        return self.verdict(features, result)

    def second_look(self, verdict: Verdict, features: Features, assets: bool = True) -> Verdict:
        """The ensemble step: the rules read a request the model did not block, and their block stands;
        otherwise the model's verdict does. Where the model read the whole request, a large body is read
        as the fields it holds (scan(read_whole=True)). A model block that only calls a page asset request
        a probe (`probe_of_asset`) is the rules' to decide: their block, or else their routing decision;
        `assets` False keeps such a block (config `rules.asset_probes: false`)."""
        if verdict.blocked and assets and probe_of_asset(verdict, features):
            return self.evaluate(features, read_whole=not verdict.truncated)
        if verdict.blocked:
            return verdict
        ruled = self.evaluate(features, read_whole=not verdict.truncated)
        return ruled if ruled.blocked else verdict

    def verdict(self, features: Features, result: RuleResult) -> Verdict:
        try:
            label, routing = route_label(features)
        except Exception:
            log.exception("route_label failed")
            label, routing = "origin", ()
        conf = confidence(result.score, result.threshold)
        if result.blocked:
            attack = tuple(t for t in result.tags if t in ATTACK_FEATURES)
            return Verdict("block", conf, features=attack + routing, source=Source.RULES, model=self.model)
        return Verdict(result.label or label, conf, features=routing, source=Source.RULES, model=self.model)

    def override(self, features: Features) -> Verdict | None:
        """The first operator override that matches, or None. Never raises."""
        for o in self.overrides:
            try:
                if o.matches(features):
                    return o.verdict(features)
            except Exception:
                log.exception("override %s failed", o.id)
        return None
