"""engine/corpus/layouts.py, richtext.py and scenes_site.py (`--site-layouts`): assets outside the folders the
policy names are still assets, page saves carry their editor's document and take a payload in it, and both
appear only when the corpus is built with the flag; `--mounts`: sites served from a folder, under every folder the
scanner probes use too."""

from __future__ import annotations

import functools
import html
import json
import urllib.parse
from collections import Counter

import pytest

from engine.corpus import attacks, benign, layouts, richtext, scanners, session, slots
from engine.corpus.pools import Pools
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, all_scenes
from engine.corpus.scenes_site import CGI_APPS, CGI_SCRIPTS, CMS_FORM, CMS_JSON, CMS_VARIANTS, LEGACY_MOUNTS, MOUNTS, SCANNER_MOUNTS
from engine.corpus.summary import Stats
from engine.features import Features
from engine.labels import STATIC_PREFIXES, is_static, route_label
from rules import RuleEngine

TEXTS = {"prose": [{"text": "Hello there, select one of the options and drop me a line.", "kind": "prose"},
                   {"text": "Les résultats sont publiés chaque lundi à 9 h.", "kind": "prose"}],
         "code": [{"text": "if (a < b && c > d) { return `${a}`; }", "kind": "code"}]}  # fmt: skip
MARK = "<img src=x onerror=alert(7)>"


def features(d) -> Features:
    method, path, query, headers, body = d.render()
    return Features.build(method=method, path=path, query=query, headers=headers, body=body)


def carrier_scenes(flag: str, on: bool, seed: str, n: int) -> Counter:
    """Which scenes n XSS payloads were embedded in, with the pool flag `flag` set to `on`; a page save that
    takes a form payload is one of the editors that post forms."""
    pools, made = Pools("train", texts=TEXTS, **{flag: on}), Counter()
    for i in range(n):
        d, how = attacks.embed_param(Ctx(Rng(seed, i), pools, "train"), MARK, "xss")
        made[d.scene.split("/")[0]] += 1
        if d.scene.startswith("page_save/") and "form/" in how:
            assert d.scene.split("/")[1] in CMS_FORM
    return made


def flagged_scene(scene: str, flag: str, shapes: dict[str, int], seed: str) -> tuple[set[str], list[dict], list[dict], dict[bool, Counter]]:
    """For a scene that the pool flag `flag` adds: its held-out variants (as `gen` names), its training and test
    records (scales 0.02 and 0.1), and the scene families benign.generate draws with the flag off and on (0.002)."""
    held = {f"{scene}/{v}" for v in all_scenes()[scene].held_out()}
    train = list(benign.shape_records(Rng(seed), Pools("train", texts=TEXTS, **{flag: True}), "train", 0.02, shapes))
    test = list(benign.shape_records(Rng(seed), Pools("test", texts=TEXTS, **{flag: True}), "test", 0.1, shapes))
    texts = {kind: [{**t, "source": "t", "group": "text:t"} for t in items] for kind, items in TEXTS.items()}
    gens = {on: Counter(r["gen"].split("/")[0] for r in benign.generate(Rng(seed), Pools("train", texts=texts, **{flag: on}), "train", 0.002))
            for on in (False, True)}  # fmt: skip
    return held, train, test, gens


@pytest.mark.parametrize("layout", layouts.LAYOUTS)
def test_every_layout_serves_files_most_of_them_outside_the_named_folders(layout):
    outside = files = 0
    for i in range(60):
        path, query, dest = layouts.asset(Rng("asset", layout, i), layout)
        assert path.startswith("/") and "//" not in path and " " not in path
        last = path.rsplit("/", 1)[-1]
        if "." in last and not last.endswith(".json"):
            files += 1
            assert is_static(path), path
            assert dest != "empty" or last.endswith((".map", ".wasm")) or "." not in last
            outside += not path.lower().startswith(STATIC_PREFIXES)
    assert files >= 40
    if layout not in ("magento", "laravel", "phoenix", "gatsby", "shopify", "ghost"):  # some of their files sit under /static/, /cdn/, /public/ ...
        assert outside >= 0.8 * files


def test_assets_with_cookies_are_still_cached_and_the_folders_vary():
    pools = Pools("train", texts=TEXTS)
    sc = all_scenes()["asset"]
    labels, firsts = Counter(), set()
    for i in range(400):
        ctx = Ctx(Rng("assets", i), pools)
        d = sc.make(ctx, ctx.rng.pick(sc.usable("train")))
        from engine.corpus import session

        session.dress(ctx.rng, d, [])
        f = features(d)
        label, tags = route_label(f)
        if is_static(f.path) and f.header("cookie") and not f.header("authorization") and "max-age=0" not in f.header("cache-control"):
            labels[label] += 1
        firsts.add(f.path.split("/")[1])
    assert labels["cache"] >= 20 and set(labels) <= {"cache", "origin"}  # origin only for a personalised path or no-cache
    assert len(firsts) >= 40  # the site's own folders, not a handful of known ones


