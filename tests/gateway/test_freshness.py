"""RFC 9111 rules as tables: what a shared cache may store, for how long, and when it may serve stale."""

from __future__ import annotations

import pytest

from gateway import freshness
from gateway.config_cache import HEURISTIC_STATUSES

DATE = "Sun, 29 Nov 2026 12:00:00 GMT"


@pytest.mark.parametrize(
    "method, status, headers, why",
    [
        ("GET", 200, [], None),
        ("GET", 404, [("Cache-Control", "max-age=5")], None),
        ("HEAD", 200, [], "method"),
        ("POST", 200, [("Cache-Control", "max-age=60")], "method"),
        ("GET", 302, [("Cache-Control", "max-age=60")], "status"),
        ("GET", 206, [], "status"),
        ("GET", 200, [("Cache-Control", "public, No-Store")], "no-store"),
        ("GET", 200, [("Cache-Control", "max-age=60"), ("cache-control", "private")], "private"),
        ("GET", 200, [("Cache-Control", 'private="set-cookie"')], "private"),
        ("GET", 200, [("Vary", "Accept-Encoding, *")], "vary-star"),
        ("GET", 200, [("Set-Cookie", "a=1")], "set-cookie"),
        ("GET", 200, [("Content-Range", "bytes 0-1/2")], "partial"),
    ],
)
def test_what_may_be_stored(method, status, headers, why):
    assert freshness.refusal(method, status, headers, HEURISTIC_STATUSES) == why


@pytest.mark.parametrize(
    "headers, lifetime",
    [
        ([("Cache-Control", "max-age=60")], 60),
        ([("Cache-Control", "max-age=60, s-maxage=600")], 600),
        ([("Cache-Control", 'max-age="30"')], 30),
        ([("Cache-Control", "max-age=abc")], 300),  # invalid: as if absent, the default applies
        ([("Cache-Control", "max-age=\u00b2")], 300),  # a superscript two: isdigit() says yes, float() refuses
        ([("Cache-Control", "max-age=\u0663")], 300),  # an Arabic-Indic three: not the ASCII digits RFC 9111 means
        ([("Date", DATE), ("Expires", "Sun, 29 Nov 2026 12:01:30 GMT")], 90),
        ([("Date", DATE), ("Expires", "0")], 0),  # an invalid date means already expired
        ([("Date", DATE), ("Expires", "Sun, 29 Nov 2026 11:00:00 GMT")], 0),
        ([("Cache-Control", "max-age=10"), ("Expires", "Sun, 29 Nov 2030 12:00:00 GMT")], 10),  # max-age wins
        ([], 300),
    ],
)
def test_freshness_lifetime(headers, lifetime):
    assert freshness.policy(headers, default_ttl_s=300, stale_if_error_s=0).lifetime == lifetime


@pytest.mark.parametrize(
    "cache_control, configured, window",
    [
        ("max-age=60", 30, 30),
        ("max-age=60, stale-if-error=120", 30, 120),
        ("max-age=60, must-revalidate", 30, 0),
        ("max-age=60, proxy-revalidate", 30, 0),
        ("s-maxage=60", 30, 0),  # s-maxage implies proxy-revalidate
        ("max-age=60, must-revalidate, stale-if-error=10", 30, 10),
    ],
)
def test_stale_if_error_window(cache_control, configured, window):
    assert freshness.policy([("Cache-Control", cache_control)], 0, configured).stale_if_error == window


def test_policy_reads_validators_vary_age_and_no_cache():
    p = freshness.policy(
        [("Cache-Control", "no-cache, max-age=60"), ("ETag", '"a"'), ("Last-Modified", DATE), ("Age", "7"),
         ("Vary", "Accept-Encoding, accept-encoding"), ("Vary", "Accept-Language")],
        300, 0,
    )  # fmt: skip
    assert (p.revalidate, p.etag, p.last_modified, p.initial_age) == (True, '"a"', DATE, 7)
    assert p.vary == ("accept-encoding", "accept-language") and p.validators


@pytest.mark.parametrize(
    "request_headers, matches",
    [
        ({"if-none-match": '"a"'}, True),
        ({"if-none-match": 'W/"a"'}, True),  # weak comparison for GET and HEAD
        ({"if-none-match": '"b", "a"'}, True),
        ({"if-none-match": "*"}, True),
        ({"if-none-match": '"b"'}, False),
        ({"if-none-match": '"b"', "if-modified-since": DATE}, False),  # If-None-Match wins
        ({"if-modified-since": DATE}, True),
        ({"if-modified-since": "Sun, 29 Nov 2026 11:59:59 GMT"}, False),
        ({"if-modified-since": "yesterday"}, False),
        ({}, False),
    ],
)
def test_a_clients_conditional_request(request_headers, matches):
    assert freshness.not_modified(request_headers, '"a"', DATE) is matches


def test_a_304_updates_the_stored_headers_but_not_the_framing():
    stored = [("Content-Type", "text/css"), ("Content-Length", "10"), ("ETag", '"a"'), ("Cache-Control", "max-age=1")]
    fresh = [("ETag", '"a"'), ("Cache-Control", "max-age=60"), ("Content-Length", "0"), ("X-New", "1")]
    merged = freshness.refreshed(stored, fresh)
    assert sorted(merged) == sorted(
        [("Content-Type", "text/css"), ("Content-Length", "10"), ("ETag", '"a"'), ("Cache-Control", "max-age=60"),
         ("X-New", "1")]
    )  # fmt: skip
