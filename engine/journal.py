"""The decision journal: a bounded SQLite store of sampled decisions, for review, feedback and retraining.

One row per journaled request: its id (the access-log line carries the same), when, the request's parts
as the engine saw them, redacted (method, path, query, headers, a body prefix: engine/redact.py), its
canonical text (redacted the same way), the decision (label, confidence, feature tags, source, model),
the shadow model's decision when one ran, and the operator's verdict once marked (`marked`: the label
the request deserved). Rows the gateway did not decide (imported examples) have no decision.

Writes come from one thread (engine/journal_writer.py) in batches; the CLI and the admin API read and
mark through their own connections. WAL mode lets them, and several gateway processes, share the file.
Retention (`prune`) drops the oldest unmarked rows beyond `max_rows` and unmarked rows older than
`max_age_days`; marked rows are the operator's work and stay until deleted by hand.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from engine.verdict import LABELS

SCHEMA_VERSION = 1
COLUMNS = ("id", "ts", "method", "path", "query", "headers", "body", "body_size", "truncated", "canonical",
           "label", "confidence", "features", "source", "model", "shadow_label", "shadow_confidence",
           "shadow_model", "marked", "marked_at", "origin")  # fmt: skip
DEFAULTS = {"query": "", "headers": [], "body": b"", "truncated": False, "origin": "gateway"}
SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY,            -- insertion order: what max_rows keeps the newest of
    id TEXT NOT NULL UNIQUE,            -- the request id, as in the access log
    ts REAL NOT NULL,                   -- unix time of the decision
    method TEXT NOT NULL, path TEXT NOT NULL, query TEXT NOT NULL,
    headers TEXT NOT NULL,              -- JSON [[name, value], ...], redacted
    body BLOB NOT NULL,                 -- a prefix (journal.max_body_bytes), redacted
    body_size INTEGER,                  -- the whole body's size when known
    truncated INTEGER NOT NULL DEFAULT 0,
    canonical TEXT NOT NULL,            -- what the model read, redacted the same way
    label TEXT, confidence REAL, features TEXT, source TEXT, model TEXT,
    shadow_label TEXT, shadow_confidence REAL, shadow_model TEXT,
    marked TEXT, marked_at REAL,        -- the operator's label, once given
    origin TEXT NOT NULL DEFAULT 'gateway'  -- gateway | import
);
CREATE INDEX IF NOT EXISTS decisions_ts ON decisions (ts);
CREATE INDEX IF NOT EXISTS decisions_label ON decisions (label, ts);
CREATE INDEX IF NOT EXISTS decisions_marked ON decisions (marked) WHERE marked IS NOT NULL;
"""


class JournalError(Exception):
    """The journal cannot be opened or used; the message names the file."""


