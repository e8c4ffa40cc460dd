"""The corpus builder end to end, at a small scale: determinism, no leakage between splits, labels that
match the policy, coverage of attack classes and hard negatives, header profiles shared by both labels."""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict

import pytest

from engine.corpus import plan, sources, split
from engine.corpus.build import build, split_attacks
from engine.corpus.io import FIELDS, read_records, record_features
from engine.labels import label as policy_label

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data")
SCALE = 0.01
pytestmark = pytest.mark.skipif(not os.path.isdir(DATA), reason="shared data not available")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus")
    result = build(DATA, str(out), seed=1, scale=SCALE, log=lambda msg: None)
    recs = {s: list(read_records(os.path.join(out, f"{s}.jsonl"))) for s in ("train", "test", "evasion")}
    return out, result, recs


def test_same_seed_gives_same_bytes(corpus, tmp_path):
    out, _, _ = corpus
    build(DATA, str(tmp_path), seed=1, scale=SCALE, log=lambda msg: None)
    for name in ("train.jsonl", "test.jsonl", "evasion.jsonl", "summary.json"):
        with open(os.path.join(out, name), "rb") as a, open(os.path.join(tmp_path, name), "rb") as b:
            assert a.read() == b.read(), name


def test_records_have_the_schema(corpus):
    _, _, recs = corpus
    for split, rows in recs.items():
        assert rows, split
        for rec in rows:
            assert set(rec) - {"body_b64"} <= set(FIELDS) and ("body" in rec) != ("body_b64" in rec)
            assert rec["split"] == split and rec["group"] and rec["gen"] and rec["source"]
            assert rec["label"] in ("block", "cache", "origin", "allow")
            assert (rec["attack_class"] is None) == (rec["label"] != "block")


def test_no_group_in_both_train_and_test(corpus):
    _, _, recs = corpus
    train = {r["group"] for r in recs["train"]}
    test = {r["group"] for r in recs["test"]}
    assert not train & test
    assert not train & {r["group"] for r in recs["evasion"]}


def test_every_record_reads_back_with_the_policy_label(corpus):
    _, _, recs = corpus
    for rows in recs.values():
        for rec in rows:
            feats = record_features(rec)
            attack = [rec["attack_class"]] if rec["attack_class"] is not None else None
            lab, tags = policy_label(feats, attack)
            assert (lab, list(tags)) == (rec["label"], rec["features"])


def test_attacks_in_train_for_every_class_with_data(corpus):
    _, result, recs = corpus
    classes = Counter(r["attack_class"] for r in recs["train"] if r["label"] == "block")
    expected = {"sqli", "xss", "cmdi", "code_injection", "path_traversal", "ssrf", "xxe", "ldapi", "nosqli", "xpathi", "jndi",
                "ssti", "ssi", "crlf", "open_redirect", "format_string", "scanner", "rfi", "deserialization",
                "prototype_pollution", "graphql", "protocol_anomaly", "mail_injection", "session_fixation"}  # fmt: skip
    assert expected <= set(classes), expected - set(classes)
    attacks = sum(classes.values())
    assert 0.35 < attacks / len(recs["train"]) < 0.6


def test_test_split_holds_attacks_of_most_classes(corpus):
    _, _, recs = corpus
    classes = {r["attack_class"] for r in recs["test"] if r["label"] == "block"}
    assert len(classes) >= 18


def test_benign_records_contain_hard_negatives(corpus):
    _, _, recs = corpus
    benign = [r for r in recs["train"] + recs["test"] if r["label"] != "block"]
    texts = [record_features(r).text for r in benign]
    checks = {
        "sql": lambda t: re.search(r"\bselect\b.*\bfrom\b|\bunion\b|\bdrop table\b", t),
        "markup": lambda t: "<script" in t or "onclick" in t or "<div" in t or "<p>" in t,
        "shell": lambda t: re.search(r"\b(sudo|rm -rf|curl|grep|chmod)\b", t),
        "quotes": lambda t: "o'" in t or "d'" in t,
        "path": lambda t: "../" in t or "c:\\" in t,
    }
    found = {name for name, check in checks.items() if any(check(t) for t in texts)}
    assert found == set(checks), set(checks) - found
    assert sum(1 for r in benign if r["gen"].startswith(("text/", "hardneg/"))) > 0.15 * len(benign)


def test_lookalikes_only_when_asked_for_of_every_family_and_held_out_by_group(corpus, tmp_path):
    assert not any(r["source"] == "lookalike" for rows in corpus[2].values() for r in rows)
    build(DATA, str(tmp_path), seed=1, scale=SCALE, log=lambda msg: None, lookalikes=True)
    recs = {s: list(read_records(os.path.join(tmp_path, f"{s}.jsonl"))) for s in ("train", "test")}
    trained = Counter(r["gen"].split("/")[1] for r in recs["train"] if r["source"] == "lookalike")
    assert set(trained) == {"joined", "howto", "token", "probe"} and min(trained.values()) >= 10
    for rec in recs["train"] + recs["test"]:
        if rec["source"] == "lookalike":
            assert rec["label"] != "block" and split.in_test(rec["group"]) == (rec["split"] == "test"), rec["group"]
    probes = [r for r in recs["train"] + recs["test"] if r["gen"].startswith("lookalike/probe/")]
    assert probes and all(r["method"] in ("GET", "HEAD") and not r["body"] for r in probes)
    assert not any(k.lower() in ("cookie", "authorization") for r in probes for k, _ in r["headers"])
    # the paths only the held-out `health` scene variants request stay unseen
    assert not {r["path"] for r in probes} & {"/up", "/heartbeat", "/api/health"}


def _family(ua: str) -> str:
    for key in ("Edg/", "Firefox/", "Chrome/", "Safari/", "curl/", "python-requests", "okhttp", "Go-http-client", "axios", "Dalvik"):
        if key in ua:
            return key
    return "other"


def test_header_profiles_occur_with_both_labels(corpus):
    _, _, recs = corpus
    seen: dict[str, set[bool]] = defaultdict(set)
    for rec in recs["train"]:
        ua = next((v for k, v in rec["headers"] if k.lower() == "user-agent"), "")
        seen[_family(ua)].add(rec["label"] == "block")
    for family in ("Chrome/", "Firefox/", "Safari/", "curl/", "python-requests", "okhttp", "Dalvik"):
        assert seen[family] == {True, False}, family


def test_evasion_is_made_from_test_attacks_only(corpus):
    _, _, recs = corpus
    data = sources.load(DATA)
    kept = [r for r in data.attacks if plan.usable(r) is None]
    split.assign_groups(kept)
    held_out = split_attacks(kept)
    assert recs["evasion"]
    hows = Counter()
    for rec in recs["evasion"]:
        assert rec["label"] == "block" and rec["gen"].startswith("evasion/")
        assert rec["group"] in held_out, rec["group"]
        hows[rec["gen"].split("/")[1]] += 1
    assert len(hows) >= 6


def test_summary_counts_match_the_files(corpus):
    _, result, recs = corpus
    assert result["counts"] == {s: len(r) for s, r in recs.items()}
    assert result["canonical_chars"]
