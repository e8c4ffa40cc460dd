"""Transformations: str → str functions a rule applies, in order, to a value before its operator runs.

Input: one raw request value (a query value, a header, a JSON leaf, the body). Output: the same value with
one evasion undone or one normalisation applied. Decoders come from engine.canonical, so the rules undo
encodings exactly as the model's canonical text does.

Every function is total (never raises) and bounded: repeated decoders stop after a fixed number of rounds.
`TRANSFORMS` maps the names used in YAML to the functions.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Callable

from engine.canonical import _B64_CLOSE, _B64_OPEN, _JS_ESC, _js_char, decode, expand_base64, percent_decode

ROUNDS = 4  # an attacker stacking more encodings than this gains nothing: the operators see the rest

_SLASHES = re.compile(r"/{2,}")
_DOT_SEGMENT = re.compile(r"(?:^|(?<=/))\./")
_SPACE_RUN = re.compile(r"[ \t\r\n\f\v]{2,}|[\t\r\n\f\v]")  # single spaces stay: fewer, cheaper matches
JOIN = "\x1f"  # joins values into one unit (rules/targets.py): a comment ends there, as it ends with its value
_SQL_VERSIONED = re.compile(r"/\*!\d*([^\x1f]*?)(?:\*/|$|(?=\x1f))")  # MySQL runs the text of /*!50000 ... */
_SQL_BLOCK = re.compile(r"/\*[^\x1f]*?(?:\*/|$|(?=\x1f))")
_SQL_LINE = re.compile(r"(?:--|#)[^\n\x1f]*")
_CMD_DROP = str.maketrans("", "", "\\\"'^")
_CMD_SPACE_BEFORE = re.compile(r"[ \t]+(?=[/(])")
_BLANK_RUN = re.compile(r"[ \t]{2,}|\t")


fast_percent_decode = percent_decode  # engine.canonical's, which runs the common case in C


def urldecode(s: str) -> str:
    """`+` → space (once, as form decoding does), then %XX / %uXXXX / overlong UTF-8 until stable."""
    if "+" in s:
        s = s.replace("+", " ")
    for _ in range(ROUNDS):
        if "%" not in s:
            break
        t = fast_percent_decode(s)
        if t == s:
            break
        s = t
    return s


def urldecode_once(s: str) -> str:
    """One round only, as the application sees a value: `%2525s` → `%25s`, and `%s` survives (format strings)."""
    if "+" in s:
        s = s.replace("+", " ")
    return fast_percent_decode(s)


def html_decode(s: str) -> str:
    """HTML entities, named and numeric, with or without `;`, until stable."""
    for _ in range(ROUNDS):
        if "&" not in s:
            break
        t = html.unescape(s)
        if t == s:
            break
        s = t
    return s


def js_decode(s: str) -> str:
    """JavaScript / unicode escapes: \\xHH, \\uHHHH, \\u{H...}."""
    for _ in range(2):
        if "\\" not in s:
            break
        t = _JS_ESC.sub(_js_char, s)
        if t == s:
            break
        s = t
    return s


def base64_decode(s: str) -> str:
    """Base64 runs that decode to text are replaced by that text (one level); others stay."""
    if len(s) < 12:
        return s
    t = expand_base64(s)
    if t is s or _B64_OPEN not in t:
        return t
    return t.replace(_B64_OPEN, " ").replace(_B64_CLOSE, " ")


def normalize_path(s: str) -> str:
    """`\\` → `/`, `//` → `/`, `/./` → `/`. `../` stays: it is the signal traversal rules look for."""
    if "\\" in s:
        s = s.replace("\\", "/")
    if "//" in s:
        s = _SLASHES.sub("/", s)
    if "./" in s:
        for _ in range(ROUNDS):
            t = _DOT_SEGMENT.sub("", s)
            if t == s:
                break
            s = t
    return s


def compress_whitespace(s: str) -> str:
    """Every run of whitespace (tabs, newlines, vertical tabs, ...) → one space."""
    return _SPACE_RUN.sub(" ", s)


def sql_comments(s: str) -> str:
    """SQL comments → one space, as a database reads them: `/**/`, `-- ...`, `# ...`. The body of a
    MySQL versioned comment (`/*!50000union*/`) is kept, since MySQL executes it."""
    if "/*" in s:
        s = _SQL_VERSIONED.sub(r" \1 ", s)
        s = _SQL_BLOCK.sub(" ", s)
    if "--" in s or "#" in s:
        s = _SQL_LINE.sub(" ", s)
    return s


# a word, a short comment, a word; bounded so that a long value costs linear time
_SQL_SPLIT = re.compile(r"(?<![a-z_])([a-z_]{1,20})/\*(?!!)(?:[^*]|\*(?!/)){0,32}\*/([a-z_]{1,20})(?![a-z_])", re.I)
SQL_SPLIT_MAX = 1 << 14
SQL_WORDS = frozenset(
    "select union insert update delete drop from where having group order limit offset into values table "
    "database schema exec execute declare cast convert concat group_concat substring substr ascii char "
    "sleep benchmark waitfor delay case when then else null like rlike regexp between exists version "
    "user current_user system_user load_file outfile dumpfile information_schema table_name column_name "
    "procedure analyse extractvalue updatexml truncate alter create grant shutdown count distinct".split()
)


def sql_split_words(s: str) -> str:
    """A block comment inside a SQL keyword is removed, joining the word (`UN/**/ION SEL/*x*/ECT` → `UNION
    SELECT`): a filter that strips comments before the query is built leaves the keyword whole. Every other
    comment stays (`or/**/1=1`: a database reads it as a space, and so do `sqlcomments` and libinjection).
    Values over 16 KB stay as they are: the SQL rules stop at a few KB, and the search costs time per comment."""
    if "/*" not in s or len(s) > SQL_SPLIT_MAX:
        return s

    def join(m: re.Match) -> str:
        return m.group(1) + m.group(2) if (m.group(1) + m.group(2)).lower() in SQL_WORDS else m.group(0)

    for _ in range(ROUNDS):  # `sel/**/ect/**/fr/**/om`: each pass joins the splits it found
        t = _SQL_SPLIT.sub(join, s)
        if t == s:
            break
        s = t
    return s


def cmdline(s: str) -> str:
    """What a shell would run, close to CRS's cmdLine: drop `\\ " ' ^` (c'a't → cat), spaces before `/`
    and `(`, `,` and `+` → space, blanks compressed, lower case. Unlike CRS, `;` and line breaks (also
    written `\\n`) stay: they separate commands, and rules look for a command right after a separator."""
    if "\\" in s:  # payload lists write line breaks as \n: a shell would split the command there
        s = s.replace("\\n", "\n").replace("\\r", "\r")
    s = s.translate(_CMD_DROP)
    if "," in s or "+" in s:  # `+` too: lists write spaces as `+`, and no command word contains one
        s = s.replace(",", " ").replace("+", " ")
    s = _CMD_SPACE_BEFORE.sub("", s)
    return _BLANK_RUN.sub(" ", s).lower()  # line breaks stay: a newline separates commands too


_ENCODING_MARKS = ("%", "&", "\\")
_URL_HOST = re.compile(r"(?<=//)[^/\\\s?#]{1,253}")


def nfkc(s: str) -> str:
    """Unicode compatibility forms (fullwidth `＜`, ligatures) → their plain characters. When that brings
    new escape characters (`％２ｅ` → `%2e`, `＆#60;`), the value is decoded once more: a payload written
    encoded and then in fullwidth reads as the payload."""
    if s.isascii():
        return s
    t = unicodedata.normalize("NFKC", s)
    if t != s and any(t.count(c) > s.count(c) for c in _ENCODING_MARKS):
        t = decode(t)
    if "\u3002" in t and "//" in t:  # an ideographic full stop in a URL's host is a dot to URL parsers (IDNA)
        t = _URL_HOST.sub(lambda m: m.group().replace("\u3002", "."), t)
    return t


def decode_all(s: str) -> str:
    """Percent (with `+`), HTML entities and JS escapes, interleaved, until stable: the canonical text's
    own decoding."""
    return decode(s, plus=True)


TRANSFORMS: dict[str, Callable[[str], str]] = {
    "urldecode": urldecode,
    "urldecode_once": urldecode_once,
    "html": html_decode,
    "jsdecode": js_decode,
    "base64": base64_decode,
    "decode": decode_all,
    "lowercase": str.lower,
    "normpath": normalize_path,
    "compress_whitespace": compress_whitespace,
    "sqlcomments": sql_comments,
    "sqlsplit": sql_split_words,
    "cmdline": cmdline,
    "nfkc": nfkc,
    "remove_nulls": lambda s: s.replace("\x00", "") if "\x00" in s else s,
    "trim": str.strip,
}


def apply(chain: tuple[str, ...], value: str) -> str:
    for name in chain:
        value = TRANSFORMS[name](value)
    return value
