"""rules/transforms.py: each transformation as a table of input → output."""

import pytest

from rules.transforms import TRANSFORMS, apply

CASES = [
    # urldecode: repeated, `+` once, %u, overlong UTF-8, invalid escapes kept
    ("urldecode", "a%2527b", "a'b"),
    ("urldecode", "%252e%252e%252f", "../"),
    ("urldecode", "a+b%2Bc", "a b+c"),
    ("urldecode", "%u003cscript%u003e", "<script>"),
    ("urldecode", "%c0%ae%c0%ae%c0%af", "../"),
    ("urldecode", "100%zz", "100%zz"),
    ("urldecode_once", "%2525s%25n", "%25s%n"),
    ("urldecode_once", "a+b", "a b"),
    # HTML entities, named and numeric, nested
    ("html", "&lt;img src=x&gt;", "<img src=x>"),
    ("html", "&#x6a;&#97;vascript", "javascript"),
    ("html", "&amp;lt;script&amp;gt;", "<script>"),
    ("html", "AT&T", "AT&T"),
    # JS / unicode escapes
    ("jsdecode", "\\x3cscript\\x3e", "<script>"),
    ("jsdecode", "\\u0061lert", "alert"),
    ("jsdecode", "\\u{1F600}", "\U0001F600"),
    ("jsdecode", "C:\\\\path", "C:\\\\path"),
    # base64 that decodes to text; other tokens untouched
    ("base64", "x=PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", "x= <script>alert(1)</script> "),
    ("base64", "id=1234567890123456", "id=1234567890123456"),
    ("lowercase", "SeLeCt", "select"),
    # path normalisation keeps ../ visible
    ("normpath", "a\\..\\b", "a/../b"),
    ("normpath", "/a//b/./c/", "/a/b/c/"),
    ("normpath", "./x/././y", "x/y"),
    ("normpath", "/../../etc/passwd", "/../../etc/passwd"),
    ("compress_whitespace", "a \t\n\r\x0b b", "a b"),
    # SQL comments become one space; MySQL versioned comments keep their body
    ("sqlcomments", "un/**/ion sel/*x*/ect", "un ion sel ect"),
    ("sqlcomments", "1 /*!50000union*/ select", "1  union  select"),
    ("sqlcomments", "admin'-- rest", "admin' "),
    ("sqlcomments", "1 # comment\n2", "1  \n2"),
    # a comment inside a SQL keyword joins the word; any other comment stays
    ("sqlsplit", "un/**/ion/**/sel/**/ect", "union/**/select"),
    ("sqlsplit", "1'/**/wh/**/ere/**/1=1;SEL/*x*/ECT 1", "1'/**/where/**/1=1;SELECT 1"),
    ("sqlsplit", "int/* count */main(a/* b */c)", "int/* count */main(a/* b */c)"),
    ("sqlsplit", "select/**/1", "select/**/1"),
    # what a shell runs
    ("cmdline", "c'a't /e\"tc/pa\\sswd", "cat/etc/passwd"),
    ("cmdline", "W^H^O^A^M^I", "whoami"),
    ("cmdline", "ls,-la;id", "ls -la;id"),
    ("cmdline", "x; cat /etc/passwd", "x; cat/etc/passwd"),
    ("cmdline", "a\nID\t\tx", "a\nid x"),
    ("cmdline", "|\\nid", "|\nid"),
    ("cmdline", "&&+|+dir+c:", "&& | dir c:"),
    ("nfkc", "＜script＞", "<script>"),
    ("nfkc", "ﬁle", "file"),
    ("nfkc", "\uff05\uff12\uff45\uff05\uff12\uff45\uff0fetc", "../etc"),  # encoded, then fullwidth: decoded again
    ("nfkc", "caf\u00e9 100%", "caf\u00e9 100%"),  # no new escape: no second decoding
    ("nfkc", "http://169\u3002254\u3002169\u3002254/x\u3002y", "http://169.254.169.254/x\u3002y"),  # IDNA dots, host only
    ("nfkc", "\u5929\u6c17\u3002\u3042\u308a\u304c\u3068\u3046\u3002", "\u5929\u6c17\u3002\u3042\u308a\u304c\u3068\u3046\u3002"),  # prose keeps its full stops
    ("decode", "%26lt%3Bscript%26gt%3B", "<script>"),
    ("decode", "\\u0027+or+1%3D1", "' or 1=1"),
    ("remove_nulls", "a\x00b", "ab"),
    ("trim", "  x \n", "x"),
]


@pytest.mark.parametrize("name,value,expected", CASES)
def test_transform(name, value, expected):
    assert TRANSFORMS[name](value) == expected


def test_every_transform_has_a_case():
    assert {c[0] for c in CASES} == set(TRANSFORMS)


def test_chain_applies_in_order():
    assert apply(("urldecode", "lowercase", "sqlcomments"), "UN%2F**%2FION") == "un ion"
    assert apply((), "Same") == "Same"


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
@pytest.mark.parametrize("value", ["", "%", "%u", "\\", "&#", "\ud800", "\x00" * 10, "é" * 1000, "%25" * 500])
def test_transforms_are_total(name, value):
    assert isinstance(TRANSFORMS[name](value), str)


