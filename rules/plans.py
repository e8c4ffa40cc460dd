"""Scan plans: which rules run on a unit, on which transformed form of it, in how many passes.

Input: the compiled rules and the target tuple of a unit (plus whether the unit is large). Output: a
tuple of `Plan`s, one per distinct chain of transformations; each holds one `re2.Set` with the patterns of
all pattern rules of that chain, so a value is scanned once per chain whatever the number of rules.

Large values (over LARGE_VALUE characters: a big body) get a single plan: one cheap chain (percent and
JS-escape decoding) and one case-insensitive Set with every rule that has no length bound or a document's
(max_length >= DOCUMENT_LENGTH). A large body is many fields read as one: a rule that stops at documents
(a script tag, /etc/passwd) still reads it, since the model may have seen only its head and tail. Rules
bounded to short values cannot apply to it; they read the body's fields, which rules/targets.py gives too.
A megabyte body is then read in one decoding pass and one RE2 scan instead of one pass per chain. Where the
model read the whole request (RuleEngine.scan's read_whole), nothing is large: the body is only split into
fields and every value meets its rules' bounds.

Plans are built at load for every target tuple a request can produce (the set is finite: named headers
only when a rule names them), so serving never compiles anything.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

import re2

from rules.operators import re2_options, utf8
from rules.schema import Rule
from rules.targets import _KIND_TARGETS, LARGE_BODY_TARGETS, NAMED_PREFIX, Unit
from rules.transforms import TRANSFORMS

log = logging.getLogger(__name__)
LARGE_VALUE = 1 << 16
DOCUMENT_LENGTH = 4096  # a max_length this long bounds the size of a document, not of a short value
LARGE_CHAIN = ("urldecode", "jsdecode")


@dataclass(frozen=True)
class Plan:
    """The work for one chain of transformations on units of one target tuple."""

    chain: tuple[str, ...]
    set: Any  # the raw RE2::Set of the pattern rules (Match(bytes) → indices), or None
    set_rules: tuple[int, ...]  # Set index → rule index
    slow: tuple[int, ...]  # rules whose operator runs on its own (libinjection, equals, ip, negated)
    max_len: float  # no rule of the plan applies to a longer value: skip its chain entirely
    key: tuple = ()  # the unit-cache key of the encoded value
    joined_set: Any = None  # the Set for a run of joined values (joined_pattern): `set` where no pattern is anchored


_ANCHORS = {"^": r"(?:^|\x1f)", "$": r"(?:$|\x1f)", "\\A": r"(?:\A|\x1f)", "\\z": r"(?:\z|\x1f)"}


def joined_pattern(pattern: str) -> str:
    """`pattern` as it reads a run of values joined by JOIN (rules/targets.py): an anchor to the text's start or end
    (`^`, `$`, `\\A`, `\\z`, outside a character class) holds at a JOIN too, so a pattern anchored to a value
    (`^\\s*file:/`) finds that value inside a run. The Set of such patterns picks the rules that may hold on a
    run; each is then read on the run's values one by one (RuleEngine._a_part_matches), so a wider match costs
    time only, never a decision."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("\\Q", i):  # quoted text up to \E (or the end) is literal
            end = pattern.find("\\E", i + 2)
            end = n if end == -1 else end + 2
            out.append(pattern[i:end])
            i = end
        elif c == "\\":
            two = pattern[i : i + 2]
            out.append(_ANCHORS.get(two, two))
            i += 2
        elif c == "[":  # a character class, copied whole: `[^...]`, a leading `]`, `[:alpha:]` and escapes inside
            j = i + 1
            j += pattern[j] == "^" if j < n else 0
            j += pattern[j] == "]" if j < n else 0
            while j < n and pattern[j] != "]":
                if pattern[j] == "\\":
                    j += 1
                elif pattern.startswith("[:", j) and (end := pattern.find(":]", j + 2)) != -1:
                    j = end + 1
                j += 1
            out.append(pattern[i : j + 1])
            i = j + 1
        else:
            out.append(_ANCHORS.get(c, c))
            i += 1
    return "".join(out)


def reads_large(rule: Rule) -> bool:
    """Whether a rule reads a large value (whose length it does not check then)."""
    return rule.max_length is None or rule.max_length >= DOCUMENT_LENGTH


READ_CHAIN = ("decode", "nfkc")  # a prefix of the usual chains, so its memo is shared with them
_LENGTH = ("length",)  # the unit-cache key of read_length (no transform has that name)
_ESCAPES = re.compile(r"[%&\\]")


def read_length(unit: Unit) -> int:
    """The length that min_length and max_length bound: the value's characters once decoded (percent, `+`,
    HTML entities, JS escapes, NFKC), that is what it says, not how it was written. A raw length would let
    encoding stretch a payload past a short-value rule: a fullwidth `／` is nine characters percent-encoded,
    `%252e` five for one dot. A plain ASCII value without escape characters is its own length, and so is a
    large one (over LARGE_VALUE: only rules that read documents read it, and a chain condition on a megabyte
    body must not decode it to learn that it is long)."""
    n = unit.cache.get(_LENGTH)
    if n is None:
        v = unit.value
        plain = len(v) > LARGE_VALUE or (v.isascii() and not _ESCAPES.search(v))
        n = unit.cache[_LENGTH] = len(v) if plain else len(transformed(unit, READ_CHAIN))
    return n


