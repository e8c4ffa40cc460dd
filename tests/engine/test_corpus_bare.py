"""`--bare-clients` (engine.corpus.profiles.bare, scenes_web.bare): requests from programs that send next to nothing,
benign and carrying payloads, only with the flag; the default corpus's draws are untouched without it."""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from collections import Counter
from pathlib import Path

import pytest

from engine.corpus import attacks, benign, embed_parts, profiles, session
from engine.corpus.pools import Pools
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, all_scenes
from engine.features import Features
from engine.labels import route_label
from tests.engine.test_corpus_site import TEXTS, carrier_scenes, flagged_scene

ROOT = Path(__file__).resolve().parents[2]
USUAL = {"user-agent", "accept", "accept-encoding", "connection", "host"}  # all a bare request may carry


def request(variant: str, i: int):
    ctx = Ctx(Rng("bare", variant, i), Pools("train", texts=TEXTS, bare_clients=True), "train")
    d = all_scenes()["bare"].make(ctx, variant)
    return session.dress(ctx.rng, d, ["tok"])


@pytest.mark.parametrize("variant", all_scenes()["bare"].variants)
def test_every_variant_is_a_benign_request_with_next_to_no_headers(variant):
    seen = Counter()
    for i in range(60):
        d = request(variant, i)
        method, path, query, headers, body = d.render()
        names = {k.lower() for k, _ in headers}
        assert names <= USUAL and not d.cookies and not d.extra and not d.edge, headers  # nothing dressed on
        assert route_label(Features.build(method=method, path=path, query=query, headers=headers, body=body))[0] != "block"
        seen["no agent"] += "user-agent" not in names
        seen["no host"] += "host" not in names
        seen["root"] += path == "/"
    assert seen["no agent"] >= 20 and (variant != "root" or seen["root"] == 60)
    assert seen["no host"] < 20


def test_the_hand_written_check_set_names_tools_the_generator_does_not():
    rows = [json.loads(line) for line in (ROOT / "bench" / "results" / "bare" / "bare-clients.jsonl").open()]
    agents = {v for r in rows for k, v in r["headers"] if k.lower() == "user-agent"}
    assert len(rows) == 40 and agents and not agents & set(profiles.BARE_TOOLS) and not agents & set(profiles.MONITORS)


def test_the_flag_adds_the_scene_to_both_sides_and_test_uses_only_held_out_variants():
    held, recs, test, gens = flagged_scene("bare", "bare_clients", benign.BARE_SHAPES, "b")
    assert len(held) == 1 and not held & {"bare/check", "bare/root"}
    assert len(recs) == 50 and all(r["gen"].startswith("bare/") and r["label"] != "block" for r in recs)
    assert not {r["gen"] for r in recs} & held
    assert test and {r["gen"] for r in test} <= held
    assert gens[False]["bare"] == 0 and gens[True]["bare"] == 5
    assert gens[False]["page"] == gens[True]["page"] > 0  # the rest as before


def test_payloads_ride_on_bare_requests_and_probes_go_bare_only_with_the_flag():
    made = {flag: carrier_scenes("bare_clients", flag, "bpos", 1500) for flag in (False, True)}
    assert made[False]["bare"] == 0 and made[True]["bare"] >= 10
    probes = {}
    for flag in (False, True):
        pools = Pools("train", texts=TEXTS, bare_clients=flag)
        drafts = [embed_parts.url(Ctx(Rng("probe", i), pools, "train"), "/cgi-bin/test-cgi") for i in range(600)]
        probes[flag] = [d for d in drafts if d.client == "bare"]
    assert not probes[False] and 10 <= len(probes[True]) <= 60
    assert all({k.lower() for k, _ in d.render()[3]} <= USUAL for d in probes[True])


# the digest below, computed with the generator as it was before --bare-clients existed (commit dec4748's parent)
BEFORE_THE_FLAG = "019064341d032489cefa7cc1650ead155a837ea55c4baa7493ad4b9ee1d403b4"


def test_without_the_flag_the_generator_draws_what_it_drew_before_the_flag_existed():
    """Benign requests, payloads embedded in scenes and path probes, drawn without the flag, hash as they did before it
    was added: the documented corpus stays byte for byte (a change to the default corpus must update this on purpose)."""
    texts = {"prose": [{"text": "Hello there, select one of the options and drop me a line.", "kind": "prose", "source": "t", "group": "text:t"}],
             "code": [{"text": "if (a < b && c > d) { return `${a}`; }", "kind": "code", "source": "t", "group": "text:t"}]}  # fmt: skip
    h = hashlib.sha256()
    for r in benign.generate(Rng("golden"), Pools("train", texts=texts), "train", 0.002):
        h.update(json.dumps(r, sort_keys=True).encode())
    for i in range(300):
        for cls, mark in (("sqli", "1' OR '1'='1"), ("xss", "<svg onload=alert(1)>")):
            d, how = attacks.embed_param(Ctx(Rng("golden", cls, i), Pools("train", texts=texts), "train"), mark, cls)
            h.update(repr((how, d.render())).encode())
        h.update(repr(embed_parts.url(Ctx(Rng("golden-url", i), Pools("train", texts=texts), "train"), "/cgi-bin/test-cgi").render()).encode())
    assert h.hexdigest() == BEFORE_THE_FLAG


def test_attacks_on_bare_requests_keep_their_payload():
    pools, rode = Pools("train", texts=TEXTS, bare_clients=True), 0
    for i in range(2000):
        d, how = attacks.embed_param(Ctx(Rng("bride", i), pools, "train"), "1' OR '1'='1", "sqli")
        if d.scene.startswith("bare/"):
            rode += 1
            method, path, query, headers, body = d.render()
            text = query + path + (body.decode() if isinstance(body, bytes) else body or "") + " ".join(v for _, v in headers)
            assert "1' OR '1'='1" in urllib.parse.unquote_plus(text)
    assert rode >= 10
