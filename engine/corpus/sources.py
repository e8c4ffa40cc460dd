"""The shared data files, loaded once: payload lists, benign text, API traffic and the two request logs.

Only reading and light normalisation happen here (drop what cannot be used, note why); what becomes a
request is decided by the generators. The data stays in ../shared/data: nothing is copied into the
repository.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

FILES = {
    "payloads": "payloads.jsonl", "extra": "payloads_extra.jsonl", "text": "benign_text.jsonl",
    "api": "benign_api.jsonl", "csic": "requests_csic2010.jsonl", "apache": "requests_apache_access_log.jsonl",
}  # fmt: skip


@dataclass
class Data:
    attacks: list[dict[str, Any]] = field(default_factory=list)  # payloads + payloads_extra, label attack
    benign_values: list[dict[str, Any]] = field(default_factory=list)  # payloads.jsonl benign (params, UAs)
    texts: list[dict[str, Any]] = field(default_factory=list)
    api: list[dict[str, Any]] = field(default_factory=list)
    csic: list[dict[str, Any]] = field(default_factory=list)
    apache: list[dict[str, Any]] = field(default_factory=list)
    keywords: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _jsonl(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _keywords(folder: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if not os.path.isdir(folder):
        return out
    for name in sorted(os.listdir(folder)):
        if name.endswith(".txt"):
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                out[name[:-4]] = [ln.rstrip("\n") for ln in fh if ln.strip()]
    return out


def ssrf_targets(keywords: dict[str, list[str]], known: set[str]) -> list[dict[str, Any]]:
    """The CRS SSRF target lists (metadata endpoints, loopback spellings, internal host names) as `param`
    payloads: cloud-metadata URLs were a class the first model missed (MODEL-NOTES). Entries that are
    prefixes (`http://[::]:`) are completed; entries already in the payload files are skipped."""
    out = []
    for name in ("crs_ssrf", "crs_ssrf-no-scheme"):
        for i, entry in enumerate(keywords.get(name, [])):
            url = entry if "://" in entry else "http://" + entry
            if url.endswith(":"):
                url += ("80", "8080", "2375", "6379")[i % 4] + "/"
            elif url.endswith("-"):
                url += "/"
            if url.endswith("/latest/"):
                url += ("meta-data/", "meta-data/iam/security-credentials/", "user-data", "")[i % 4]
            if url in known:
                continue
            known.add(url)
            out.append({"payload": url, "label": "attack", "attack_class": "ssrf", "context": "param", "source": "crs-keywords",
                        "source_path": f"keywords/{name}.txt", "file": "keywords"})  # fmt: skip
    return out


def load(data_dir: str) -> Data:
    d = Data()
    for key in ("payloads", "extra"):
        for rec in _jsonl(os.path.join(data_dir, FILES[key])):
            rec["file"] = key
            if rec.get("label") == "attack":
                d.attacks.append(rec)
            else:
                d.benign_values.append(rec)
    d.texts = [r for r in _jsonl(os.path.join(data_dir, FILES["text"])) if r.get("text")]
    d.api = _jsonl(os.path.join(data_dir, FILES["api"]))
    d.csic = _jsonl(os.path.join(data_dir, FILES["csic"]))
    d.apache = _jsonl(os.path.join(data_dir, FILES["apache"]))
    d.keywords = _keywords(os.path.join(data_dir, "keywords"))
    d.attacks += ssrf_targets(d.keywords, {r["payload"] for r in d.attacks})
    d.notes.append(f"loaded {len(d.attacks)} attack payloads, {len(d.benign_values)} benign values, {len(d.texts)} texts, "
                   f"{len(d.api)} api records, {len(d.csic)} CSIC and {len(d.apache)} access-log requests")  # fmt: skip
    return d
