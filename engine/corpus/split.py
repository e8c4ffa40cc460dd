"""Groups and the train/test split: whole groups are held out, never single records.

A payload's group is its template key (the skeleton: decoded, lower-cased, digits → 0, repeated
substrings (three or more times) and `../` runs collapsed, non-ASCII and control characters made one mark), so the many
encodings and depths of one payload from a template list stay on one side. Template-made sources
(`generated`, phpggc gadget chains) are grouped by their template (`source_path`). Benign data is grouped
by source file (benign_text), fixture file (benign_api), form path (CSIC) or site section (access log).

The test groups are chosen by a fixed salt, not by the build seed, so every build evaluates on the same
held-out groups while the seed varies what the training requests look like.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterable

from engine.canonical import decode
from engine.corpus.rand import stable_hash, unit

SALT = "clef-corpus-split-v1"
TEST_FRACTION = 0.15
GENERATED_FRACTION = 0.05  # generated payloads stay mostly in train (data README); a few templates are held out
# whole benign_text repositories the model never trains on (MODEL-NOTES: keep whole sources out)
HELD_OUT_TEXT_SOURCES = ("alpinejs/alpine", "prometheus/docs", "sqlalchemy/sqlalchemy", "reactjs/ko.react.dev")

_REPEAT = re.compile(r"(.{1,12}?)\1{2,}", re.S)
_TRAVERSAL = re.compile(r"(?:\.{2,}/+)+")
_DIGITS = re.compile(r"\d+")
_ODD = re.compile(r"[^\x20-\x7e]+")
_SPACE = re.compile(r"\s+")


@functools.lru_cache(maxsize=1 << 17)  # a build keys every payload; a second build in-process reuses them
def skeleton(payload: str) -> str:
    """The template key of a payload: what stays when encodings, case, numbers and repetition go."""
    s = decode(payload, plus=False, rounds=6).lower()
    s = _DIGITS.sub("0", s)
    s = _ODD.sub("#", s)
    s = s.replace("\\", "/")
    s = _TRAVERSAL.sub("../", s)
    s = _SPACE.sub(" ", s).strip()
    for _ in range(2):
        t = _REPEAT.sub(r"\1", s)
        if t == s:
            break
        s = t
    return s


def short(key: str) -> str:
    return f"{stable_hash(key):016x}"


def payload_group(rec: dict[str, Any], per_instance: bool = False) -> str:
    cls = rec.get("attack_class") or "benign"
    src, path = rec.get("source", ""), rec.get("source_path", "")
    if src == "generated":
        # a class made from few templates holds out instances; one made from many holds out templates
        return f"{cls}:tpl:{path}:{short(skeleton(rec['payload']))}" if per_instance else f"{cls}:tpl:{path}"
    if src == "ambionics/phpggc":
        return f"{cls}:chain:{path.split(' (')[0]}"
    return f"{cls}:{short(skeleton(rec['payload']))}"


def assign_groups(records: list[dict[str, Any]]) -> None:
    """Set rec["group"] on every payload record (see payload_group)."""
    templates: dict[str, set[str]] = {}
    for rec in records:
        if rec.get("source") == "generated":
            templates.setdefault(rec.get("attack_class") or "benign", set()).add(rec.get("source_path", ""))
    for rec in records:
        few = len(templates.get(rec.get("attack_class") or "benign", ())) < 5
        rec["group"] = payload_group(rec, per_instance=few)


def choose_test(groups: dict[str, int], fraction: float = TEST_FRACTION, min_groups: int = 3) -> set[str]:
    """Test groups among `groups` (group → record count), drawn in salted order until about `fraction` of
    the groups and at least two thirds of `fraction` of the records are held out (but never more than twice
    `fraction` of the groups). A group that would put
    more than fraction + 10 % of the records into test is skipped (one giant template must not empty the
    training side). Classes with fewer than `min_groups` groups stay in train."""
    if len(groups) < min_groups:
        return set()
    total = sum(groups.values())
    want = max(1, round(fraction * len(groups)))
    chosen: set[str] = set()
    held = 0
    for g in sorted(groups, key=lambda g: unit(SALT, g)):
        if len(chosen) >= want and held >= 0.66 * fraction * total or len(chosen) >= 2 * want:
            break
        if held + groups[g] <= (fraction + 0.10) * total or not chosen and groups[g] <= 0.5 * total:
            chosen.add(g)
            held += groups[g]
    return chosen


def by_class(records: Iterable[dict[str, Any]], key) -> dict[str, dict[str, int]]:
    """class → {group: count}, with `key(rec)` giving (class, group)."""
    out: dict[str, dict[str, int]] = {}
    for rec in records:
        cls, grp = key(rec)
        d = out.setdefault(cls, {})
        d[grp] = d.get(grp, 0) + 1
    return out


def text_group(rec: dict[str, Any]) -> str:
    return f"text:{rec['source']}:{rec['source_path']}"


def text_is_test(rec: dict[str, Any]) -> bool:
    if rec["source"] in HELD_OUT_TEXT_SOURCES:
        return True
    return unit(SALT, text_group(rec)) < 0.10


def in_test(group: str, fraction: float = TEST_FRACTION) -> bool:
    """For groups that need no per-class balancing (benign fixtures, hard-negative templates)."""
    return unit(SALT, group) < fraction
