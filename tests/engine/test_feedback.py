"""engine/feedback.py: marked journal rows out as corpus records, marks and labelled requests in."""

from __future__ import annotations

import json

import pytest

from engine.corpus.io import FIELDS, record_features
from engine.feedback import export, import_lines
from engine.features import Features
from engine.journal import Journal
from engine.journal_writer import Entry, JournalSettings, row
from engine.verdict import Source, Verdict

QUERY = Features.build("POST", "/api/queries", headers=[("Content-Type", "application/json"), ("Cookie", "sid=s3cr3tvalue")],
                       body=json.dumps({"name": "top users", "sql": "SELECT name FROM users WHERE active = 1"}))  # fmt: skip
SQLI = Features.build("GET", "/search", "q=1%27%20OR%201%3D1--")


@pytest.fixture
def journal(tmp_path, clock):
    with Journal(tmp_path / "j.db", clock=clock) as j:
        block = Verdict("block", 0.98, ("sqli",), Source.MODEL, "clef@1")
        j.insert([row(Entry("fp", 1.0, QUERY, block), JournalSettings("x")),
                  row(Entry("tp", 2.0, SQLI, block), JournalSettings("x"))])  # fmt: skip
        yield j


def test_marked_rows_become_corpus_records(journal):
    journal.mark(["fp"], "allow")
    journal.mark(["tp"])  # the block was right
    fp, tp = export(journal)
    assert set(FIELDS) <= set(fp) and fp["id"] == "fp"
    assert (fp["label"], fp["attack_class"], fp["source"], fp["group"]) == ("allow", None, "journal", "site:POST /api/queries")
    assert "unsafe_method" in fp["features"] and "sqli" not in fp["features"]
    assert (tp["label"], tp["attack_class"], tp["features"][0]) == ("block", "sqli", "sqli")
    f = record_features(fp)  # the redacted request, as training will read it
    assert "s3cr3t" not in json.dumps(f.headers) and "select name from users" in f.text


def test_marks_and_labelled_requests_are_imported_once(journal):
    lines = [json.dumps({"id": "fp", "label": "origin"}),
             json.dumps({"method": "POST", "path": "/api/queries", "headers": {"Authorization": "Bearer abc.def.ghi"},
                         "body": "select 1", "label": "origin"}), ""]  # fmt: skip
    assert import_lines(journal, lines) == {"marked": 1, "added": 1, "errors": []}
    assert import_lines(journal, lines) == {"marked": 1, "added": 0, "errors": []}  # the same file again
    added = [e for e in journal.marked() if e["origin"] == "import"]
    assert len(added) == 1 and added[0]["marked"] == "origin" and added[0]["label"] is None
    assert "abc.def" not in json.dumps(added[0]["headers"])
    assert journal.get("fp")["marked"] == "origin"


def test_a_file_with_a_wrong_line_imports_nothing(journal):
    lines = [json.dumps({"id": "fp", "label": "allow"}), json.dumps({"id": "nope", "label": "allow"}),
             json.dumps({"id": "tp", "label": "deny"}), "{not json", json.dumps(["x"])]  # fmt: skip
    result = import_lines(journal, lines)
    assert result["marked"] == 0 and len(result["errors"]) == 4
    assert any("unknown id nope" in e for e in result["errors"]) and any("line 3" in e for e in result["errors"])
    assert journal.marked() == []
