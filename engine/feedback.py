"""Feedback: the operator's verdicts on journaled decisions, in and out of the journal.

`export(journal)` turns every marked row into a record of the corpus schema (engine/corpus/io.py): the
redacted request, the marked label, its feature tags (the decision's attack tags when a block was
confirmed, the labelling policy's routing tags otherwise), `source: "journal"`, and `group` naming the
endpoint, so a site's examples can be held out by endpoint like the corpus's. That is what fine-tuning
(engine/train/finetune.py) reads, and what `clef-gateway feedback export` writes.

`import_lines(journal, lines)` reads JSON lines of two shapes: `{"id": ..., "label": ...}` marks a row the
gateway journaled; a request record with a `label` (method, path, query, headers, body or body_b64: the
corpus schema) is added as a new marked row, redacted like the gateway's, its id derived from its content
so importing a file twice adds nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, Iterable

from engine import redact
from engine.corpus.io import make_record
from engine.features import Features
from engine.journal import Journal
from engine.labels import ATTACK_FEATURES, CLASS_FEATURE
from engine.verdict import LABELS

FEATURE_CLASS = {tag: cls for cls, tag in CLASS_FEATURE.items() if tag and cls not in ("code_injection",)}


def to_record(row: dict[str, Any]) -> dict[str, Any]:
    """A marked journal row (Journal.marked()) → a corpus record."""
    label = row["marked"]
    attack_class = None
    if label == "block":
        tags = [t for t in row.get("features") or () if t in ATTACK_FEATURES] if row.get("label") == "block" else []
        attack_class = FEATURE_CLASS.get(tags[0], "unknown") if tags else "unknown"
    endpoint = f"{row['method']} {row['path'].split('?')[0]}"
    rec = make_record(row["method"], row["path"], row.get("query") or "", [tuple(h) for h in row["headers"]],
                      row["body"], attack_class, source="journal", group=f"site:{endpoint}", gen="feedback",
                      split="site", attack=label == "block")  # fmt: skip
    rec["label"] = label  # the operator's word stands, even where the policy would route it otherwise
    rec["id"] = row["id"]
    return rec


def export(journal: Journal) -> list[dict[str, Any]]:
    return [to_record(r) for r in journal.marked()]


def import_lines(journal: Journal, lines: Iterable[str], fields: Iterable[str] = redact.DEFAULT_FIELDS) -> dict:
    """Apply a JSONL file of marks and labelled requests. Returns counts and the errors by line number;
    nothing is written when any line is wrong (the file is fixed and imported again)."""
    marks: dict[str, list[str]] = {}
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            label = doc.get("label") if isinstance(doc, dict) else None
            if label not in LABELS:
                raise ValueError(f"label must be one of {', '.join(LABELS)}, got {label!r}")
            if "method" in doc or "path" in doc:
                rows.append(_row(doc, label, tuple(fields), journal.clock()))
            elif isinstance(doc.get("id"), str):
                marks.setdefault(label, []).append(doc["id"])
            else:
                raise ValueError('expected {"id", "label"} or a request record with a label')
        except (ValueError, TypeError, AttributeError, KeyError) as err:
            errors.append(f"line {n}: {err}")
    known = {i for ids in marks.values() for i in ids if journal.get(i) is not None}
    errors += [f"unknown id {i}" for ids in marks.values() for i in ids if i not in known]
    if errors:
        return {"marked": 0, "added": 0, "errors": errors}
    added = journal.insert(rows)
    marked = sum(len(journal.mark(ids, label)) for label, ids in marks.items())
    return {"marked": marked, "added": added, "errors": []}


def _row(doc: dict[str, Any], label: str, fields: tuple[str, ...], now: float) -> dict[str, Any]:
    body = base64.b64decode(doc["body_b64"]) if doc.get("body_b64") else doc.get("body") or ""
    headers = doc.get("headers") or []
    items = headers.items() if isinstance(headers, dict) else headers
    f = Features.build(doc.get("method") or "GET", doc.get("path") or "/", doc.get("query") or "",
                       [(str(k), str(v)) for k, v in items], body)  # fmt: skip
    clean = redact.request(f, fields)
    digest = hashlib.blake2b(json.dumps([f.method, f.path, f.query, f.headers, f.body.hex(), label]).encode(),
                             digest_size=8).hexdigest()  # fmt: skip
    return {"id": f"imp-{digest}", "ts": now, "method": f.method, "path": f.path, "query": clean.query,
            "headers": [list(h) for h in clean.headers], "body": clean.body, "body_size": f.body_size,
            "canonical": redact.canonical(f.text, fields), "marked": label, "marked_at": now,
            "origin": "import"}  # fmt: skip
