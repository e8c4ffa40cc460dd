"""engine/train/finetune.py before any training: what it refuses, and how it splits and samples.
(The whole loop, training included, is tests/gateway/test_feedback_loop.py.)"""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")

from engine import bundle as bundles  # noqa: E402
from engine.features import Features  # noqa: E402
from engine.journal import Journal  # noqa: E402
from engine.journal_writer import Entry, JournalSettings, row  # noqa: E402
from engine.train import weights  # noqa: E402
from engine.train.finetune import routing_after, sample_lines, split_site  # noqa: E402
from engine.train.net import ClefNet, vocab_size  # noqa: E402
from engine.verdict import Source, Verdict  # noqa: E402
from gateway import cli  # noqa: E402


@pytest.fixture
def base(tmp_path):
    """The packaged bundle's files with (small, untrained) weights beside them: enough to reach the checks."""
    src, out = bundles.load(), tmp_path / "base"
    out.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copyfile(src.path / name, out / name)
    weights.save(ClefNet(vocab_size(src.manifest["architecture"]), 4, len(src.features), d=8, window=16, ffn=8), out)
    bundles.write_manifest(out, {k: v for k, v in src.manifest.items() if k != "sha256"})
    return out


@pytest.fixture
def journal(tmp_path):
    path = tmp_path / "journal.db"
    with Journal(path) as j:
        j.insert([row(Entry("q1", 1.0, Features.build("POST", "/api/queries", body="select 1"),
                            Verdict("block", 0.9, (), Source.MODEL, "x@1")), JournalSettings("x"))])  # fmt: skip
    return path


def train(capsys, *argv) -> tuple[int, str]:
    code = cli.main(["train", *map(str, argv)])
    return code, capsys.readouterr().err


def test_refusals_say_what_to_do(base, journal, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no work/corpus here
    out = tmp_path / "site-v2"
    code, err = train(capsys, "--from-bundle", base, "--feedback", journal, "--out", out)
    assert code == 2 and "no marked examples" in err and "feedback mark" in err
    with Journal(journal) as j:
        j.mark(["q1"], "origin")
    code, err = train(capsys, "--from-bundle", base, "--feedback", journal, "--out", out)
    assert code == 2 and "--corpus" in err and "licences" in err
    code, err = train(capsys, "--from-bundle", base, "--feedback", journal, "--out", out, "--corpus", tmp_path / "nope")
    assert code == 2 and "nope/train.jsonl does not exist" in err
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "train.jsonl").write_text("{}\n")
    code, err = train(capsys, "--from-bundle", base, "--feedback", journal, "--out", out, "--corpus", tmp_path / "c")
    assert code == 2 and "test.jsonl does not exist" in err and "--test" in err
    code, err = train(capsys, "--from-bundle", base, "--feedback", tmp_path / "absent.db", "--out", out)
    assert code == 2 and "no such file" in err
    out.mkdir()
    code, err = train(capsys, "--from-bundle", base, "--feedback", journal, "--out", out)
    assert code == 2 and "never overwritten" in err


def test_a_bundle_without_weights_is_refused(tmp_path, journal, capsys):
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("model.onnx", "tokenizer.json", "bundle.json"):
        shutil.copyfile(bundles.load().path / name, plain / name)
    code, err = train(capsys, "--from-bundle", plain, "--feedback", journal, "--out", tmp_path / "o")
    assert code == 2 and "has no weights.pt" in err and "python -m engine.train" in err


def _mark(id: str, label: str, q: str) -> dict:
    return {"id": id, "label": label, "method": "GET", "path": "/search", "query": q, "body": ""}


def test_site_marks_are_held_out_by_label():
    marks = [_mark(f"b{i}", "origin", f"q=mug+{i}") for i in range(9)] + [_mark("a0", "block", "q=1'--"),
                                                                             _mark("a1", "block", "q=2'--")]  # fmt: skip
    train_, held, apart = split_site(marks, seed=1)
    assert apart and sorted(r["label"] for r in held) == ["block", "origin", "origin"]
    assert not {r["id"] for r in train_} & {r["id"] for r in held} and len(train_) + len(held) == 11
    assert split_site(marks, seed=1) == (train_, held, apart)  # the same split every run
    renamed = [{**r, "id": "x" + r["id"]} for r in marks]  # the same requests under other ids: the same split
    assert [r["query"] for r in split_site(renamed, seed=1)[1]] == [r["query"] for r in held]
    single = [_mark("x", "allow", "q=1")]
    assert split_site(single, seed=1) == (single, single, False)  # nothing to hold out: the gate says so


def test_a_mark_that_routes_otherwise_than_the_policy_hands_routing_to_the_model():
    blocked_search = [_mark("b0", "allow", "q=mugs"), _mark("a0", "block", "q=1'--")]  # the policy's own route
    assert routing_after("policy", blocked_search) == "policy"
    assert routing_after("model", blocked_search) == "model"  # a base whose head routes keeps it
    assert routing_after("policy", blocked_search + [_mark("b1", "origin", "q=mugs")]) == "model"  # the site's word


def test_a_request_marked_twice_falls_on_one_side():
    """Held-out marks must not be copies of training ones, or the gate reads what the fine-tune learned."""
    marks = [_mark(f"b{i}", "origin", f"q=mug+{i % 4}") for i in range(12)]  # 4 requests, each marked 3 times
    train_, held, apart = split_site(marks, seed=1)
    assert apart and len(held) == 3 and len({r["query"] for r in held}) == 1
    assert not {r["query"] for r in train_} & {r["query"] for r in held}


def test_replay_samples_are_even_and_repeatable(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(1000)))
    a, b = sample_lines(path, 100, seed=3), sample_lines(path, 100, seed=3)
    assert a == b and len(a) == 100 and len({r["n"] for r in a}) == 100
    assert 300 < sum(r["n"] for r in a) / 100 < 700  # drawn from the whole file, not its head
    assert len(sample_lines(path, 5000, seed=3)) == 1000
