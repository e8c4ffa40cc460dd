"""rules/operators.py: each operator as a table, negation, and the linear-time guarantee of RE2."""

import time
from pathlib import Path

import pytest

from rules.operators import OperatorError, compile_operator

HERE = Path(__file__).parent

CASES = [
    ({"regex": r"(?i)union\s+select"}, "1 UNION  SELECT 2", True),
    ({"regex": r"(?i)union\s+select"}, "union of sets", False),
    ({"regex": r"^\d+$"}, "12345", True),
    ({"regex": r"^\d+$"}, "12a", False),
    ({"phrases": ["etc/passwd", "boot.ini"]}, "../../ETC/PASSWD", True),
    ({"phrases": ["etc/passwd", "boot.ini"]}, "etc/password-policy", False),
    ({"phrases": ["id", "ls"], "words": True}, "x; id", True),
    ({"phrases": ["id", "ls"], "words": True}, "valid idea", False),
    ({"phrases": ["a.b"]}, "axb", False),  # phrases are literal, not regex
    ({"phrases": ["config.xml"], "prefix": "(?:^|/)"}, "/app/config.xml", True),
    ({"phrases": ["config.xml"], "prefix": "(?:^|/)"}, "/browserconfig.xml", False),
    ({"phrases": [".env"], "suffix": "$"}, "/.env", True),
    ({"phrases": [".env"], "suffix": "$"}, "/.environment/x", False),
    ({"equals": ["GET", "HEAD"]}, "GET", True),
    ({"equals": ["GET", "HEAD"]}, "get", False),
    ({"equals": "x"}, "x", True),
    ({"ip": ["10.0.0.0/8", "2001:db8::/32"]}, "10.1.2.3", True),
    ({"ip": ["10.0.0.0/8", "2001:db8::/32"]}, "10.1.2.3:5555", True),
    ({"ip": ["10.0.0.0/8", "2001:db8::/32"]}, "[2001:db8::1]:443", True),
    ({"ip": ["10.0.0.0/8", "2001:db8::/32"]}, "11.0.0.1", False),
    ({"ip": ["10.0.0.0/8"]}, "not an address", False),
    ({"ip": "192.168.1.7"}, "192.168.1.7", True),
    ({"length": {"min": 2, "max": 4}}, "abc", True),
    ({"length": {"min": 2, "max": 4}}, "abcde", False),
    ({"length": {"min": 2}}, "a", False),
    ({"sqli": True}, "1' or '1'='1", True),
    ({"sqli": True}, "O'Brien", False),
    ({"sqli": {"exclude_fingerprints": "^E"}}, "select * from users where id = 1 union select 2", False),
    ({"sqli": {"exclude_fingerprints": "^E"}}, "1' union select password from users--", True),
    ({"xss": True}, "<script>alert(1)</script>", True),
    ({"xss": True}, "a < b and c > d", False),
    # negate inverts every operator
    ({"regex": "^GET$", "negate": True}, "POST", True),
    ({"regex": "^GET$", "negate": True}, "GET", False),
    ({"equals": ["chunked"], "negate": True}, "chunked", False),
    ({"sqli": True, "negate": True}, "hello", True),
    # unless exempts what a second regex finds in the same value
    ({"regex": "^\\.\\./", "unless": "^\\.\\./\\w+\\.css$"}, "../config.php", True),
    ({"regex": "^\\.\\./", "unless": "^\\.\\./\\w+\\.css$"}, "../article.css", False),
    ({"regex": "^\\.\\./", "unless": "^\\.\\./\\w+\\.css$"}, "../article.css\x00.php", True),
    ({"xss": True, "unless": "^<style>"}, "<style>p {}</style>", False),
    ({"xss": True, "unless": "^<style>"}, "<script>alert(1)</script>", True),
]


@pytest.mark.parametrize("spec,value,expected", CASES)
def test_operator(spec, value, expected):
    assert compile_operator(spec, HERE).test(value) is expected


def test_phrases_file(tmp_path):
    (tmp_path / "list.txt").write_text("# comment\n\nwp-config.php\n.env\n")
    op = compile_operator({"phrases_file": "list.txt"}, tmp_path)
    assert op.test("/site/.ENV") and op.test("wp-config.php.bak") and not op.test("comment")


def test_long_phrase_list_is_one_pattern(tmp_path):
    words = [f"word{i:05d}" for i in range(5000)]
    op = compile_operator({"phrases": words}, tmp_path)
    assert op.pattern is not None and op.pattern.count("|") == 4999
    assert op.test("x word04999 y") and not op.test("word5")


@pytest.mark.parametrize(
    "spec,key",
    [
        ({"regex": "(a"}, "regex"),
        ({"regex": r"(a)\1"}, "regex"),  # backreference: needs backtracking, RE2 refuses it
        ({"regex": r"(?=a)b"}, "regex"),  # look-ahead: same
        ({"regex": ""}, "regex"),
        ({"regex": "a", "phrases": ["b"]}, ""),
        ({}, ""),
        ({"bogus": 1}, "bogus"),
        ({"ip": ["10.0.0.0/33"]}, "ip[0]"),
        ({"ip": ["10.0.0.1", "nope"]}, "ip[1]"),
        ({"length": {"min": -1}}, "length.min"),
        ({"length": {"minimum": 1}}, "length"),
        ({"sqli": "yes"}, "sqli"),
        ({"sqli": {"exclude_fingerprints": "("}}, "sqli.exclude_fingerprints"),
        ({"phrases": []}, "phrases"),
        ({"phrases_file": "missing.txt"}, "phrases_file"),
        ({"regex": "a", "words": True}, "words"),
        ({"regex": "a", "prefix": "^"}, "prefix"),
        ({"phrases": ["a"], "suffix": 1}, "suffix"),
        ({"phrases": ["a"], "prefix": "("}, "phrases"),
        ({"regex": "a", "negate": "no"}, "negate"),
        ({"regex": "a", "unless": "("}, "unless"),
        ({"regex": "a", "unless": ""}, "unless"),
        ({"regex": "a", "unless": "b", "negate": True}, "unless"),
    ],
)
def test_bad_operator(spec, key):
    with pytest.raises(OperatorError) as err:
        compile_operator(spec, HERE)
    assert err.value.key == key


def test_backreference_is_rejected_with_a_reason():
    with pytest.raises(OperatorError, match="invalid pattern"):
        compile_operator({"regex": r"(\w+)\s+\1"}, HERE)


def test_catastrophic_pattern_runs_in_linear_time():
    # (a+)+$ on "aaaa…!" takes exponential time with a backtracking engine; RE2 is linear.
    op = compile_operator({"regex": r"(a+)+$"}, HERE)
    subject = "a" * 50000 + "!"
    t0 = time.perf_counter()
    assert op.test(subject) is False
    assert time.perf_counter() - t0 < 0.5
    t0 = time.perf_counter()
    assert compile_operator({"regex": r"^(a|aa)+$"}, HERE).test(subject) is False
    assert time.perf_counter() - t0 < 0.5


def test_regex_survives_lone_surrogates():
    assert compile_operator({"regex": "x"}, HERE).test("\ud83dx") is True
    assert compile_operator({"sqli": True}, HERE).test("\ud83d' or 1=1--") is True


def test_an_operator_with_unless_joins_the_set_as_a_candidate_only():
    """Its pattern joins the Set (so it reads runs of values like any pattern rule); a hit is then tested whole."""
    op = compile_operator({"regex": "a", "unless": "b"}, HERE)
    assert op.pattern == "a" and op.verify and op.test("a") and not op.test("ab")
    assert not compile_operator({"regex": "a"}, HERE).verify
