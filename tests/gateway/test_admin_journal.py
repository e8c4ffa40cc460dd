"""gateway/admin_journal.py: the journal over the admin API, filters, marks, errors and the token."""

from __future__ import annotations

import time

import pytest

from engine.features import Features
from engine.journal import Journal
from engine.journal_writer import Entry, JournalSettings, row
from engine.verdict import Source, Verdict
from gateway import admin
from gateway.admin_journal import parse_since
from tests.factories import make_config

TOKEN = "a-token-of-twenty-chars"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def journal_path(tmp_path):
    path = tmp_path / "journal.db"
    now = time.time()
    block = Verdict("block", 0.97, ("sqli",), Source.MODEL, "clef@1")
    allow = Verdict("allow", 0.91, (), Source.MODEL, "clef@1")
    with Journal(path) as j:
        j.insert([row(Entry("old", now - 7200, Features.build("GET", "/search", "q=1'--"), block), JournalSettings("x")),
                  row(Entry("new", now, Features.build("POST", "/api/queries", body="select 1"), block), JournalSettings("x")),
                  row(Entry("ok", now, Features.build("GET", "/api/items"), allow), JournalSettings("x"))])  # fmt: skip
    return path


@pytest.fixture
async def client(aiohttp_client, journal_path):
    config = make_config({"journal": {"path": str(journal_path)}, "admin": {"token": TOKEN}})
    return await aiohttp_client(admin.build(config, lambda: None))


async def test_entries_newest_first_with_filters(client):
    resp = await client.get("/v1/journal", headers=AUTH, params={"label": "block"})
    entries = (await resp.json())["entries"]
    assert resp.status == 200 and [e["id"] for e in entries] == ["new", "old"]
    assert entries[0]["time"].endswith("Z") and entries[0]["features"] == ["sqli"] and "ts" not in entries[0]
    for params, ids in (({"feature": "sqli", "limit": "1"}, ["new"]), ({"path_prefix": "/api/"}, ["ok", "new"]),
                        ({"since": "1h"}, ["ok", "new"]), ({"marked": "true"}, [])):  # fmt: skip
        got = await (await client.get("/v1/journal", headers=AUTH, params=params)).json()
        assert [e["id"] for e in got["entries"]] == ids, params


async def test_marks_and_their_errors(client, journal_path):
    resp = await client.post("/v1/journal/new/label", headers=AUTH, json={"label": "allow"})
    assert resp.status == 200 and await resp.json() == {"id": "new", "marked": "allow"}
    resp = await client.post("/v1/journal/old/label", headers=AUTH, json={"correct": True})
    assert (await resp.json())["marked"] == "block"
    assert (await client.post("/v1/journal/nope/label", headers=AUTH, json={"label": "allow"})).status == 404
    for body in ({"label": "deny"}, {"label": "allow", "correct": True}, {}):
        resp = await client.post("/v1/journal/ok/label", headers=AUTH, json=body)
        assert resp.status == 422 and (await resp.json())["error"]["type"] == "invalid_input"
    with Journal(journal_path) as j:
        assert {e["id"]: e["marked"] for e in j.entries(marked=True)} == {"new": "allow", "old": "block"}


@pytest.mark.parametrize("params", [{"label": "deny"}, {"limit": "0"}, {"limit": "x"}, {"since": "yesterday"},
                                    {"marked": "maybe"}])  # fmt: skip
async def test_bad_filters_answer_422(client, params):
    resp = await client.get("/v1/journal", headers=AUTH, params=params)
    assert resp.status == 422 and (await resp.json())["error"]["type"] == "invalid_input"


async def test_the_token_guards_the_journal(client):
    assert (await client.get("/v1/journal")).status == 401
    assert (await client.post("/v1/journal/new/label", json={"label": "allow"})).status == 401


async def test_a_gateway_without_a_journal_answers_404(aiohttp_client, tmp_path):
    off = await aiohttp_client(admin.build(make_config(), lambda: None))
    resp = await off.get("/v1/journal")
    assert resp.status == 404 and "journal.path" in (await resp.json())["error"]["message"]
    missing = await aiohttp_client(admin.build(make_config({"journal": {"path": str(tmp_path / "none.db")}}), lambda: None))
    assert (await missing.get("/v1/journal")).status == 404  # set, but nothing journaled yet: no file made


def test_since_reads_times_and_ages():
    assert parse_since("2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_since("1.5d", now=200_000.0) == 200_000.0 - 129_600
    assert parse_since("2024-05-01") == 1714521600.0 and parse_since("1714521600") == 1714521600.0
    assert parse_since("2024-05-01T02:00+02:00") == 1714521600.0
    with pytest.raises(ValueError, match="an age"):
        parse_since("last week")
