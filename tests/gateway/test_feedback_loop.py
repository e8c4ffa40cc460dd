"""The whole loop on a small site, with real parts: a `clef-gateway serve` process, its SQLite journal,
the feedback and train commands, real bundles, SIGHUP.

The site is a BI tool whose users save SQL queries (POST /api/queries {"name", "sql"}): benign, and
blocked by a model that only ever saw SQL in attacks. The clef-default bundle blocks such requests too
(tests/sitecorpus.py), but it cannot be fine-tuned until it carries its weights, and a test must not
depend on which default is installed; so the "default" here is a tiny bundle trained in seconds on a
tiny corpus (attacks in queries and JSON bodies, ordinary benign traffic), the way the training command
trains one. Then:

1. the site's requests are blocked (403) and journaled, each under the id of its access-log line;
2. the operator lists them (`feedback list`) and marks them `origin` (`feedback mark`);
3. `clef-gateway train` fine-tunes the base on them with a replay of the corpus; the gate accepts it:
   the corpus's held-out attack TPR within 0.2 point, the held-out site examples no longer blocked;
4. shadow: the new bundle decides beside the live one (model.shadow_bundle, SIGHUP); the live one still
   blocks, the metrics count the disagreement;
5. promotion (model.bundle, SIGHUP): the site passes, an attack is still blocked; rollback the same way.

The process is real, so the test waits for what it does (log lines, journal rows, metrics) by polling,
briefly; nothing waits for time to pass.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
import yaml

from engine import bundle as bundles
from engine.errors import BundleError
from engine.journal import Journal
from gateway import cli
from tests.gateway.serving import Serving, until
from tests.sitecorpus import SITE_SQL, journal_site_marked, site_request, train_base, write_corpus

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

ATTACK = "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--"


def write_config(path: Path, origin: str, journal: Path, bundle: Path, shadow: Path | None = None) -> None:
    doc = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "origin": {"url": origin}, "workers": 1,
           "shutdown": {"grace_s": 5}, "headers": {"echo": True},
           "model": {"bundle": str(bundle), "shadow_bundle": str(shadow) if shadow else None},
           "journal": {"path": str(journal), "sample_blocked": 1.0, "sample_other": 0.0}}  # fmt: skip
    path.write_text(yaml.safe_dump(doc))


async def site(session: aiohttp.ClientSession, gw: Serving, i: int) -> aiohttp.ClientResponse:
    method, path, headers, body = site_request(i)
    async with session.request(method, gw.proxy + path, headers=headers, data=body) as resp:
        await resp.read()
        return resp


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny corpus and the tiny "default" bundle trained on it (about ten seconds)."""
    folder = tmp_path_factory.mktemp("site")
    corpus = write_corpus(folder / "corpus")
    return corpus, train_base(corpus, folder / "base")


