"""`--synth-payloads` (engine.corpus.synth): NoSQL, LDAP, SSTI and SSRF payloads written from grammars, seeded,
distinct, bounded in share, never a copy of a data payload, and added to the training split only."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from urllib.parse import parse_qsl, unquote

import pytest

from engine.corpus import plan, sources, split, synth
from engine.corpus.build import add_synthetic, build, prepare
from engine.corpus.io import read_records

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data")
REAL = {"nosqli": 50, "ldapi": 17, "ssti": 205, "ssrf": 248}  # the training split's own payload counts today

# what makes each class's payload the attack it is, once percent-decoded
MARKS = {
    "nosqli": re.compile(r"\$(?:ne|gt|gte|lt|lte|regex|nin|in|exists|not|where|expr|or|lookup|function|accumulator|match)\b"
                         r"|this\.\w+|sleep\(\d+\)|db\.\w+|\|\||new Date\(\)|function\s*\(\)\s*\{\s*return|;\s*return\b|1[\x22\x27]==[\x22\x27]1"),
    "ldapi": re.compile(r"\)\s*\(|\(\s*[|&!]\s*\(|\(&\)|\)\x00|\)%00|\)\\00"),
    "ssti": re.compile(r"\{\{.*\}\}|\$\{.*\}|#\{.*\}|<%.*%>|\*\{.*\}|@\(.*\)|@\{.*\}|\{php\}|\{system\(|\[#assign|#set\(|<#assign|\{Smarty_|^\{\d+\*\d+\}$"),
    "ssrf": re.compile(r"^(?:[a-z]+:)?//(?:[^/@#]*[@#])?(?:127\.|0x7f|0177|017700000001|2130706433|0\.0\.0\.0|0[:/]|localhost|\[|169\.254|"
                       r"2852039166|0xa9fea9fe|0251\.|metadata\.google|100\.100\.100\.200|10\.|192\.168\.|172\.|kubernetes|redis\.|admin\.|db\.|consul)"
                       r"|^file:|^netdoc:|^[a-z]+://[a-z.]+\.(?:127|0x7f|2130706433|localhost|0)|redirect\?url=http://|resource=http://|^jar:http://|\.nip\.io/"),
}  # fmt: skip


@pytest.fixture(scope="module")
def drawn():
    return synth.records(1, set())


def test_the_same_seed_draws_the_same_records_and_another_seed_others(drawn):
    assert synth.records(1, set()) == drawn
    other = synth.records(2, set())
    for cls in synth.FAMILIES:
        mine, theirs = {r["payload"] for r in drawn[cls]}, {r["payload"] for r in other[cls]}
        assert len(mine & theirs) < 0.8 * len(mine), cls


@pytest.mark.parametrize("cls", sorted(synth.FAMILIES))
def test_every_family_writes_distinct_attacks_of_its_class(drawn, cls):
    recs = drawn[cls]
    per_family = Counter(r["source_path"] for r in recs)
    assert set(per_family) == {f"{cls}:{fam}" for fam in synth.FAMILIES[cls]}
    assert min(per_family.values()) >= 7, per_family
    for fam in per_family:  # distinct within a family; two families may meet on a string now and then
        assert len({r["payload"] for r in recs if r["source_path"] == fam}) == per_family[fam]
    assert len({r["payload"] for r in recs}) >= len(recs) - 2
    for r in recs:
        assert (r["label"], r["attack_class"], r["source"]) == ("attack", cls, "synth")
        assert r["group"].startswith(f"{cls}:synth:") and r["context"] in ("param", "body")
        assert MARKS[cls].search(unquote(r["payload"])), r["payload"]
        if r["context"] == "body":  # a whole body: JSON or a form that reads back as pairs
            body = r["payload"]
            assert (json.loads(body) is not None) if body.startswith(("{", "[")) else parse_qsl(body, strict_parsing=True)


def test_a_class_gets_a_bounded_share_taken_from_every_family_in_turn(drawn):
    bounded = synth.records(1, set(), REAL)
    for cls, recs in bounded.items():
        limit = max(synth.MIN_PER_CLASS, synth.SYNTH_PER_REAL * REAL[cls])
        assert len(recs) == min(limit, len(drawn[cls])), cls
        assert {r["source_path"] for r in recs} == {r["source_path"] for r in drawn[cls]}
        assert recs == [r for r in drawn[cls] if r in recs]  # a prefix of each family, not a new draw
    assert len(bounded["nosqli"]) == 150 and len(bounded["ldapi"]) == 120  # 3 x 50; the floor over 3 x 17


def test_a_string_the_data_holds_is_never_drawn(drawn):
    taken = {r["payload"] for recs in drawn.values() for r in recs[::3]}
    again = synth.records(1, taken)
    assert not taken & {r["payload"] for recs in again.values() for r in recs}
    assert all(len(again[c]) >= 0.6 * len(drawn[c]) for c in drawn)  # the grammar draws others in their place


def test_a_near_copy_of_a_held_out_template_is_never_drawn(drawn):
    probes = [r for r in drawn["ssti"] if r["payload"].startswith("${") and "*" in r["payload"][:8]]
    assert len(probes) >= 3  # `${62*55}`-style arithmetic: one template, whatever the numbers
    held = {split.payload_group({"attack_class": "ssti", "payload": "${7*7}"})}
    again = synth.records(1, set(), held_out=held)["ssti"]
    assert not any(split.payload_group({"attack_class": "ssti", "payload": r["payload"]}) in held for r in again)
    assert len(again) >= len(drawn["ssti"]) - 6  # the grammar draws other forms in their place


@pytest.mark.skipif(not os.path.isdir(DATA), reason="shared data not available")
def test_no_grammar_payload_shares_a_template_with_a_held_out_payload():
    prep = prepare(sources.load(DATA))
    held = {r["group"] for recs in prep.attacks["test"].values() for r in recs}
    add_synthetic(prep, 1)
    made = [r for recs in prep.attacks["train"].values() for r in recs if r["source"] == "synth"]
    assert len(made) > 700
    assert not [r["payload"] for r in made if split.payload_group({"attack_class": r["attack_class"], "payload": r["payload"]}) in held]


@pytest.mark.skipif(not os.path.isdir(DATA), reason="shared data not available")
def test_the_flag_changes_the_training_split_only(tmp_path):
    plain, flagged = tmp_path / "plain", tmp_path / "synth"
    build(DATA, str(plain), seed=1, scale=0.02, log=lambda msg: None)
    result = build(DATA, str(flagged), seed=1, scale=0.02, log=lambda msg: None, synth_payloads=True)
    for name in ("test.jsonl", "evasion.jsonl"):
        assert (plain / name).read_bytes() == (flagged / name).read_bytes(), name
    assert (plain / "train.jsonl").read_bytes() != (flagged / "train.jsonl").read_bytes()
    train = list(read_records(str(flagged / "train.jsonl")))
    made = Counter(r["attack_class"] for r in train if r["source"] == "synth")
    assert set(made) == set(synth.FAMILIES), made
    assert all(r["label"] == "block" for r in train if r["source"] == "synth")
    assert not any(r["source"] == "synth" for r in read_records(str(flagged / "test.jsonl")))
    assert not any(r["source"] == "synth" for r in read_records(str(plain / "train.jsonl")))
    assert any("synthetic nosqli payloads" in n for n in result["notes"])


@pytest.mark.skipif(not os.path.isdir(DATA), reason="shared data not available")
def test_extra_keeps_every_request_of_the_build_without_it(tmp_path):
    plain, extra = tmp_path / "plain", tmp_path / "extra"
    build(DATA, str(plain), seed=1, scale=0.02, log=lambda msg: None)
    build(DATA, str(extra), seed=1, scale=0.02, log=lambda msg: None, synth_payloads="extra")
    for name in ("test.jsonl", "evasion.jsonl"):
        assert (plain / name).read_bytes() == (extra / name).read_bytes(), name
    before = (plain / "train.jsonl").read_text(encoding="utf-8").splitlines()
    after = (extra / "train.jsonl").read_text(encoding="utf-8").splitlines()
    assert not Counter(before) - Counter(after)  # every line of the plain build, unchanged
    added = [json.loads(line) for line in (Counter(after) - Counter(before)).elements()]
    assert added and all(r["source"] == "synth" and r["label"] == "block" for r in added)
    # on top: a class's target again, times the grammar records' share of the class's records
    prep = prepare(sources.load(DATA))
    with pytest.raises(ValueError, match="synth_payloads"):
        add_synthetic(prep, 1, "most")
    add_synthetic(prep, 1, "extra")
    assert not any(r["source"] == "synth" for recs in prep.attacks["train"].values() for r in recs)
    got = Counter(r["attack_class"] for r in added)
    for cls, n in plan.targets("train", 0.02).items():
        if cls in synth.FAMILIES:
            recs, share = prep.extra[cls]
            assert share == len(recs) / (len(recs) + len(prep.attacks["train"][cls]))
            assert 0.9 * round(n * share) <= got[cls] <= round(n * share), (cls, got[cls], n, share)
        else:
            assert got[cls] == 0