class Journal:
    def __init__(self, path: str | Path, clock: Callable[[], float] | None = None, create: bool = True):
        self.path = Path(path)
        self.clock = clock or time.time
        if not create and not self.path.is_file():
            raise JournalError(f"journal {self.path}: no such file (is journal.path set where the gateway runs?)")
        try:
            # autocommit off, one transaction per call; a writer in another process waits up to 5 s for the lock
            self.db = sqlite3.connect(str(self.path), timeout=5.0, check_same_thread=False)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise JournalError(f"journal {self.path}: written by a newer version (schema {version})")
            with self.db:
                self.db.executescript(SCHEMA)
                self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.Error as err:
            raise JournalError(f"journal {self.path}: cannot open ({err})") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def insert(self, rows: Iterable[dict[str, Any]]) -> int:
        """Rows as dicts of COLUMNS (missing ones null); a row whose id is already there is skipped."""
        values = [tuple(_sql(r.get(c, DEFAULTS.get(c))) for c in COLUMNS) for r in rows]
        marks = ", ".join("?" * len(COLUMNS))
        sql = f"INSERT INTO decisions ({', '.join(COLUMNS)}) VALUES ({marks}) ON CONFLICT (id) DO NOTHING"
        with self.db:
            cur = self.db.executemany(sql, values)
        return cur.rowcount

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM decisions").fetchone()[0]

    def entries(
        self, label: str | None = None, feature: str | None = None, path_prefix: str | None = None,
        since: float | None = None, marked: bool | None = None, limit: int = 50,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """The newest entries first, filtered by decision label, feature tag, path prefix, time, marked."""
        where, args = [], []
        if label:
            where.append("label = ?")
            args.append(label)
        if feature:
            where.append("EXISTS (SELECT 1 FROM json_each(decisions.features) WHERE value = ?)")
            args.append(feature)
        if path_prefix:
            where.append("substr(path, 1, ?) = ?")  # not LIKE: a path's % and _ are not wildcards
            args += [len(path_prefix), path_prefix]
        if since is not None:
            where.append("ts >= ?")
            args.append(since)
        if marked is not None:
            where.append("marked IS NOT NULL" if marked else "marked IS NULL")
        sql = "SELECT * FROM decisions" + (" WHERE " + " AND ".join(where) if where else "")
        rows = self.db.execute(sql + " ORDER BY seq DESC LIMIT ?", (*args, max(0, limit))).fetchall()
        return [_entry(r) for r in rows]

    def get(self, id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM decisions WHERE id = ?", (id,)).fetchone()
        return _entry(row) if row else None

    def mark(self, ids: Iterable[str], label: str | None = None) -> dict[str, str]:
        """Set the operator's label on each id (`None`: the decision was right, its own label). Returns
        id → label; raises KeyError naming the ids that are not in the journal or have no decision to
        confirm, and marks none of them then."""
        if label is not None and label not in LABELS:
            raise ValueError(f"label must be one of {', '.join(LABELS)}, got {label!r}")
        ids = list(dict.fromkeys(ids))
        done: dict[str, str] = {}
        with self.db:
            for id in ids:
                row = self.db.execute("SELECT label FROM decisions WHERE id = ?", (id,)).fetchone()
                want = (label or row["label"]) if row else None
                if want is not None:
                    done[id] = want
            missing = [i for i in ids if i not in done]
            if missing:
                raise KeyError(", ".join(missing))
            now = self.clock()
            self.db.executemany("UPDATE decisions SET marked = ?, marked_at = ? WHERE id = ?",
                                [(lab, now, id) for id, lab in done.items()])  # fmt: skip
        return done

    def marked(self) -> list[dict[str, Any]]:
        """Every marked row, oldest first, with its request parts (what export and retraining read)."""
        rows = self.db.execute("SELECT * FROM decisions WHERE marked IS NOT NULL ORDER BY seq").fetchall()
        return [_entry(r, parts=True) for r in rows]

    def prune(self, max_rows: int, max_age_days: float) -> int:
        """Drop unmarked rows older than max_age_days, then the oldest unmarked beyond max_rows in all."""
        with self.db:
            old = self.db.execute("DELETE FROM decisions WHERE marked IS NULL AND ts < ?",
                                  (self.clock() - max_age_days * 86400.0,)).rowcount  # fmt: skip
            over = self.count() - max_rows
            if over > 0:
                over = self.db.execute(
                    "DELETE FROM decisions WHERE seq IN (SELECT seq FROM decisions WHERE marked IS NULL "
                    "ORDER BY seq LIMIT ?)", (over,)).rowcount  # fmt: skip
        return old + max(0, over)


def _sql(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, bool):
        return int(value)
    return value


def _entry(row: sqlite3.Row, parts: bool = False) -> dict[str, Any]:
    """A row as JSON-ready values; the body and headers only with `parts` (listing does not need them)."""
    out = {k: row[k] for k in ("id", "ts", "method", "path", "label", "confidence", "source", "model",
                               "shadow_label", "shadow_confidence", "shadow_model", "marked", "origin")}  # fmt: skip
    out["features"] = json.loads(row["features"]) if row["features"] else []
    out["canonical"] = row["canonical"]
    if parts:
        out.update(query=row["query"], headers=json.loads(row["headers"]), body=bytes(row["body"]),
                   body_size=row["body_size"], truncated=bool(row["truncated"]))  # fmt: skip
    return out
