"""How values travel inside a request: the encodings browsers, libraries and attack tools use.

`query_value(rng, value)` encodes one query or form value in a style drawn from one distribution shared by
benign values and payloads (raw, browser percent-encoding, `+` for spaces, full percent-encoding), so the
encoding of a value never gives its label away. Values that already carry %XX escapes (payload lists are
full of them) are sent as they are, the way a tool replays a list.
"""

from __future__ import annotations

import re
from urllib.parse import quote, quote_plus

from engine.corpus.rand import Rng, Weighted

_PRE_ENCODED = re.compile(r"%(?:[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})")
_BREAKS_QUERY = re.compile(r"[\x00-\x20\x7f-\U0010ffff&#+%]")
STYLES = Weighted({"browser": 55, "plus": 20, "raw": 17, "full": 3, "lower": 5})


def pre_encoded(value: str) -> bool:
    return bool(_PRE_ENCODED.search(value))


def raw(value: str, keep_percent: bool = False, plus: bool = False) -> str:
    """Only what would break the query apart or the request line is escaped (what curl users type);
    with `plus`, spaces become `+` as in a hand-written form body."""
    def esc(m: re.Match) -> str:
        ch = m.group(0)
        if (ch == "%" and keep_percent) or (ch == " " and plus):
            return "+" if ch == " " else ch
        return "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))

    return _BREAKS_QUERY.sub(esc, value)


def full(value: str, lower: bool = False) -> str:
    data = value.encode("utf-8", "surrogatepass")
    return "".join((f"%{b:02x}" if lower else f"%{b:02X}") for b in data)


def browser(value: str, form: bool = True) -> str:
    """application/x-www-form-urlencoded as a browser submits it (space → +), or a URL's query (%20)."""
    if form:
        return quote_plus(value, safe="*-._", encoding="utf-8", errors="surrogatepass")
    return quote(value, safe="/:@!$'()*,;=-._~?", encoding="utf-8", errors="surrogatepass")


def query_value(rng: Rng, value: str, style: str | None = None) -> str:
    if pre_encoded(value) and style != "full" and rng.chance(0.9):
        return raw(value, keep_percent=True)
    style = style or STYLES.draw(rng)
    if style == "browser":
        return browser(value, form=rng.chance(0.7))
    if style == "plus":
        return raw(value, plus=True)
    if style == "full":
        return full(value)
    if style == "lower":
        return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), browser(value))
    return raw(value)


def path_segment(rng: Rng, value: str, keep_slash: bool = True) -> str:
    if pre_encoded(value):
        return raw(value, keep_percent=True).replace("?", "%3F")
    safe = "/:@!$&'()*+,;=-._~" if keep_slash else ":@!$&'()*+,;=-._~"
    return quote(value, safe=safe, encoding="utf-8", errors="surrogatepass")


def header_value(value: str) -> str:
    """Header values cannot hold CR, LF, NUL or (portably) non-ASCII: those are percent-encoded."""
    return re.sub(r"[\x00-\x1f\x7f-\U0010ffff]", lambda m: quote(m.group(0), safe="", errors="surrogatepass"), value)


def cookie_value(value: str) -> str:
    """Cookie values: what would end the cookie (`;`, `,`, spaces, controls, quotes) is percent-encoded."""
    return re.sub(r'[\x00-\x20\x7f-\U0010ffff;,"\\%]', lambda m: quote(m.group(0), safe="", errors="surrogatepass"), value)