async def test_journal_feedback_retrain_shadow_promote_rollback(trained, serve, upstream, tmp_path, capsys):
    corpus, base = trained
    journal, config, new = tmp_path / "journal.db", tmp_path / "gateway.yaml", tmp_path / "bundles" / "site-v2"
    write_config(config, upstream.url, journal, base)
    gw = await serve(config)
    n = len(SITE_SQL)
    async with aiohttp.ClientSession() as s:
        # 1. blocked and journaled, under the ids of the access-log lines
        assert [(await site(s, gw, i)).status for i in range(n)] == [403] * n
        await until(lambda: len(gw.access_lines("/api/queries")) == n)
        ids = [line["id"] for line in gw.access_lines("/api/queries")]
        await until(lambda: journal.exists() and len(Journal(journal).entries(path_prefix="/api/queries")) == n)

        # 2. the operator reviews them and marks them
        assert cli.main(["feedback", "list", "--journal", str(journal), "--label", "block", "--path-prefix", "/api/"]) == 0
        listed = capsys.readouterr().out
        assert all(i in listed for i in ids) and f"({n} shown)" in listed
        assert cli.main(["feedback", "mark", *ids, "--label", "origin", "--journal", str(journal)]) == 0
        capsys.readouterr()

        # 3. fine-tune from the base, gated. The marks are split by what was requested, not by the journal's ids
        # (random each run), so the same four are held out every run: SITE_SQL 3, 5, 10 and 11. When the split went
        # by id the test failed now and then: of 24 random splits, 4 held out SITE_SQL[14] (BETWEEN ... AND name
        # LIKE 'mug%'), and in one of them the candidate still blocked it (0.51 at 0.5; 0.20 and 0.21 in two others)
        argv = ["train", "--from-bundle", str(base), "--feedback", str(journal), "--out", str(new), "--corpus",
                str(corpus), "--minutes", "1", "--threads", "1", "--epochs", "15", "--lr", "2e-3", "--int8", "dynamic"]  # fmt: skip
        assert await asyncio.to_thread(cli.main, argv) == 0, capsys.readouterr()
        report = json.loads((new / "bundle.json").read_text())["gate"]
        assert report["accepted"] and report["held_out"]["tpr_drop"] <= 0.002
        assert json.loads((new / "bundle.json").read_text())["routing"] == "policy"  # the marks route as the policy does
        assert report["held_out"]["base"]["attacks"] == 120 and report["site"]["held_out"]
        assert report["site"]["base"]["false_positives"] == report["site"]["benign"] > 0
        assert report["site"]["candidate"]["false_positives"] == 0 and report["site"]["rules_block"] == 0
        assert "gate: ACCEPTED" in capsys.readouterr().out
        new_id = report["candidate"]

        # 4. shadow: the new bundle decides beside the live one, which still blocks
        write_config(config, upstream.url, journal, base, shadow=new)
        await gw.reload(2)
        assert [(await site(s, gw, i)).status for i in range(4)] == [403] * 4

        async def shadowed() -> str:
            return await (await s.get(gw.admin + "/metrics")).text()

        metrics = ""
        while 'clef_shadow_agreement_total{live="block",shadow="origin"} 4.0' not in metrics:  # polled: a real process
            metrics = await asyncio.wait_for(shadowed(), 10)
            await asyncio.sleep(0.05)

        # 5. promotion: the site passes on the new bundle, attacks are still blocked; then rollback
        write_config(config, upstream.url, journal, new)
        await gw.reload(3)
        responses = [await site(s, gw, i) for i in range(n)]
        assert [r.status for r in responses] == [200] * n
        assert {r.headers["x-clef-model"] for r in responses} == {new_id}
        assert upstream.hits("/api/queries") == n
        assert (await s.get(gw.proxy + ATTACK)).status == 403
        write_config(config, upstream.url, journal, base)
        await gw.reload(4)
        assert (await site(s, gw, 0)).status == 403


def test_a_bundle_the_gate_rejects_is_kept_apart_and_never_served(trained, tmp_path, capsys):
    corpus, base = trained
    journal = tmp_path / "journal.db"
    journal_site_marked(journal, base)
    out = tmp_path / "site-v2"
    argv = ["train", "--from-bundle", str(base), "--feedback", str(journal), "--out", str(out), "--corpus", str(corpus),
            "--threads", "1", "--epochs", "0.05", "--int8", "dynamic"]  # fmt: skip  (a step or two: the site's blocks stay)
    assert cli.main(argv) == 1
    assert "gate: REJECTED: the site's false positives did not fall" in capsys.readouterr().out
    assert not out.exists() and (tmp_path / "site-v2.rejected" / "model.onnx").is_file()
    with pytest.raises(BundleError, match="rejected by the fine-tuning gate"):
        bundles.load(tmp_path / "site-v2.rejected")
    assert bundles.load(tmp_path / "site-v2.rejected", allow_rejected=True).manifest["gate"]["accepted"] is False
