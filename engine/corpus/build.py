"""The corpus build: data → groups and splits → attack, request-log and benign records → evasion set →
shuffled JSONL files and a summary.

    python -m engine.corpus --data ../shared/data --out work/corpus [--seed 1] [--scale 1.0] [--lookalikes] [--image-uploads] [--xml-values]

The same seed and scale give the same bytes. Held-out groups do not depend on the seed (engine.corpus.split).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from engine.corpus import attacks, benign, csic, evasion, plan, scanners, sources, split, summary, synth
from engine.corpus.io import dumps
from engine.corpus.pools import build_pools
from engine.corpus.rand import Rng

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def split_attacks(recs: list[dict]) -> set[str]:
    """Test groups of the payload records, per class; generated templates held out more sparingly."""
    test: set[str] = set()
    for generated in (False, True):
        part = [r for r in recs if (r["source"] == "generated") == generated]
        for cls, groups in split.by_class(part, lambda r: (r["attack_class"], r["group"])).items():
            test |= split.choose_test(groups, split.GENERATED_FRACTION if generated else split.TEST_FRACTION)
    return test


def attack_records(rng: Rng, pools, name: str, by_cls: dict[str, list[dict]], scale: float, notes: list[str],
                   extra: dict[str, tuple[list[dict], float]] | None = None) -> Iterable[dict]:
    """Each class's target of requests over its payload records; then, for a class in `extra` (class → records and
    a share), that share of the class's target again over those records, from streams of their own, so the
    class's other requests are those of the build without them."""
    for cls, n in plan.targets(name, scale).items():
        recs = by_cls.get(cls, [])
        if not recs:
            notes.append(f"{name}: no {cls} payloads")
            continue
        yield from _embedded(rng, "", pools, name, recs, cls, n)
        if extra and cls in extra:
            more, share = extra[cls]
            yield from _embedded(rng, "-extra", pools, name, more, cls, max(1, round(n * share)))


