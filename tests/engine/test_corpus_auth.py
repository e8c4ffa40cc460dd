"""engine/corpus/scenes_auth.py (`--oauth-flows`): identity-provider requests with every kind of registered redirect
URI, loopback ones for native apps; payloads ride on them but never in a redirect URI; only with the flag."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections import Counter

import pytest

from engine.corpus import attacks, benign, session
from engine.corpus.pools import Pools
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, all_scenes
from engine.corpus.scenes_auth import FORM_VARIANTS, QUERY_VARIANTS, VARIANTS
from engine.features import Features
from engine.labels import route_label
from tests.engine.test_corpus_site import TEXTS, carrier_scenes, flagged_scene

REDIRECT_NAMES = ("redirect_uri", "post_logout_redirect_uri", "RelayState", "redirect_uris")
LOOPBACK = re.compile(r"^http://(?:127\.0\.0\.1|\[::1\]|localhost):\d{2,5}(?:/|$)")
REGISTERED = re.compile(r"^(?:https://[\w.-]+/|http://(?:127\.0\.0\.1|\[::1\]|localhost):\d{2,5}(?:/|$)|[a-z]+\.[\w-]+\.[a-z]+:/|urn:ietf:wg:oauth:2\.0:oob$)")


def request(variant: str, i: int, split: str = "train"):
    ctx = Ctx(Rng("idp", variant, i), Pools(split, texts=TEXTS, oauth_flows=True), split)
    d = all_scenes()["idp"].make(ctx, variant)
    session.dress(ctx.rng, d, [])
    return d


def redirect_uris(d) -> list[str]:
    """Every redirect URI a rendered request carries: query, form or JSON."""
    method, path, query, headers, body = d.render()
    text = body.decode() if isinstance(body, bytes) else body or ""
    pairs = urllib.parse.parse_qsl(query) + (urllib.parse.parse_qsl(text) if text and not text.startswith("{") else [])
    found = [v for k, v in pairs if k in REDIRECT_NAMES]
    if text.startswith("{"):
        obj = json.loads(text)
        found += [obj["redirect_uri"]] if "redirect_uri" in obj else obj.get("redirect_uris", [])
    return found


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_is_a_benign_request_whose_redirect_uris_are_registered_forms_and_never_slots(variant):
    for i in range(30):
        d = request(variant, i)
        method, path, query, headers, body = d.render()
        f = Features.build(method=method, path=path, query=query, headers=headers, body=body)
        assert route_label(f)[0] in ("cache", "origin", "allow")
        assert all(REGISTERED.match(u) for u in redirect_uris(d)), redirect_uris(d)
        assert not {s.key for s in d.slots} & set(REDIRECT_NAMES)  # no payload replaces a redirect URI
        assert d.focus is None or d.focus.key not in REDIRECT_NAMES


def test_native_apps_use_loopback_redirect_uris_and_the_other_flows_every_kind():
    for variant in ("authorize_native", "token_native"):
        assert all(LOOPBACK.match(u) for i in range(40) for u in redirect_uris(request(variant, i)))
    seen = Counter()
    for variant in ("authorize", "token_code", "logout", "par"):
        for i in range(60):
            for u in redirect_uris(request(variant, i)):
                seen["loopback" if LOOPBACK.match(u) else u.split(":")[0]] += 1
    assert {"loopback", "https", "urn"} <= set(seen) and any("." in k for k in seen)  # and a private-use scheme
    assert seen["https"] > seen["loopback"] / 2


def test_the_flag_adds_the_scene_to_both_sides_and_test_uses_only_held_out_variants():
    held, recs, test, gens = flagged_scene("idp", "oauth_flows", benign.OAUTH_SHAPES, "o")
    assert len(held) == 2 and "idp/authorize_native" not in held and "idp/token_native" not in held
    assert len(recs) == 60 and all(r["gen"].startswith("idp/") and r["label"] != "block" for r in recs)
    assert not {r["gen"] for r in recs} & held
    assert test and {r["gen"] for r in test} <= held
    assert gens[False]["idp"] == 0 and gens[True]["idp"] == 6
    assert gens[False]["page"] == gens[True]["page"] > 0  # the rest as before


def test_payloads_ride_on_identity_provider_requests_only_with_the_flag_and_never_in_a_redirect_uri():
    made = {flag: carrier_scenes("oauth_flows", flag, "opos", 1500) for flag in (False, True)}
    assert made[False]["idp"] == 0 and made[True]["idp"] >= 10
    pools, rode = Pools("train", texts=TEXTS, oauth_flows=True), 0
    for i in range(1500):
        for cls, mark in (("ssrf", "http://169.254.169.254/latest/meta-data/"), ("xss", "<img src=x onerror=alert(7)>")):
            d, how = attacks.embed_param(Ctx(Rng("oride", cls, i), pools, "train"), mark, cls)
            if not d.scene.startswith("idp/"):
                continue
            rode += 1
            where = how.split("/")[0]
            variant = d.scene.split("/")[1]
            assert variant in (QUERY_VARIANTS if where == "query" else FORM_VARIANTS)
            assert all(REGISTERED.match(u) for u in redirect_uris(d))  # the payload went elsewhere
            method, path, query, headers, body = d.render()
            assert mark in urllib.parse.unquote_plus(query + (body.decode() if isinstance(body, bytes) else body or ""))
    assert rode >= 10