@pytest.mark.parametrize("dialect", richtext.DIALECTS)
def test_documents_are_editor_html_of_about_the_asked_size(dialect):
    w = richtext.Writer(Rng("doc", dialect), Pools("train", texts=TEXTS), dialect, "example.org")
    doc = w.document(3000)
    assert 3000 <= len(doc) < 3000 + 4000
    assert "<p>" in doc or "<p " in doc or "<!-- wp:" in doc or "<h" in doc
    assert "onerror" not in doc and "javascript:" not in doc  # nothing an attack needs is in the benign side's markup
    if dialect == "email":
        assert doc.startswith("<!DOCTYPE html>") and "{{unsubscribe_url}}" in doc
    if dialect == "confluence":
        assert "<ac:structured-macro" in doc


def test_wikitext_and_lexical_read_back():
    w = richtext.Writer(Rng("wiki"), Pools("train", texts=TEXTS), "plain", "example.org")
    wiki = richtext.wikitext(Rng("wiki"), w, 2000)
    assert len(wiki) >= 2000 and ("[[" in wiki or "'''" in wiki or "{|" in wiki)
    tree = json.loads(richtext.lexical(Rng("lex"), w, 1500))
    assert tree["root"]["type"] == "root" and len(tree["root"]["children"]) > 3


@pytest.mark.parametrize("variant", CMS_VARIANTS)
def test_a_page_save_is_an_unsafe_request_whose_focus_holds_the_document_and_takes_a_payload(variant):
    pools = Pools("train", texts=TEXTS)
    sc = all_scenes()["page_save"]
    ctx = Ctx(Rng("save", variant), pools)
    d = sc.make(ctx, variant)
    assert d.scene == f"page_save/{variant}" and d.focus is not None
    assert route_label(features(d))[0] == "origin"
    assert (variant in CMS_FORM) == (d.body.kind == "form") and (variant in CMS_JSON) == (d.body.kind == "json")
    slots.put(ctx.rng, d, d.focus, MARK, splice=True)
    method, path, query, headers, body = d.render()
    text = body if isinstance(body, str) else body.decode()
    read = urllib.parse.unquote_plus(text) if d.body.kind == "form" else json.loads(text)
    assert MARK in (read if isinstance(read, str) else json.dumps(read, ensure_ascii=False).replace("\\\"", '"')), variant
    assert len(html.unescape(text)) > 300  # spliced into the document, not in its place


def test_the_flag_adds_both_scenes_to_both_sides_and_test_uses_only_held_out_variants():
    on = Pools("train", texts=TEXTS, site_layouts=True)
    recs = list(benign.shape_records(Rng("b"), on, "train", 0.002, benign.SITE_SHAPES))
    gens = Counter(r["gen"].split("/")[0] for r in recs)
    assert gens["asset"] >= 10 and gens["page_save"] >= 6
    held = {f"{n}/{v}" for n in ("asset", "page_save") for v in all_scenes()[n].held_out()}
    assert len(held) == 4 and not {r["gen"] for r in recs} & held
    test = list(benign.shape_records(Rng("b"), Pools("test", texts=TEXTS, site_layouts=True), "test", 0.02, benign.SITE_SHAPES))
    assert test and {r["gen"] for r in test} <= held
    made = {flag: carrier_scenes("site_layouts", flag, "pos", 500) for flag in (False, True)}
    assert made[False]["asset"] == made[False]["page_save"] == 0
    assert made[True]["page_save"] >= 10 and made[True]["asset"] >= 2


def test_every_folder_a_probe_is_sent_under_is_also_a_benign_mount_kept_for_training():
    folders = {p.strip("/") for p in scanners.PREFIXES if p.strip("/") and ".." not in p} - {"api"}  # /api/ is benign everywhere already
    assert folders <= set(SCANNER_MOUNTS)
    sc = all_scenes()["mounted"]
    assert set(SCANNER_MOUNTS) <= set(sc.usable("train")) and sc.held_out() and not set(sc.held_out()) & set(SCANNER_MOUNTS)
    assert set(sc.variants) == set(MOUNTS)


@functools.cache
def rules() -> RuleEngine:
    return RuleEngine.load()


def scene_requests(name: str, variant: str, flag: str, seed: str, n: int = 40) -> list[Features]:
    """n dressed requests of one scene variant, built with the pool flag `flag` on; each path has no empty segment."""
    pools, out = Pools("train", texts=TEXTS, **{flag: True}), []
    for i in range(n):
        ctx = Ctx(Rng(seed, variant, i), pools)
        d = all_scenes()[name].make(ctx, variant)
        assert d.scene == f"{name}/{variant}" and "//" not in d.path
        session.dress(ctx.rng, d, [])
        out.append(features(d))
    return out


