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
