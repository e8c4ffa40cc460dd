"""Operators: a rule's test on one transformed value, compiled once at load.

Input: the `operator:` mapping of a rule (exactly one of regex, phrases/phrases_file, equals, ip, length,
sqli, xss; plus `negate`, `unless`, and `words` for phrases). Output: an `Operator` whose `test(value)`
says whether the value matches. `unless: <regex>` exempts values that the regex also finds (RE2 has no
look-around): `{regex: "^\\.\\./", unless: "^\\.\\./\\w+\\.css$"}`; such an operator is tested on its own,
outside the Set. Pattern operators (regex, phrases) also expose `pattern`, a re2 pattern the
engine folds with the other rules of the same target into one `re2.Set`, so a value is scanned once for
all of them.

Regexes use RE2 (google-re2): matching is linear in the input whatever the pattern, and constructs that
need backtracking (backreferences, look-around) do not compile, which makes them a load error.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import libinjection
import re2

OPERATOR_KEYS = ("regex", "phrases", "phrases_file", "equals", "ip", "length", "sqli", "xss")
MODIFIER_KEYS = ("negate", "unless", "words", "prefix", "suffix")
RE2_MAX_MEM = 64 << 20  # per compiled Set/regex; the DFA cache grows only as far as inputs push it
LIBINJECTION_MAX = 16384  # libinjection's SQLi reads only the first tokens; XSS is linear but in Python-land


class OperatorError(ValueError):
    """A bad operator: `key` is the sub-key (e.g. "regex"), the message says why."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def re2_options() -> re2.Options:
    opts = re2.Options()
    opts.max_mem = RE2_MAX_MEM
    opts.log_errors = False
    return opts


def compile_re2(pattern: str, key: str) -> Any:
    try:
        return re2.compile(pattern, re2_options())
    except re2.error as err:
        msg = err.args[0].decode() if err.args and isinstance(err.args[0], bytes) else str(err)
        raise OperatorError(key, f"invalid pattern {pattern[:80]!r}: {msg}") from None


def phrase_pattern(phrases: list[str], words: bool, prefix: str = "", suffix: str = "") -> str:
    """One case-insensitive alternation; longest first so a literal prefix never hides a longer entry.
    `prefix`/`suffix` are regex fragments around it (e.g. `(?:^|/)` to anchor file names to a segment)."""
    alts = "|".join(re.escape(p) for p in sorted(set(phrases), key=lambda p: (-len(p), p)))
    if words:
        prefix, suffix = prefix + r"\b", r"\b" + suffix
    return f"(?i){prefix}(?:{alts}){suffix}"


def read_list(path: Path) -> list[str]:
    """One phrase a line; blank lines and lines starting with `#` are skipped."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _text(value: str) -> str:
    """libinjection takes str and encodes it strictly: lone surrogates (from `\\ud83d`) must go."""
    value = value[:LIBINJECTION_MAX]
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")


def utf8(value: str) -> bytes:
    """re2 reads UTF-8; `surrogatepass` keeps lone surrogates (from JSON `\\ud83d`) instead of failing."""
    return value.encode("utf-8", "surrogatepass")


def is_sqli(value: str) -> bool:
    return bool(value) and bool(libinjection.is_sql_injection(_text(value))["is_sqli"])


def is_xss(value: str) -> bool:
    return bool(value) and bool(libinjection.is_xss(_text(value))["is_xss"])


@dataclass
class Operator:
    name: str
    test_fn: Callable[[str], bool]
    negate: bool = False
    pattern: str | None = None  # set for regex/phrases: foldable into a re2.Set
    spec: dict = field(default_factory=dict)
    verify: bool = False  # a Set hit on `pattern` is a candidate only, which test() decides (an `unless` exemption)

    def test(self, value: str) -> bool:
        return self.test_fn(value) != self.negate


def _one_key(spec: dict) -> str:
    unknown = [k for k in spec if k not in OPERATOR_KEYS + MODIFIER_KEYS]
    if unknown:
        raise OperatorError(unknown[0], f"unknown key (expected one of {', '.join(OPERATOR_KEYS)})")
    keys = [k for k in OPERATOR_KEYS if k in spec and k != "phrases_file"]
    if "phrases_file" in spec and "phrases" not in keys:
        keys.append("phrases")
    if len(keys) != 1:
        raise OperatorError("", f"exactly one of {', '.join(OPERATOR_KEYS)} is required, got {keys or 'none'}")
    return keys[0]


def _phrases(spec: dict, base: Path) -> list[str]:
    items = spec.get("phrases") or []
    if not isinstance(items, list) or not all(isinstance(p, str) and p for p in items):
        raise OperatorError("phrases", "must be a list of non-empty strings")
    items = list(items)
    if "phrases_file" in spec:
        path = base / str(spec["phrases_file"])
        try:
            items += read_list(path)
        except OSError as err:
            raise OperatorError("phrases_file", f"cannot read {path}: {err.strerror}") from None
    if not items:
        raise OperatorError("phrases", "empty phrase list")
    return items


def cidrs(spec: Any) -> list:
    items = spec if isinstance(spec, list) else [spec]
    nets = []
    for i, item in enumerate(items):
        try:
            nets.append(ipaddress.ip_network(str(item), strict=False))
        except ValueError:
            raise OperatorError(f"ip[{i}]", f"invalid address or CIDR {item!r}") from None
    return nets


def ip_in(nets: list, value: str) -> bool:
    host = value.strip()
    if host.startswith("[") and "]" in host:  # [v6]:port
        host = host[1 : host.index("]")]
    elif host.count(":") == 1:  # v4:port
        host = host.split(":", 1)[0]
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(addr.version == n.version and addr in n for n in nets)


def _length(spec: Any) -> Callable[[str], bool]:
    if not isinstance(spec, dict) or not spec or set(spec) - {"min", "max"}:
        raise OperatorError("length", "must be a mapping with min and/or max")
    for k, v in spec.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise OperatorError(f"length.{k}", f"must be an integer >= 0, got {v!r}")
    lo, hi = spec.get("min", 0), spec.get("max")
    return lambda s: len(s) >= lo and (hi is None or len(s) <= hi)


def compile_operator(spec: Any, base: Path) -> Operator:
    """`spec` is the rule's `operator:` mapping; `base` the folder phrase files are relative to."""
    if not isinstance(spec, dict):
        raise OperatorError("", "must be a mapping")
    if "unless" not in spec:
        return _compile(spec, base)
    pat = spec["unless"]
    if not isinstance(pat, str) or not pat:
        raise OperatorError("unless", "must be a non-empty regex string")
    if spec.get("negate"):
        raise OperatorError("unless", "does not combine with negate")
    exempt = compile_re2(pat, "unless")
    op = _compile({k: v for k, v in spec.items() if k != "unless"}, base)
    test = op.test_fn
    # the main pattern still joins the Set (a value no rule's pattern matches costs no exemption check); a hit is
    # then tested whole, exemption included
    return Operator(op.name, lambda s: test(s) and exempt.search(utf8(s)) is None, op.negate, op.pattern, spec, verify=True)


