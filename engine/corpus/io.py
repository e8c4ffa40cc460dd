"""Corpus records on disk: one JSON object per line, and the way back to `Features`.

A record is a request plus its labels:

    {"method", "path", "query", "headers": [[name, value], ...], "body" | "body_b64",
     "label", "attack_class", "features", "source", "group", "gen", "split"}

`body` holds text bodies; a body that is not valid UTF-8 (an uploaded image) is stored as `body_b64`
instead, so every byte survives the round trip. Labels and feature tags always come from
`engine.labels.label` applied to the request as `Features.build` reads it back.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Iterator

from engine.features import Features
from engine.labels import label as policy_label

FIELDS = ("method", "path", "query", "headers", "body", "label", "attack_class", "features", "source",
          "group", "gen", "split")  # fmt: skip


def make_record(
    method: str,
    path: str,
    query: str,
    headers: list[tuple[str, str]],
    body: bytes | str,
    attack_class: str | None,
    *,
    source: str,
    group: str,
    gen: str,
    split: str,
    attack: bool | None = None,
) -> dict[str, Any]:
    """A labelled record. `attack` defaults to "has an attack class"; CSIC's unclassified anomalies pass
    attack=True with attack_class "unknown"."""
    is_attack = attack_class is not None if attack is None else attack
    feats = Features.build(method=method, path=path, query=query, headers=headers, body=body)
    lab, tags = policy_label(feats, [attack_class] if is_attack else None)
    rec: dict[str, Any] = {
        "method": feats.method,
        "path": feats.path,
        "query": feats.query,
        "headers": [[k, v] for k, v in feats.headers],
    }
    try:
        rec["body"] = feats.body.decode("utf-8")
    except UnicodeDecodeError:
        rec["body_b64"] = base64.b64encode(feats.body).decode("ascii")
    rec.update(label=lab, attack_class=attack_class if is_attack else None, features=list(tags),
               source=source, group=group, gen=gen, split=split)  # fmt: skip
    return rec


def dumps(rec: dict[str, Any]) -> str:
    # ensure_ascii keeps lone surrogates and control bytes representable; the file stays valid UTF-8
    return json.dumps(rec, ensure_ascii=True, separators=(",", ":"))


def record_body(rec: dict[str, Any]) -> bytes:
    if "body_b64" in rec:
        return base64.b64decode(rec["body_b64"])
    return (rec.get("body") or "").encode("utf-8", "surrogatepass")


def record_features(rec: dict[str, Any]) -> Features:
    """The request of a corpus record, exactly as training and evaluation must read it."""
    return Features.build(
        method=rec["method"],
        path=rec["path"],
        query=rec.get("query") or "",
        headers=[(k, v) for k, v in rec.get("headers") or ()],
        body=record_body(rec),
    )


def read_records(path: str) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def from_draft(draft, attack_class: str | None, *, source: str, group: str, gen: str, split: str,
               attack: bool | None = None) -> dict[str, Any]:  # fmt: skip
    """Render an engine.corpus.draft.Draft and label it."""
    method, path, query, headers, body = draft.render()
    return make_record(method, path, query, headers, body, attack_class, source=source, group=group, gen=gen,
                       split=split, attack=attack)  # fmt: skip