@pytest.mark.parametrize("folder", MOUNTS)
def test_a_mounted_request_is_another_scenes_request_under_its_folder(folder):
    made = scene_requests("mounted", folder, "mounts", "mount")
    assert all(f.path.startswith(f"/{folder}/") for f in made)
    labels = Counter(route_label(f)[0] for f in made)
    if folder == "public":  # /public/ holds assets: cached, unless the client asked for a fresh copy
        assert labels["cache"] >= 36 and labels["cache"] + labels["origin"] == 40
    else:
        assert labels["cache"] >= 10 and labels["cache"] < 40


def test_the_mounts_flag_adds_them_to_both_sides_and_test_uses_only_held_out_folders():
    recs = list(benign.shape_records(Rng("m"), Pools("train", texts=TEXTS, mounts=True), "train", 0.01, benign.MOUNT_SHAPES))
    assert len(recs) == 30 and all(r["gen"].startswith("mounted/") for r in recs)
    held = {f"mounted/{v}" for v in all_scenes()["mounted"].held_out()}
    assert not {r["gen"] for r in recs} & held
    test = list(benign.shape_records(Rng("m"), Pools("test", texts=TEXTS, mounts=True), "test", 0.05, benign.MOUNT_SHAPES))
    assert test and {r["gen"] for r in test} <= held
    made = {flag: carrier_scenes("mounts", flag, "mpos", 600) for flag in (False, True)}
    assert made[False]["mounted"] == 0 and made[True]["mounted"] >= 3


@pytest.mark.parametrize("app", CGI_APPS)
def test_a_cgi_application_answers_under_cgi_bin_with_plain_values(app):
    made = scene_requests("cgi_app", app, "legacy_folders", "cgi")
    assert all(f.path.startswith("/cgi-bin/") and "<" not in f.query and ".." not in f.path and "|" not in f.query for f in made)
    assert not [f.path for f in made if rules().evaluate(f).label == "block"]  # the default rules let a site's own CGI through
    labels = Counter(route_label(f)[0] for f in made)
    if app != "viewvc":  # dynamic pages: not cached (a ViewVC path ends in the file it shows, as a static path does)
        assert labels["allow"] + labels["origin"] == 40


@pytest.mark.parametrize("variant", CGI_SCRIPTS)
def test_a_cgi_program_of_no_named_application_is_plain_and_passes_the_rules(variant):
    made = scene_requests("cgi_script", variant, "legacy_folders", "cgis")
    assert all(f.path.startswith(("/cgi-bin/", "/cgi/")) and "<" not in f.query and ".." not in f.path for f in made)
    assert not [f.path for f in made if rules().evaluate(f).label == "block"]
    names = {f.path.split("/")[2].split(".")[0] for f in made}  # the program or its folder, without extension
    assert len(names) >= 30 and not names & set(CGI_APPS)  # ordinary words, none of the named applications
    assert sum(not f.query and f.method != "POST" for f in made) >= 5  # a front page or list page asks with no query
    assert Counter(route_label(f)[0] for f in made)["cache"] == 0  # a program's answer is dynamic


def test_the_legacy_folders_flag_trains_every_folder_only_probes_used_and_holds_out_one_application():
    assert all_scenes()["mounted_legacy"].held_out() == () and len(all_scenes()["cgi_app"].held_out()) == 1
    held = f"cgi_app/{all_scenes()['cgi_app'].held_out()[0]}"
    recs = list(benign.shape_records(Rng("l"), Pools("train", texts=TEXTS, legacy_folders=True), "train", 0.02, benign.LEGACY_SHAPES))
    assert len(recs) == 130 and held not in {r["gen"] for r in recs}
    assert {r["gen"] for r in recs if r["gen"].startswith("cgi_script/")} == {f"cgi_script/{v}" for v in CGI_SCRIPTS}
    stats = Stats()
    for r in recs:
        stats.add(r)
    assert {"cgi-bin", *LEGACY_MOUNTS} <= set(stats.folders) and not any(c["attack"] for c in stats.folders.values())
    test = list(benign.shape_records(Rng("l"), Pools("test", texts=TEXTS, legacy_folders=True), "test", 0.1, benign.LEGACY_SHAPES))
    assert test and {r["gen"] for r in test} == {held}
    made = {flag: carrier_scenes("legacy_folders", flag, "lpos", 600) for flag in (False, True)}
    assert made[False]["cgi_app"] == made[False]["mounted_legacy"] == 0
    assert made[True]["cgi_app"] + made[True]["mounted_legacy"] >= 3
