"""The admin API's view of the decision journal (journal.path), behind the admin token like the rest:

    GET  /v1/journal?label=&feature=&path_prefix=&since=&marked=&limit=
         → {"entries": [{id, time, method, path, label, confidence, features, source, model,
                         shadow_label, shadow_model, marked, canonical}, ...]}   newest first
    POST /v1/journal/{id}/label   {"label": "allow"} or {"correct": true}   → {"id": ..., "marked": ...}

`since` is a time (2024-05-01, 2024-05-01T12:00, unix seconds) or an age (30m, 2h, 7d). Rows hold no
credential (engine/redact.py), but they do hold what requests carried, so this listener's protection
(loopback, admin.token) is theirs too. 404 when the journal is off or the id is not in it, 422 for a bad
value. SQLite runs in a thread: a slow disk never holds the admin listener's event loop.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import datetime, timezone
from typing import Any, Callable

from aiohttp import web

from engine.journal import Journal, JournalError
from engine.verdict import LABELS
from gateway.errors import NotFound, Unprocessable

MAX_LIMIT = 1000
_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/journal", entries)
    app.router.add_post("/v1/journal/{id}/label", label)


def parse_since(text: str, now: float | None = None) -> float:
    """A time or an age → unix seconds. ValueError with a readable message otherwise."""
    text = text.strip()
    if m := _AGE.match(text):
        return (time.time() if now is None else now) - float(m.group(1)) * _UNITS[m.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"since: expected a time (2024-05-01T12:00) or an age (30m, 2h, 7d), got {text!r}") from None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _path(request: web.Request) -> str:
    from gateway.admin import CONFIG_OF

    settings = request.app[CONFIG_OF]().journal
    if not settings.enabled:
        raise NotFound("the decision journal is off (journal.path)")
    return settings.settings().path


async def _run(path: str, work: Callable[[Journal], Any]) -> Any:
    def call() -> Any:
        with Journal(path, create=False) as j:
            return work(j)

    try:
        return await asyncio.to_thread(call)
    except JournalError as err:
        raise NotFound(str(err)) from None


async def entries(request: web.Request) -> web.Response:
    path, q = _path(request), request.query
    wanted = q.get("label") or None
    if wanted is not None and wanted not in LABELS:
        raise Unprocessable(f"label must be one of {', '.join(LABELS)}, got {wanted!r}")
    try:
        limit = int(q.get("limit", "50"))
        since = parse_since(q["since"]) if q.get("since") else None
    except ValueError as err:
        raise Unprocessable(str(err) if "since" in str(err) else f"limit must be an integer, got {q.get('limit')!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise Unprocessable(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    marked = {"true": True, "false": False, None: None}.get(q.get("marked"), "bad")
    if marked == "bad":
        raise Unprocessable(f"marked must be true or false, got {q.get('marked')!r}")
    rows = await _run(path, lambda j: j.entries(label=wanted, feature=q.get("feature") or None,
                                                 path_prefix=q.get("path_prefix") or None, since=since,
                                                 marked=marked, limit=limit))  # fmt: skip
    for r in rows:
        r["time"] = iso(r.pop("ts"))
    return web.json_response({"entries": rows})


async def label(request: web.Request) -> web.Response:
    from gateway.admin import _json

    path = _path(request)
    doc = await _json(request)
    id = request.match_info["id"]
    if doc.get("correct") is True and "label" not in doc:
        wanted = None
    elif doc.get("label") in LABELS and "correct" not in doc:
        wanted = doc["label"]
    else:
        raise Unprocessable(f'expected {{"label": one of {", ".join(LABELS)}}} or {{"correct": true}}')
    try:
        marked = await _run(path, lambda j: j.mark([id], wanted))
    except KeyError:
        raise NotFound(f"no journal entry {id!r} (or, for correct, no decision to confirm)") from None
    return web.json_response({"id": id, "marked": marked[id]})