def _embedded(rng: Rng, stream: str, pools, name: str, recs: list[dict], cls: str, n: int) -> Iterable[dict]:
    picked = plan.schedule(rng.child("schedule" + stream, cls), recs, n, plan.MAX_REPEAT if name == "train" else plan.MAX_REPEAT // 2)
    crng = rng.child("embed" + stream, cls)
    for rec in picked:
        out = attacks.attack_record(crng.child(), pools, name, rec)
        if out is not None:
            yield out


@dataclass
class Prepared:
    """Everything the generators draw from, already grouped and split."""

    attacks: dict[str, dict[str, list[dict]]]  # split → class → payload records
    logs: list[dict]  # CSIC records kept
    apache: list[dict]
    log_test: set[str]  # test groups of both request logs
    pools: dict[str, Any]  # split → Pools
    probes: dict[str, dict]  # split → scanner keyword entries
    notes: list[str] = field(default_factory=list)
    extra: dict[str, tuple[list[dict], float]] = field(default_factory=dict)  # training: class → records on top, share


def prepare(data: sources.Data) -> Prepared:
    notes: list[str] = []
    dropped: dict[str, int] = {}
    kept = []
    for rec in data.attacks:
        why = plan.usable(rec)
        if why:
            dropped[why] = dropped.get(why, 0) + 1
        else:
            kept.append(rec)
    notes += [f"dropped {n} payload records: {why}" for why, n in dropped.items()]
    split.assign_groups(kept)
    test_groups = split_attacks(kept)
    by_split: dict[str, dict[str, list[dict]]] = {"train": {}, "test": {}}
    for rec in kept:
        by_split["test" if rec["group"] in test_groups else "train"].setdefault(rec["attack_class"], []).append(rec)
    logs, csic_stats = csic.prepare_csic(data.csic)
    notes.append("CSIC 2010: {normal} normal kept, {attack_kept} anomalous kept with a clear attack indicator, "
                 "{anomalous_dropped} anomalous dropped (no clear indicator)".format(**csic_stats))  # fmt: skip
    apache = csic.prepare_apache(data.apache)
    log_test = csic.split_groups(logs) | csic.split_groups(apache)
    pools = build_pools(data.texts, data.api, data.benign_values)
    return Prepared(by_split, logs, apache, log_test, pools, scanners.split_entries(data.keywords), notes)


def add_synthetic(prep: Prepared, seed: int, mode: str = "share") -> None:
    """The grammars' payloads join the training split (never the held-out one). `share`: among the class's payload
    records, so they take requests from the data's own; `extra`: on top, with the requests they would have taken
    (their share of the records), so the data's payloads keep every request of the build without them."""
    if mode not in ("share", "extra"):
        raise ValueError(f"synth_payloads: 'share' or 'extra', got {mode!r}")
    taken = {r["payload"] for by_cls in prep.attacks.values() for recs in by_cls.values() for r in recs}
    real = {cls: len(recs) for cls, recs in prep.attacks["train"].items()}
    held_out = {r["group"] for recs in prep.attacks["test"].values() for r in recs}
    for cls, recs in synth.records(seed, taken, real, held_out).items():
        if mode == "extra":
            prep.extra[cls] = (recs, len(recs) / (len(recs) + real.get(cls, 0)))
        else:
            prep.attacks["train"].setdefault(cls, []).extend(recs)
        prep.notes.append(f"{len(recs)} synthetic {cls} payloads added to the training split ({mode}, engine.corpus.synth)")


def split_parts(prep: Prepared, name: str, rng: Rng, scale: float, lookalikes: bool = False) -> list[tuple[str, Iterable[dict]]]:
    """(what, records) parts of one split, generated lazily in this order."""
    pools = prep.pools[name]

    def mine(recs: list[dict]) -> list[dict]:
        return _subset(rng, [r for r in recs if (r["group"] in prep.log_test) == (name == "test")], scale)

    apache = mine(prep.apache)
    probes = [r for r in apache if r["attack_class"]]
    return [
        ("attack records", attack_records(rng.child("attacks"), pools, name, prep.attacks[name], scale, prep.notes,
                                          prep.extra if name == "train" else None)),
        ("scanner probes from the keyword lists", scanners.generate(rng.child("scanners"), pools, name, prep.probes[name], scale)),
        ("CSIC 2010 records", csic.csic_records(rng.child("csic"), pools, name, mine(prep.logs))),
        ("access-log records", csic.apache_records(rng.child("apache"), pools, name, apache, 1)),
        ("extra access-log scanner copies", csic.apache_records(rng.child("apache-scan"), pools, name, probes, plan.APACHE_SCANNER_REPEAT - 1)),
        ("benign records", benign.generate(rng.child("benign"), pools, name, scale, lookalikes)),
    ]  # fmt: skip


def build(data_dir: str, out_dir: str, seed: int = 1, scale: float = 1.0, log: Log = _stderr, lookalikes: bool = False,
          image_uploads: bool = False, xml_values: bool = False, site_layouts: bool = False, mounts: bool = False,
          legacy_folders: bool = False, oauth_flows: bool = False, bare_clients: bool = False, synth_payloads: bool | str = False) -> dict:
    """Write the corpus files. `lookalikes` adds the generated lookalikes (engine.corpus.lookalikes) to the
    benign side; `image_uploads` makes uploaded images SVG, GIF, ICO and metadata-bearing PNG and JPEG files
    (engine.corpus.images) instead of bare ones, on both sides; `xml_values` puts parameter payloads into XML
    bodies' values too (engine.corpus.xmlvalues); `site_layouts` adds assets in more site layouts and CMS page
    saves to both sides (engine.corpus.scenes_site); `mounts` adds sites served from a folder (/public/, /wordpress/,
    ...) to both sides (scenes_site.mounted); `legacy_folders` adds CGI applications under /cgi-bin/ and sites under
    /site/, /include(s)/ and /components/ (scenes_site.cgi_app, mounted_legacy) to both sides; `oauth_flows` adds
    OAuth 2.0, OpenID Connect and SAML requests with every kind of registered redirect URI to both sides
    (engine.corpus.scenes_auth); `bare_clients` adds requests with no header but Host, or none, or a load generator's
    short set, to both sides (scenes_web.bare, profiles.bare); `synth_payloads` (True or "share", or "extra") adds
    NoSQL, LDAP, SSTI and SSRF payloads written from grammars to the training split only (engine.corpus.synth;
    add_synthetic says how the two modes place them); off, the files are the documented corpus, byte for byte."""
    t0 = time.time()
    data = sources.load(data_dir)
    log(f"[corpus] {data.notes[-1]} ({time.time() - t0:.1f}s)")
    prep = prepare(data)
    for pools in prep.pools.values():
        pools.image_uploads = image_uploads
        pools.xml_values = xml_values
        pools.site_layouts = site_layouts
        pools.mounts = mounts
        pools.legacy_folders = legacy_folders
        pools.oauth_flows = oauth_flows
        pools.bare_clients = bare_clients
    if synth_payloads:
        add_synthetic(prep, seed, "share" if synth_payloads is True else synth_payloads)
    log(f"[corpus] groups and splits ready ({time.time() - t0:.1f}s)")
    os.makedirs(out_dir, exist_ok=True)
    root = Rng(seed, "corpus")
    counts: dict[str, int] = {}
    stats = summary.Stats()
    for name in ("train", "test", "evasion"):
        srng = root.child(name)
        if name == "evasion":
            total = max(1, round(plan.EVASION_TOTAL * scale))
            parts = [("evasion records", evasion.generate(srng, prep.pools["test"], prep.attacks["test"], total))]
        else:
            parts = split_parts(prep, name, srng, scale, lookalikes)
        lines: list[str] = []
        for what, recs in parts:
            t, n0 = time.time(), len(lines)
            for rec in recs:
                stats.add(rec)
                lines.append(dumps(rec))
            log(f"[corpus] {name}: {len(lines) - n0:7d} {what} ({time.time() - t:.1f}s)")
        counts[name] = _write(os.path.join(out_dir, f"{name}.jsonl"), lines, srng.child("shuffle"))
    extra = [f"lookalikes: {sum(benign.LOOKALIKES.values())} benign records per unit of scale (engine.corpus.lookalikes)"] if lookalikes else []
    result = stats.finish(seed=seed, scale=scale, notes=data.notes + prep.notes + extra, counts=counts)
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)
    return result


def _subset(rng: Rng, recs: list[dict], scale: float) -> list[dict]:
    """The request logs are used whole at scale >= 1; a smaller build takes a fixed random part."""
    if scale >= 1.0:
        return recs
    keep = sorted(rng.child("subset", len(recs)).sample(range(len(recs)), max(1, round(len(recs) * scale))))
    return [recs[i] for i in keep]


def _write(path: str, lines: list[str], rng: Rng) -> int:
    rng.shuffle(lines)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")
    os.replace(tmp, path)
    return len(lines)
