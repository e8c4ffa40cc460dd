"""rules/eval.py and rules/embed.py: the measuring CLI on tiny hand-written files."""

import base64
import json

import pytest

from rules import eval as rules_eval
from rules.embed import from_payload, from_text
from tests.factories import cms_page_save


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def run_json(capsys, *argv):
    assert rules_eval.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_data_mode_counts_labels_and_classes(tmp_path, capsys):
    records = [
        {"method": "GET", "path": "/s", "query": "q=1%27+or+%271%27%3D%271", "label": "attack", "attack_class": "sqli"},
        {"method": "GET", "path": "/s", "query": "q=%3Cscript%3Ealert(1)%3C/script%3E", "label": "block", "attack_class": "xss"},
        {"method": "GET", "path": "/s", "query": "q=shoes", "headers": [["User-Agent", "x"]], "label": "benign"},
        {"method": "GET", "path": "/logo.png", "headers": {"Accept": "*/*"}, "label": "cache"},
        {"method": "POST", "path": "/a", "body": "name=O%27Brien", "label": "origin"},
        {"method": "GET", "path": "/p", "query": "id=5", "label": "block", "attack_class": None},  # missed, unknown
        {"method": "POST", "path": "/up", "headers": [["Content-Type", "multipart/form-data; boundary=B"]],
         "body_b64": base64.b64encode(b'--B\r\nContent-Disposition: form-data; name="f"; filename="a.php"\r\n\r\n'
                                      b"<?php system($_GET['c']); ?>\r\n--B--\r\n").decode(),
         "label": "block", "attack_class": "code_injection"},
    ]
    out = run_json(capsys, "--data", write_jsonl(tmp_path / "r.jsonl", records))
    assert out["classes"]["sqli"] == {"n": 1, "blocked": 1, "rate": 1.0}
    assert out["classes"]["xss"]["blocked"] == 1
    assert out["classes"]["unknown"] == {"n": 1, "blocked": 0, "rate": 0.0}
    assert out["classes"]["code_injection"]["blocked"] == 1  # body_b64 is decoded
    assert (out["attacks"], out["benign"]) == (4, 3)
    assert out["tpr"] == 0.75 and out["fpr"] == 0.0
    assert out["median_ms"] > 0 and out["p99_ms"] >= out["median_ms"]


def test_text_report_and_limit(tmp_path, capsys):
    path = write_jsonl(tmp_path / "p.jsonl", [
        {"payload": "../../../etc/passwd", "label": "attack", "attack_class": "path_traversal", "context": "param"},
        {"payload": "hello world", "label": "benign", "attack_class": None, "context": "param"},
    ])  # fmt: skip
    assert rules_eval.main(["--payloads", path, "--limit", "1"]) == 0
    out = capsys.readouterr()
    assert "path_traversal" in out.out and "attack TPR 100.00% over 1 attacks" in out.out
    assert "benign" not in out.out  # --limit 1 kept only the first record
    assert "1/1 records" in out.err  # progress goes to stderr


def test_text_mode_embeds_as_form_and_json(tmp_path, capsys):
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": "SELECT name FROM users ORDER BY name;"}, {"text": "O'Brien's café"}])
    out = run_json(capsys, "--text", path)
    assert out["benign"] == 4 and out["fpr"] == 0.0 and out["tpr"] is None


@pytest.mark.parametrize(
    "context,check",
    [
        ("param", lambda f: f.path == "/search" and f.query == "q=a%27b%20c"),
        ("path", lambda f: f.path == "/a'b%20c"),
        ("header:User-Agent", lambda f: f.header("user-agent") == "a'b c"),
        ("header:X-Api-Version", lambda f: f.header("x-api-version") == "a'b c"),
        ("body", lambda f: f.method == "POST" and f.body == b"a'b c" and f.header("content-type") == "text/plain"),
        ("graphql", lambda f: json.loads(f.body) == {"query": "a'b c"}),
        ("token", lambda f: f.header("authorization") == "Bearer a'b c"),
        ("upload", lambda f: b'filename="upload.txt"' in f.body and b"a'b c" in f.body),
    ],
)
def test_from_payload_contexts(context, check):
    assert check(from_payload("a'b c", context))


def test_from_payload_raw_forms():
    req = from_payload("POST /login?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\na=1", "request")
    assert (req.method, req.path, req.query, req.body, req.header("host")) == ("POST", "/login", "x=1", b"a=1", "h")
    hdr = from_payload("Transfer-Encoding : chunked", "header")
    assert ("Transfer-Encoding ", "chunked") in hdr.headers
    url = from_payload("/index.php?page=http://e.example/x.txt?", "url")
    assert url.path == "/index.php" and url.query == "page=http://e.example/x.txt?"
    assert from_payload('{"a": 1}', "body").header("content-type") == "application/json"
    assert from_payload("<x/>", "body").header("content-type") == "application/xml"


def test_from_text():
    assert from_text("a b&c", "form").body == b"title=note&comment=a+b%26c"
    assert json.loads(from_text("x", "json").body)["content"] == "x"
    assert from_text("a b", "query").query == "q=a+b"