def _compile(spec: dict, base: Path) -> Operator:
    kind = _one_key(spec)
    negate = spec.get("negate", False)
    if not isinstance(negate, bool):
        raise OperatorError("negate", "must be true or false")
    for key in ("words", "prefix", "suffix"):
        if key in spec and kind != "phrases":
            raise OperatorError(key, "only applies to phrases")
    for key in ("prefix", "suffix"):
        if not isinstance(spec.get(key, ""), str):
            raise OperatorError(key, "must be a regex string")
    if kind == "regex":
        pat = spec["regex"]
        if not isinstance(pat, str) or not pat:
            raise OperatorError("regex", "must be a non-empty string")
        rx = compile_re2(pat, "regex")
        return Operator("regex", lambda s: rx.search(utf8(s)) is not None, negate, pat, spec)
    if kind == "phrases":
        pat = phrase_pattern(_phrases(spec, base), bool(spec.get("words", False)), spec.get("prefix", ""), spec.get("suffix", ""))
        rx = compile_re2(pat, "phrases")
        return Operator("phrases", lambda s: rx.search(utf8(s)) is not None, negate, pat, spec)
    if kind == "equals":
        vals = spec["equals"] if isinstance(spec["equals"], list) else [spec["equals"]]
        allowed = frozenset(str(v) for v in vals)
        return Operator("equals", allowed.__contains__, negate, None, spec)
    if kind == "ip":
        nets = cidrs(spec["ip"])
        return Operator("ip", lambda s: ip_in(nets, s), negate, None, spec)
    if kind == "length":
        return Operator("length", _length(spec["length"]), negate, None, spec)
    if kind == "sqli" and isinstance(spec[kind], dict):
        return Operator(kind, _sqli_filtered(spec[kind]), negate, None, spec)
    if spec[kind] is not True:
        raise OperatorError(kind, "must be true" + (" or {exclude_fingerprints: <regex>}" if kind == "sqli" else ""))
    return Operator(kind, is_sqli if kind == "sqli" else is_xss, negate, None, spec)


def _sqli_filtered(opts: dict) -> Callable[[str], bool]:
    """libinjection SQLi, ignoring fingerprints that match a regex: free-text SQL (a statement that starts
    with SELECT, fingerprint `E...`) is documentation far more often than an injection."""
    unknown = set(opts) - {"exclude_fingerprints"}
    if unknown:
        raise OperatorError(f"sqli.{sorted(unknown)[0]}", "unknown key (expected exclude_fingerprints)")
    pattern = opts.get("exclude_fingerprints")
    if not isinstance(pattern, str) or not pattern:
        raise OperatorError("sqli.exclude_fingerprints", "must be a regex string")
    rx = compile_re2(pattern, "sqli.exclude_fingerprints")

    def test(value: str) -> bool:
        if not value:
            return False
        res = libinjection.is_sql_injection(_text(value))
        return bool(res["is_sqli"]) and rx.search(res["fingerprint"]) is None

    return test