def fits(rule: Rule, unit: Unit, large_at: float = LARGE_VALUE) -> bool:
    """Whether a rule reads the unit at its length: its own bounds, or any length for a large value (the
    plans of a large unit hold only rules that read documents)."""
    if len(unit.value) > large_at:
        return reads_large(rule)
    return rule.accepts(read_length(unit))


def transformed(unit: Unit, chain: tuple[str, ...]) -> str:
    """The unit's value after `chain`, memoised per prefix so chains sharing a start share the work."""
    cache = unit.cache
    value = cache.get(chain)
    if value is not None:
        return value
    start, value = 0, unit.value
    for k in range(len(chain) - 1, 0, -1):  # the longest prefix already computed
        if chain[:k] in cache:
            start, value = k, cache[chain[:k]]
            break
    for k in range(start, len(chain)):
        value = TRANSFORMS[chain[k]](value)
        cache[chain[: k + 1]] = value
    cache[chain] = value
    return value


def encoded(unit: Unit, plan: Plan) -> bytes:
    data = unit.cache.get(plan.key)
    if data is None:
        data = unit.cache[plan.key] = utf8(transformed(unit, plan.chain))
    return data


def chain_for(rule: Rule, unit: Unit, large_at: float = LARGE_VALUE) -> tuple[str, ...]:
    return LARGE_CHAIN if len(unit.value) > large_at else rule.transforms


class Planner:
    def __init__(self, rules: Sequence[Rule], wanted: frozenset[str]):
        self.rules = rules
        self.wanted = wanted
        self._plans: dict[tuple, tuple[Plan, ...]] = {}
        self._sets: dict[tuple, Any] = {}
        for targets in self.target_tuples():
            self.plans_for(targets, False)
            self.plans_for(targets, True)

    def target_tuples(self) -> set[tuple[str, ...]]:
        raw = [(t,) for t in ("method", "path", "uri", "query_string", "client", "body", "uploads",
                              "upload_names", "header_names", "header_list", "headers")]  # fmt: skip
        raw += [v for pair in _KIND_TARGETS.values() for v in pair] + [("form_names", "args_names")]
        raw += list(LARGE_BODY_TARGETS.values())  # a large body (targets.units)
        raw += [("headers", t) for t in self.wanted if t.startswith(NAMED_PREFIX)]
        out = {tuple(t for t in tup if t in self.wanted) for tup in raw}
        return {t for t in out if t}

    def plans_for(self, targets: tuple[str, ...], large: bool) -> tuple[Plan, ...]:
        """Memoised; a tuple not seen at load (impossible by construction) is built on first use."""
        plans = self._plans.get((targets, large))
        if plans is None:
            plans = self._plans[(targets, large)] = self._build(targets, large)
        return plans

    def _build(self, targets: tuple[str, ...], large: bool) -> tuple[Plan, ...]:
        chains: dict[tuple[str, ...], tuple[list[int], list[int]]] = {}
        for i, rule in enumerate(self.rules):
            if not any(t in rule.targets for t in targets):
                continue
            if large and not reads_large(rule):
                continue
            pattern_rules, slow = chains.setdefault(LARGE_CHAIN if large else rule.transforms, ([], []))
            op = rule.operator
            (pattern_rules if op.pattern is not None and not op.negate else slow).append(i)
        plans = []
        for chain, (pattern_rules, slow) in chains.items():
            patterns = [self.rules[i].operator.pattern for i in pattern_rules]
            raw = self._set(patterns, case_sensitive=not large) if patterns else None
            joined = raw
            if raw is not None and not large:  # a large unit is never a run (runs stop at CHUNK)
                anchored = [joined_pattern(p) for p in patterns]
                try:
                    joined = raw if anchored == patterns else self._set(anchored, case_sensitive=True)
                except Exception:  # a pattern the rewrite cannot read: a run meets its anchors as before
                    log.warning("anchors in runs not read for chain %s: a pattern did not compile rewritten", chain)
                    joined = raw
            limits = [self.rules[i].max_length for i in pattern_rules + slow]
            max_len = math.inf if large or None in limits else max(limits)
            plans.append(Plan(chain, raw, tuple(pattern_rules), tuple(slow), max_len, ("bytes",) + chain, joined))
        return tuple(plans)

    def _set(self, patterns: list[str], case_sensitive: bool) -> Any:
        """One compiled RE2::Set per distinct pattern list; returns the pybind object (no wrapper per call).
        Large values skip the lower-casing pass, so their Set ignores case instead."""
        key = (tuple(patterns), case_sensitive)
        if key not in self._sets:
            opts = re2_options()
            opts.case_sensitive = case_sensitive
            s = re2.Set.SearchSet(opts)
            for p in patterns:
                s.Add(p)
            s.Compile()
            self._sets[key] = s._set
        return self._sets[key]