def two_rulesets(tmp_path):
    """An old ruleset, a new one that adds a rule (version 2), and four requests: one both block, one only the new
    one blocks, a false positive the new one adds, and one neither blocks."""
    old = tmp_path / "old.yaml"
    old.write_text("rules:\n  - {id: alpha, targets: [args], operator: {regex: alpha}}\n")
    new = tmp_path / "new.yaml"
    new.write_text("version: '2'\nrules:\n  - {id: alpha, targets: [args], operator: {regex: alpha}}\n"
                   "  - {id: beta, targets: [args], operator: {regex: beta}, tags: [sqli]}\n")
    records = [
        {"method": "GET", "path": "/", "query": "q=alpha", "label": "block", "attack_class": "sqli"},
        {"method": "GET", "path": "/", "query": "q=beta", "label": "block", "attack_class": "sqli"},
        {"method": "GET", "path": "/", "query": "q=beta+blocker", "label": "benign"},
        {"method": "GET", "path": "/", "query": "q=gamma", "label": "block", "attack_class": "xss"},
    ]
    return old, new, write_jsonl(tmp_path / "r.jsonl", records)


@pytest.mark.parametrize("workers", [1, 2])
def test_against_counts_the_decisions_another_ruleset_makes_differently(tmp_path, capsys, workers):
    old, new, data = two_rulesets(tmp_path)
    out = run_json(capsys, "--data", data, "--rules", str(new), "--against", str(old), "--workers", str(workers))
    assert out["against"]["changed"] == {"benign: now blocked": 1, "sqli: now blocked": 1}
    assert out["rules"].endswith("@2") and (out["tpr"], out["fpr"]) == (0.6667, 1.0)
    assert rules_eval.main(["--data", data, "--rules", str(old), "--against", str(new), "--show-changed", "5"]) == 0
    text = capsys.readouterr().out
    assert text.count("CHANGED") == 2 and "benign: now passed 1, sqli: now passed 1" in text


@pytest.mark.parametrize("workers", [1, 2])
def test_against_decisions_compares_with_a_run_of_other_code(tmp_path, capsys, workers):
    """An engine change cannot be measured with --against (one engine decides both rulesets): one run writes
    its decisions, a later one (here: another ruleset standing for other code) counts what differs."""
    old, new, data = two_rulesets(tmp_path)
    earlier = tmp_path / "old-decisions.jsonl"
    run_json(capsys, "--data", data, "--rules", str(old), "--decisions", str(earlier))
    assert [json.loads(line) for line in earlier.read_text().splitlines()] == [
        [0, "sqli", True], [1, "sqli", False], [2, "benign", False], [3, "xss", False]]  # fmt: skip
    out = run_json(capsys, "--data", data, "--rules", str(new), "--against-decisions", str(earlier), "--workers", str(workers))
    assert out["against"]["changed"] == {"benign: now blocked": 1, "sqli: now blocked": 1}
    assert rules_eval.main(["--data", data, "--rules", str(new), "--against-decisions", str(earlier), "--show-changed", "5"]) == 0
    text = capsys.readouterr().out
    assert text.count("CHANGED") == 2 and "CHANGED benign now blocked beta" in text  # the rules behind each
    with pytest.raises(SystemExit, match="another input"):
        rules_eval.main(["--data", data, "--limit", "3", "--against-decisions", str(earlier)])


def test_read_whole_decides_as_the_second_look_does(tmp_path, capsys):
    """A large page save quoting an SSI directive in a long field: blocked by the rules alone, passed by the second
    look at a request the model read whole (the field is a document, left to the model)."""
    page = cms_page_save()
    record = {"method": "POST", "path": page.path, "headers": [list(h) for h in page.headers], "body": page.body.decode(), "label": "benign"}
    data = write_jsonl(tmp_path / "big.jsonl", [record])
    assert run_json(capsys, "--data", data)["fpr"] == 1.0
    assert run_json(capsys, "--data", data, "--read-whole")["fpr"] == 0.0


@pytest.mark.parametrize("workers", [1, 2])
def test_margins_count_the_blocks_each_rule_decides(tmp_path, capsys, workers):
    """Two warnings that block only together each decide that block; a critical rule beside a warning decides
    alone (the warning's 3 leaves 5); a request over the threshold by more than any one rule is decided by none."""
    rules = tmp_path / "r.yaml"
    rules.write_text("threshold: 5\nrules:\n"
                     "  - {id: crit, targets: [args], operator: {regex: crit}, tags: [sqli]}\n"
                     "  - {id: crit2, targets: [args], operator: {regex: both}, tags: [sqli]}\n"
                     "  - {id: warn1, targets: [args], operator: {regex: wone}, severity: warning}\n"
                     "  - {id: warn2, targets: [args], operator: {regex: wtwo}, severity: warning}\n")
    data = write_jsonl(tmp_path / "d.jsonl", [
        {"method": "GET", "path": "/", "query": "q=crit", "label": "block", "attack_class": "sqli"},
        {"method": "GET", "path": "/", "query": "q=crit+wone", "label": "block", "attack_class": "xss"},
        {"method": "GET", "path": "/", "query": "q=wone+wtwo", "label": "benign"},
        {"method": "GET", "path": "/", "query": "q=crit+both", "label": "block", "attack_class": "sqli"},
        {"method": "GET", "path": "/", "query": "q=wone", "label": "benign"},  # 3 < 5: passes, decided by none
    ])  # fmt: skip
    out = run_json(capsys, "--data", data, "--rules", str(rules), "--margins", "--workers", str(workers))
    assert out["margins"] == {
        "warn1": {"benign": 1, "attacks": 0, "classes": {}},
        "warn2": {"benign": 1, "attacks": 0, "classes": {}},
        "crit": {"benign": 0, "attacks": 2, "classes": {"sqli": 1, "xss": 1}},
    }
    assert "margins" not in run_json(capsys, "--data", data, "--rules", str(rules))
    assert rules_eval.main(["--data", data, "--rules", str(rules), "--margins"]) == 0
    assert "blocks each rule decides" in capsys.readouterr().out
