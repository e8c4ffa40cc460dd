"""engine/journal.py and engine/journal_writer.py on a real SQLite file: what a row holds, redaction,
filters, marks, retention, and a writer that drops rather than makes a request wait."""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest

from engine import redact
from engine.features import Features
from engine.journal import Journal, JournalError
from engine.journal_writer import Entry, JournalSettings, JournalWriter, row
from engine.verdict import Source, Verdict
from tests.factories import FakeClock

DAY = 86400.0
SQLI = Features.build("GET", "/search", "q=1%27%20OR%201%3D1--&password=hunter2hunter2",
                      [("Cookie", "sid=abc123abc123abc123abc123abc1"), ("User-Agent", "curl/8")])  # fmt: skip
BLOCK = Verdict("block", 0.97, ("sqli",), Source.MODEL, "clef@1")
ALLOW = Verdict("allow", 0.9, (), Source.MODEL, "clef@1")


def entry(id: str, features: Features = SQLI, verdict: Verdict = BLOCK, ts: float = 1000.0, shadow=None) -> Entry:
    return Entry(id, ts, features, verdict, shadow)


@pytest.fixture
def writer(tmp_path, clock):
    w = JournalWriter(JournalSettings(str(tmp_path / "journal.db")), clock=clock)
    yield w
    w.close()


def test_a_row_holds_the_redacted_request_its_canonical_text_and_the_decision(writer, tmp_path):
    shadow = Verdict("allow", 0.8, (), Source.MODEL, "site@2")
    assert writer.submit(entry("r1", shadow=shadow))
    writer.flush()
    with Journal(tmp_path / "journal.db") as j:
        e = j.get("r1")
        assert e["label"] == "block" and e["features"] == ["sqli"] and e["model"] == "clef@1"
        assert (e["shadow_label"], e["shadow_model"]) == ("allow", "site@2")
        assert e["canonical"] == redact.canonical(SQLI.text) and "hunter2" not in e["canonical"]
        raw = j.db.execute("SELECT query, headers FROM decisions WHERE id = 'r1'").fetchone()
        assert "hunter2" not in raw["query"] and "abc123" not in raw["headers"] and "1%27%20OR" in raw["query"]
    assert (writer.written, writer.dropped, writer.failed) == (1, 0, 0)


def test_the_body_is_redacted_whole_then_cut():
    body = json.dumps({"password": "hunter2hunter2", "text": "x" * 5000})
    f = Features.build("POST", "/api/users", headers=[("Content-Type", "application/json")], body=body)
    r = row(entry("b", f), JournalSettings("unused", max_body_bytes=100))
    assert len(r["body"]) == 100 and b"hunter2" not in r["body"] and r["truncated"]
    assert r["body_size"] == len(body)


def test_a_full_queue_drops_and_counts_instead_of_waiting(tmp_path):
    w = JournalWriter(JournalSettings(str(tmp_path / "j.db"), max_queue=2))
    entered, release = threading.Event(), threading.Event()
    insert = w.journal.insert

    def held(rows):
        entered.set()
        release.wait(30)
        return insert(rows)

    w.journal.insert = held
    try:
        assert w.submit(entry("a"))
        assert entered.wait(30)  # the thread holds "a"; the queue is empty again
        assert w.submit(entry("b")) and w.submit(entry("c"))
        assert not w.submit(entry("d")) and w.dropped == 1 and w.queued == 2
    finally:
        release.set()
        w.flush()
        w.close()
    assert (w.written, w.dropped) == (3, 1)


def test_bodies_held_in_the_queue_are_bounded_too(tmp_path):
    w = JournalWriter(JournalSettings(str(tmp_path / "j.db"), max_queue_bytes=10))
    big = Features.build("POST", "/upload", body=b"x" * 11)
    assert not w.submit(entry("big", big)) and w.dropped == 1
    w.close()


def test_filters_and_newest_first(tmp_path, clock):
    with Journal(tmp_path / "j.db", clock=clock) as j:
        settings = JournalSettings("unused")
        feats = [SQLI, Features.build("GET", "/api/items"), Features.build("POST", "/api%5Fx/y")]
        rows = [row(entry(f"r{i}", feats[i % 3], BLOCK if i % 3 == 0 else ALLOW, ts=1000.0 + i), settings) for i in range(9)]
        assert j.insert(rows) == 9 and j.insert(rows[:1]) == 0  # an id is journaled once
        assert [e["id"] for e in j.entries(label="block")] == ["r6", "r3", "r0"]
        assert [e["id"] for e in j.entries(feature="sqli", limit=2)] == ["r6", "r3"]
        assert [e["id"] for e in j.entries(path_prefix="/api/")] == ["r7", "r4", "r1"]
        assert [e["id"] for e in j.entries(path_prefix="/api%5F")] == ["r8", "r5", "r2"]  # no LIKE wildcards
        assert [e["id"] for e in j.entries(since=1007.0)] == ["r8", "r7"]
        j.mark(["r1"], "origin")
        assert [e["id"] for e in j.entries(marked=True)] == ["r1"] and len(j.entries(marked=False)) == 8


def test_marks_set_a_label_or_confirm_the_decision_and_refuse_unknown_ids(tmp_path, clock):
    with Journal(tmp_path / "j.db", clock=clock) as j:
        j.insert([row(entry("a"), JournalSettings("x")), row(entry("b", verdict=ALLOW), JournalSettings("x"))])
        assert j.mark(["a", "a"], "allow") == {"a": "allow"}
        assert j.mark(["b"]) == {"b": "allow"}  # --correct: the decision was right
        with pytest.raises(KeyError, match="nope"):
            j.mark(["b", "nope"], "block")
        assert j.get("b")["marked"] == "allow"  # nothing marked by a refused call
        with pytest.raises(ValueError):
            j.mark(["a"], "deny")
        (first, second) = j.marked()
        assert first["id"] == "a" and first["body"] == b"" and first["headers"][0][0] == "Cookie"


def test_retention_drops_old_and_surplus_rows_but_keeps_marked_ones(tmp_path, clock):
    with Journal(tmp_path / "j.db", clock=clock) as j:
        settings = JournalSettings("x")
        j.insert([row(entry(f"r{i}", ts=clock() - (40 - i) * DAY), settings) for i in range(20)])  # 40..21 days old
        j.insert([row(entry(f"n{i}", ts=clock()), settings) for i in range(10)])
        j.mark(["r0"], "allow")
        assert j.prune(max_rows=1000, max_age_days=30) == 9  # r1..r9 (over 30 days), not the marked r0
        assert j.prune(max_rows=12, max_age_days=30) == 9  # the oldest unmarked beyond 12 in all: r10..r18
        ids = {e["id"] for e in j.entries(limit=100)}
        assert ids == {"r0", "r19", *(f"n{i}" for i in range(10))}


def test_a_journal_from_a_newer_version_or_an_unusable_path_is_refused(tmp_path):
    db = sqlite3.connect(tmp_path / "new.db")
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(JournalError, match="newer version"):
        Journal(tmp_path / "new.db")
    with pytest.raises(JournalError, match="cannot open"):
        Journal(tmp_path / "missing" / "j.db")
    with pytest.raises(JournalError, match="no such file"):
        Journal(tmp_path / "absent.db", create=False)


def test_writer_prunes_on_its_own_every_so_many_rows(tmp_path):
    clock = FakeClock(100 * DAY)
    w = JournalWriter(JournalSettings(str(tmp_path / "j.db"), max_rows=5), clock=clock, prune_every=10)
    for i in range(10):
        w.submit(entry(f"r{i}", ts=clock()))
    w.flush()
    assert w.journal.count() == 5
    w.close()
