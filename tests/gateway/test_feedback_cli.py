"""`clef-gateway feedback ...` on a real journal file: the table, filters, marks, import, export, and
where the journal comes from."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from engine.features import Features
from engine.journal import Journal
from engine.journal_writer import Entry, JournalSettings, row
from engine.verdict import Source, Verdict
from gateway import cli


@pytest.fixture
def journal(tmp_path):
    path = tmp_path / "journal.db"
    now = time.time()
    block = Verdict("block", 0.97, ("sqli",), Source.MODEL, "clef@1")
    with Journal(path) as j:
        j.insert([row(Entry("aaa1", now - 3600 * 30, Features.build("GET", "/search", "q=1'--"), block), JournalSettings("x")),
                  row(Entry("bbb2", now, Features.build("POST", "/api/queries", body="select 1"), block), JournalSettings("x")),
                  row(Entry("ccc3", now, Features.build("GET", "/api/items"), Verdict("allow", 0.9)), JournalSettings("x"))])  # fmt: skip
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_prints_a_table_filtered(journal, capsys):
    code, out, _ = run(capsys, "feedback", "list", "--journal", str(journal), "--label", "block")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:4] == ["ID", "TIME", "(UTC)", "METHOD"]
    assert [ln.split()[0] for ln in lines[1:-1]] == ["bbb2", "aaa1"] and lines[-1] == "(2 shown)"
    assert "sqli" in lines[1] and "/api/queries" in lines[1]
    for args, ids in ((["--path-prefix", "/api/"], ["ccc3", "bbb2"]), (["--since", "1d"], ["ccc3", "bbb2"]),
                      (["--feature", "sqli", "--limit", "1"], ["bbb2"]), (["--marked"], [])):  # fmt: skip
        _, out, _ = run(capsys, "feedback", "list", "--journal", str(journal), "--json", *args)
        assert [json.loads(ln)["id"] for ln in out.splitlines()] == ids, args


def test_mark_several_ids_or_none(journal, capsys):
    code, out, _ = run(capsys, "feedback", "mark", "bbb2", "ccc3", "--label", "origin", "--journal", str(journal))
    assert code == 0 and out.splitlines() == ["bbb2 marked origin", "ccc3 marked origin"]
    code, _, err = run(capsys, "feedback", "mark", "aaa1", "zzz9", "--correct", "--journal", str(journal))
    assert code == 1 and "zzz9" in err and "none marked" in err
    code, out, _ = run(capsys, "feedback", "mark", "aaa1", "--correct", "--journal", str(journal))
    assert code == 0 and out.strip() == "aaa1 marked block"
    with pytest.raises(SystemExit):
        cli.main(["feedback", "mark", "aaa1", "--journal", str(journal)])  # --correct or --label is required
    capsys.readouterr()


def test_marking_a_block_the_rules_made_says_retraining_will_not_help(journal, capsys):
    with Journal(journal) as j:
        j.insert([row(Entry("rrr4", time.time(), Features.build("GET", "/x", "q=union select"),
                            Verdict("block", 0.75, ("sqli",), Source.RULES, "rules:clef-default@1")), JournalSettings("x"))])  # fmt: skip
    code, out, err = run(capsys, "feedback", "mark", "rrr4", "bbb2", "--label", "allow", "--journal", str(journal))
    assert code == 0 and "the rules blocked rrr4, not the model" in err and "bbb2" not in err


def test_import_then_export_corpus_records(journal, tmp_path, capsys):
    marks = tmp_path / "marks.jsonl"
    marks.write_text(json.dumps({"id": "bbb2", "label": "origin"}) + "\n" +
                     json.dumps({"method": "GET", "path": "/reports", "query": "sql=select%201", "label": "allow"}) + "\n")  # fmt: skip
    code, out, _ = run(capsys, "feedback", "import", str(marks), "--journal", str(journal))
    assert code == 0 and out.strip() == "1 marked, 1 added"
    exported = tmp_path / "site.jsonl"
    code, out, _ = run(capsys, "feedback", "export", str(exported), "--journal", str(journal))
    records = [json.loads(ln) for ln in exported.read_text().splitlines()]
    assert code == 0 and [(r["path"], r["label"]) for r in records] == [("/api/queries", "origin"), ("/reports", "allow")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "nope", "label": "allow"}) + "\n")
    code, _, err = run(capsys, "feedback", "import", str(bad), "--journal", str(journal))
    assert code == 1 and "unknown id nope" in err and "nothing imported" in err


def test_the_journal_comes_from_the_config_or_is_asked_for(journal, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CLEF_CONFIG", raising=False)
    monkeypatch.delenv("CLEF_JOURNAL_PATH", raising=False)
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"journal": {"path": str(journal)}}))
    code, out, _ = run(capsys, "feedback", "list", "--config", str(config))
    assert code == 0 and "(3 shown)" in out
    code, _, err = run(capsys, "feedback", "list")
    assert code == 2 and "no journal" in err
    code, _, err = run(capsys, "feedback", "list", "--journal", str(tmp_path / "absent.db"))
    assert code == 2 and "no such file" in err and not (tmp_path / "absent.db").exists()
