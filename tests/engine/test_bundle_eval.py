"""engine.eval on the packaged bundle: figures from request-shaped JSONL, alone and as the gateway decides
(the model, then the default rules on what it let through)."""

from __future__ import annotations

import json

import pytest

from engine import eval as ev
from engine.features import Features
from engine.verdict import Source, Verdict

RECORDS = [
    {"method": "GET", "path": "/search", "query": "q=1%27%20UNION%20SELECT%20password%20FROM%20users--", "label": "block",
     "attack_class": "sqli"},
    {"method": "GET", "path": "/page", "query": "file=../../../../etc/passwd", "label": "block", "attack_class": "path_traversal"},
    {"method": "GET", "path": "/search", "query": "q=O%27Brien+family+recipes", "label": "benign"},
    {"method": "GET", "path": "/static/app.css", "query": "", "label": "cache"},
]  # fmt: skip


def test_the_rules_stand_where_the_model_let_a_request_through():
    f = Features.build("GET", "/search", "q=1' UNION SELECT password FROM users--")
    waved = Verdict("allow", 0.9, (), Source.MODEL, "m@1")
    [v] = ev.with_rules([waved], [f])
    assert v.label == "block" and v.source is Source.RULES
    benign = Features.build("GET", "/search", "q=shoes")
    assert ev.with_rules([waved], [benign]) == [waved]  # nothing for the rules to block: the model's stands


def test_figures_alone_and_as_served(tmp_path, capsys):
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    res = ev.evaluate(None, data, rules=True)
    assert (res["attacks"], res["benign"]) == (2, 2) and res["model"]["per_class"].keys() == res["per_class"].keys()
    assert res["tpr"] >= res["model"]["tpr"] and res["decided_by"].startswith("model + default rules")
    assert res["rules"].startswith("rules:clef-default@")  # the served figures name the ruleset they were read with
    assert ev.main(["--data", str(data), "--rules"]) == 0
    out = capsys.readouterr().out
    assert "+ rules on" in out and "model alone: attack TPR" in out and "sqli" in out
    assert ev.main(["--data", str(data), "--json"]) == 0
    assert "model" not in json.loads(capsys.readouterr().out)  # without --rules: the model's figures only


def test_families_select_records_by_whole_segments_of_their_gen(tmp_path, capsys):
    gens = ["page_save/joomla", "form/page_save/joomla", "page_save/drupal", "asset/typo3", "text/page_saver/x", None]
    recs = [dict(r, gen=g) for r, g in zip(RECORDS * 2, gens)]
    assert [ev.in_family(r, "page_save") for r in recs] == [True, True, True, False, False, False]
    assert [ev.in_family(r, "page_save/joomla") for r in recs] == [True, True, False, False, False, False]
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = ev.evaluate(None, data, rules=True, families=["page_save/joomla", "asset"])
    assert res["records"] == 3  # two payloads in Joomla saves and the TYPO3 asset
    joomla, asset = res["families"]["page_save/joomla"], res["families"]["asset"]
    assert (joomla["attacks"], joomla["benign"], asset["attacks"], asset["benign"]) == (2, 0, 0, 1)
    assert asset["routed"] + asset["blocked"] <= 1 and res["model"]["families"].keys() == res["families"].keys()
    assert ev.main(["--data", str(data), "--family", "asset"]) == 0
    assert "asset: benign" in capsys.readouterr().out
    with pytest.raises(ValueError, match="no records in the families nothing"):
        ev.evaluate(None, data, families=["nothing"])


SQLI_ONLY = """
name: sqli-only
version: "1"
threshold: 5
rules:
  - {id: union, targets: [args], transforms: [decode, lowercase], operator: {regex: "union\\\\s+select"}, tags: [sqli]}
"""


def test_another_ruleset_is_read_on_the_same_model_verdicts(tmp_path, capsys, monkeypatch):
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    (rules := tmp_path / "sqli.yaml").write_text(SQLI_ONLY)
    waved = Verdict("allow", 0.9, (), Source.MODEL, "m@1")  # a model that lets everything through
    monkeypatch.setattr(ev, "predict", lambda model, feats, progress=None: ([waved] * len(feats), None, [9] * len(feats)))
    res = ev.evaluate(None, data, rules=True, rulesets=[rules])
    assert res["rules"].startswith("rules:clef-default@") and res["tpr"] == 1.0  # the default rules catch both
    [other] = res["rulesets"]
    assert other["rules"] == "rules:sqli-only@1" and other["file"] == str(rules)
    assert other["tpr"] == 0.5 and other["per_class"]["path_traversal"]["tpr"] == 0.0
    assert other["differs"] == {"attacks_blocked": 0, "attacks_let_through": 1, "benign_blocked": 0, "benign_let_through": 0}
    alone = ev.evaluate(None, data, rulesets=[rules])  # served with that ruleset alone
    assert alone["rules"] == "rules:sqli-only@1" and alone["tpr"] == 0.5 and "rulesets" not in alone
    assert alone["decided_by"] == f"model + {rules} (the gateway's ensemble)"
    assert ev.main(["--data", str(data), "--rules", "--ruleset", str(rules)]) == 0
    assert "served with rules:sqli-only@1 instead: attack TPR 50.00 %" in capsys.readouterr().out


def test_a_broken_ruleset_fails_before_the_model_reads_anything(tmp_path, monkeypatch):
    from rules import RuleError

    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    (broken := tmp_path / "broken.yaml").write_text("name: x\nrules:\n  - {id: a, targets: [nowhere], operator: {regex: a}}\n")
    monkeypatch.setattr(ev, "predict", lambda *a, **k: pytest.fail("the model ran before the ruleset was checked"))
    with pytest.raises(RuleError):
        ev.evaluate(None, data, rulesets=[broken])
