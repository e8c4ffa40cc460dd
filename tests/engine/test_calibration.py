"""engine.train.calibration (benign requests from other builds, held out of a run as its dev split is) and the
commands that read them: `python -m engine.train --calibration` and `python -m engine.train.recalibrate`."""

from __future__ import annotations

import json
import random

import pytest

from engine.train.calibration import (
    CalibrationError,
    fingerprint,
    group_key,
    in_dev,
    load,
    make,
)
from engine.train.calibration import main as calibration_main
from tests.factories import labelled_record


def corpus_with_families(folder, seed: int, n: int = 1200) -> list[dict]:
    """`folder/train.jsonl`: labelled records in template groups t0..t59 and, every third, generator families
    (`gen:…`, which the mixed dev split draws record by record), as a build with `seed` would render them."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        r = labelled_record(rng, i % 4 == 0)
        r["group"] = f"gen:fam{i % 5}" if i % 3 == 0 else f"t{rng.randint(0, 59)}"
        rows.append(r)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "summary.json").write_text(json.dumps({"seed": seed}))
    return rows


def test_in_dev_is_the_training_run_s_dev_split():
    from engine.train.__main__ import split_dev

    rows = [{"group": f"gen:f{i % 3}" if i % 2 else f"t{i % 97}", "i": i} for i in range(3000)]
    for how in ("mixed", "groups"):
        for seed in (1, 2):
            _, dev = split_dev(rows, 0.05, seed, how)
            assert [r["i"] for r in dev] == [i for i, r in enumerate(rows) if in_dev(group_key(r), i, seed, how)]
            assert dev  # the check compares something


def test_calibration_requests_are_benign_held_out_and_new(tmp_path):
    corpus = tmp_path / "corpus"
    train_rows = corpus_with_families(corpus, 1)
    builds = [tmp_path / f"build-{s}" for s in (2, 3)]
    build_rows = [corpus_with_families(b, s) for b, s in zip(builds, (2, 3))]
    # a build repeats one of the corpus's own requests in a held-out position: it must not be kept
    held = next(i for i, r in enumerate(build_rows[0]) if r["label"] != "block" and in_dev(group_key(r), i, 1, "mixed"))
    benign = next(r for r in train_rows if r["label"] != "block")
    repeated = {**benign, "group": build_rows[0][held]["group"]}
    build_rows[0][held] = repeated
    # and a generator family the corpus does not have (a build made with other flags): not the run's traffic
    stranger = next(i for i, r in enumerate(build_rows[1]) if r["label"] != "block" and in_dev(group_key(r), i, 1, "mixed")
                    and not r["group"].startswith("gen:"))  # fmt: skip
    new_group = next(g for g in (f"gen:new{k}" for k in range(1000)) if in_dev(g, stranger, 1, "mixed"))
    build_rows[1][stranger] = {**build_rows[1][stranger], "group": new_group}
    for b, rows in zip(builds, build_rows):
        (b / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    out = corpus / "calibration.jsonl"
    record = make(corpus, builds, 1, "mixed", out, log=lambda _: None)
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["requests"] == len(kept) > 20
    trained_groups = {group_key(r) for i, r in enumerate(train_rows) if not in_dev(group_key(r), i, 1, "mixed")}
    train_prints = {fingerprint(r) for r in train_rows}
    assert all(r["label"] != "block" for r in kept)
    assert not {r["group"] for r in kept if not r["group"].startswith("gen:")} & trained_groups
    assert any(r["group"].startswith("gen:") for r in kept) and any(not r["group"].startswith("gen:") for r in kept)
    assert not {fingerprint(r) for r in kept} & train_prints
    assert len({fingerprint(r) for r in kept}) == len(kept)  # none twice, across builds too
    assert record["builds"][0]["repeats a request"] >= 1 and [b["seed"] for b in record["builds"]] == [2, 3]
    assert record["builds"][1]["generator family not in the corpus"] == 1 and new_group not in {r["group"] for r in kept}
    # what it kept is exactly the builds' held-out benign requests minus repeats
    expect, seen = [], set(train_prints)
    for rows in build_rows:
        for i, r in enumerate(rows):
            if r["label"] != "block" and in_dev(group_key(r), i, 1, "mixed") and fingerprint(r) not in seen and r["group"] != new_group:
                seen.add(fingerprint(r))
                expect.append(r)
    assert kept == expect

    records, rec = load(out, record["train_sha256"], 1, "mixed")
    assert records == kept and rec == record


def test_calibration_made_for_another_run_is_refused(tmp_path):
    corpus = tmp_path / "corpus"
    corpus_with_families(corpus, 1)
    corpus_with_families(tmp_path / "build", 2)
    out = corpus / "calibration.jsonl"
    record = make(corpus, [tmp_path / "build"], 1, "mixed", out, log=lambda _: None)
    sha = record["train_sha256"]
    with pytest.raises(CalibrationError, match="seed 1, the run's 2"):
        load(out, sha, 2, "mixed")  # another seed holds out other groups: these may be its training requests
    with pytest.raises(CalibrationError, match="dev_split"):
        load(out, sha, 1, "groups")
    with pytest.raises(CalibrationError, match="train_sha256"):
        load(out, "0" * 64, 1, "mixed")
    out.write_text(out.read_text() + out.read_text().splitlines()[0] + "\n")
    with pytest.raises(CalibrationError, match="changed after it was made"):
        load(out, sha, 1, "mixed")
    (corpus / "calibration.json").unlink()
    with pytest.raises(CalibrationError, match="cannot read the calibration record"):
        load(out, sha, 1, "mixed")


def test_a_fixed_threshold_is_kept_with_the_dev_figures_at_it_and_the_quantile_beside_it(monkeypatch):
    import numpy as np

    from engine.train import calibrate
    from engine.train.data import Encoded

    n = 1000  # 900 benign scored 0 to 0.9 (the 0.1 % quantile lies just above the highest), 100 attacks at 0.8
    scores = np.r_[np.linspace(0.0, 0.9, 900), np.full(100, 0.8)].astype(np.float32)
    probs = np.zeros((n, 4), dtype=np.float32)
    probs[:, calibrate.BLOCK], probs[:, 1] = scores, 1 - scores
    labels = np.array([1] * 900 + [calibrate.BLOCK] * 100)
    dev = Encoded([np.ones(3, dtype=np.int32)] * n, labels, np.zeros((n, 3), dtype=np.float32), [""] * n,
                  cut=np.zeros(n, dtype=bool))  # fmt: skip
    alone = []
    monkeypatch.setattr(calibrate, "alone_scorer", lambda model, data, window: lambda i: alone.append(i) or probs[i])
    ruled = np.zeros(n, dtype=bool)
    said = []

    quantile, _, none = calibrate.set_threshold("m.onnx", 64, dev, probs, ruled, 0.001, log=said.append)
    assert none is None and 0.9 < quantile < 0.9001
    alone.clear()
    threshold, union, record = calibrate.set_threshold("m.onnx", 64, dev, probs, ruled, 0.001, log=said.append, fixed=0.75)
    assert threshold == 0.75
    assert record == {"fixed": {"block": 0.75, "calibrated": calibrate.stored(quantile), "target_fpr": 0.001}}
    # the dev figures are the number's: every attack (0.8) blocked, the benign requests from 0.75 up (150 of 900) too
    basis = calibrate.threshold_basis(probs, labels, dev.groups, 0.001, ruled)  # on the quantile's requests, not the number's
    assert union == {**calibrate.figures(probs, labels, 0.75, ruled), "rules": calibrate.rules_id(), "threshold_basis": basis}
    assert basis == {"benign_top": 1, "groups": 1, "largest_group": "", "largest_group_requests": 1, "one_family": False}
    assert union["tpr"] == 1.0 and abs(union["fpr"] - 150 / 900) < 0.002
    assert any(abs(scores[i] - 0.75) < 0.01 for i in alone)  # the rows near the number were scored alone
    assert "fixed at 0.75" in said[-1]


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.2", "high"])
def test_a_block_threshold_outside_0_and_1_is_refused(value, capsys):
    from engine.train.recalibrate import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--bundle", "b", "--corpus", "c", "--out", "o", "--block-threshold", value])
    assert "--block-threshold" in capsys.readouterr().err


def test_the_command_refuses_a_missing_build_and_the_corpus_itself(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus_with_families(corpus, 1)
    assert calibration_main(["--corpus", str(corpus), "--builds", str(tmp_path / "nowhere")]) == 2
    assert "not found" in capsys.readouterr().err
    assert calibration_main(["--corpus", str(corpus), "--builds", str(corpus)]) == 2
    assert "the corpus itself" in capsys.readouterr().err
    broken = tmp_path / "broken"
    corpus_with_families(broken, 2)
    (broken / "train.jsonl").write_text((broken / "train.jsonl").read_text() + '{"method": "GET", "pa\n')
    assert calibration_main(["--corpus", str(corpus), "--builds", str(broken)]) == 2
    assert f"error: {broken / 'train.jsonl'} is not a corpus file" in capsys.readouterr().err
    assert not list(corpus.glob("calibration.*"))  # nothing half-written
    assert not (corpus / "calibration.jsonl").exists()


@pytest.mark.slow
def test_training_and_recalibrating_set_the_same_threshold_on_the_calibration_requests(tmp_path, capsys):
    pytest.importorskip("torch")
    from engine import bundle as bundles
    from engine.train.__main__ import main as train_main
    from engine.train.calibrate import rules_id
    from engine.train.recalibrate import main as recalibrate_main
    from rules.engine import RuleEngine
    from tests.factories import TINY_TRAINING

    corpus = tmp_path / "corpus"
    corpus_with_families(corpus, 1, n=900)
    rng = random.Random(5)
    (corpus / "test.jsonl").write_text("".join(json.dumps(labelled_record(rng, i % 2 == 0)) + "\n" for i in range(60)))
    corpus_with_families(tmp_path / "build", 2, n=900)
    calibration = corpus / "calibration.jsonl"
    assert calibration_main(["--corpus", str(corpus), "--builds", str(tmp_path / "build")]) == 0
    n_extra = len(calibration.read_text().splitlines())
    assert n_extra > 10

    assert train_main(["--corpus", str(corpus), "--out", str(tmp_path / "plain"), *TINY_TRAINING]) == 0
    assert train_main(["--corpus", str(corpus), "--out", str(tmp_path / "cal"), *TINY_TRAINING, "--calibration", str(calibration)]) == 0
    plain, cal = bundles.load(tmp_path / "plain"), bundles.load(tmp_path / "cal")
    assert "calibration" not in plain.manifest
    # a --calibration run's record of its canonical texts names the calibration requests' too (read or computed)
    assert set(cal.manifest["trained_on"]["canonical_texts"]) == {"train", "dev", "calibration"}
    rec = cal.manifest["calibration"]
    assert rec["extra"]["requests"] == n_extra and rec["extra"]["builds"] == [2]
    assert rec["benign_requests"] == rec["dev_benign"] + n_extra and rec["dev_benign"] > 0
    # the calibration requests change only the threshold: the same weights, graph and dev figures at 0.5
    assert cal.model_path.read_bytes() == plain.model_path.read_bytes()
    assert cal.manifest["quantization"] == plain.manifest["quantization"]

    # recalibrating the plain bundle sets the threshold the run with --calibration set
    out = tmp_path / "recal"
    assert recalibrate_main(["--bundle", str(plain.path), "--corpus", str(corpus), "--calibration", str(calibration),
                             "--out", str(out), "--threads", "1", "--version", "9.9.9"]) == 0  # fmt: skip
    recal = bundles.load(out)  # sha256 verified
    assert recal.id == "clef-default@9.9.9" and recal.model_path.read_bytes() == plain.model_path.read_bytes()
    assert recal.thresholds["block"] == cal.thresholds["block"]
    assert recal.manifest["dev_with_rules"] == cal.manifest["dev_with_rules"]
    assert {k: v for k, v in recal.manifest["calibration"].items() if k != "recalibrated_from"} == rec
    assert recal.manifest["calibration"]["recalibrated_from"] == {"id": plain.id, "block": plain.thresholds["block"],
                                                                  "rules": rules_id()}  # fmt: skip
    assert recal.manifest["trained_on"] == plain.manifest["trained_on"] and "test" in recal.manifest["eval"]
    assert plain.manifest["dev_with_rules"]["rules"] == rules_id() == RuleEngine.load().model
    basis = plain.manifest["dev_with_rules"]["threshold_basis"]  # which dev families the threshold rests on
    assert 1 <= basis["largest_group_requests"] <= basis["benign_top"] and 1 <= basis["groups"] <= basis["benign_top"]

    # without --calibration: the threshold the run set on its dev split beside the same rules (after a rules change,
    # the one it would set beside the new ones)
    out = tmp_path / "again"
    assert recalibrate_main(["--bundle", str(plain.path), "--corpus", str(corpus), "--out", str(out), "--threads", "1"]) == 0
    again = bundles.load(out)
    assert again.id == plain.id and again.model_path.read_bytes() == plain.model_path.read_bytes()
    assert again.thresholds["block"] == plain.thresholds["block"]
    assert again.manifest["dev_with_rules"] == plain.manifest["dev_with_rules"]
    assert again.manifest["calibration"] == {"recalibrated_from": {"id": plain.id, "block": plain.thresholds["block"],
                                                                   "rules": rules_id()}}  # fmt: skip

    # --block-threshold: the number itself, the dev split's own threshold recorded beside it, the dev figures at it
    out = tmp_path / "fixed"
    assert recalibrate_main(["--bundle", str(plain.path), "--corpus", str(corpus), "--out", str(out), "--threads", "1",
                             "--block-threshold", "0.7"]) == 0  # fmt: skip
    fixed = bundles.load(out)
    assert fixed.thresholds["block"] == 0.7 and fixed.model_path.read_bytes() == plain.model_path.read_bytes()
    assert fixed.manifest["calibration"]["fixed"] == {"block": 0.7, "calibrated": plain.thresholds["block"], "target_fpr": 0.001}
    assert fixed.manifest["dev_with_rules"]["threshold"] == 0.7
    assert "fixed by --block-threshold" in capsys.readouterr().out
    # the same from training: the same weights and graph, the number as the threshold, the same record and dev figures
    assert train_main(["--corpus", str(corpus), "--out", str(tmp_path / "trained"), *TINY_TRAINING, "--block-threshold", "0.7"]) == 0
    trained = bundles.load(tmp_path / "trained")
    assert trained.model_path.read_bytes() == plain.model_path.read_bytes() and trained.thresholds["block"] == 0.7
    assert trained.manifest["calibration"] == {"fixed": fixed.manifest["calibration"]["fixed"]}
    assert trained.manifest["dev_with_rules"] == fixed.manifest["dev_with_rules"]

    # calibration requests made for another seed's dev split are refused before anything is written
    other = tmp_path / "other.jsonl"
    assert calibration_main(["--corpus", str(corpus), "--builds", str(tmp_path / "build"), "--seed", "2", "--out", str(other)]) == 0
    capsys.readouterr()
    assert recalibrate_main(["--bundle", str(plain.path), "--corpus", str(corpus), "--calibration", str(other),
                             "--out", str(tmp_path / "bad")]) == 2  # fmt: skip
    assert (tmp_path / "other.json").is_file()  # its record beside it, not over the corpus's calibration.json
    assert "made for another run" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    assert train_main(["--corpus", str(corpus), "--out", str(tmp_path / "bad"), *TINY_TRAINING, "--calibration", str(other)]) == 2
    assert "made for another run" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_the_threshold_reads_the_calibration_requests_beside_the_dev_split(monkeypatch):
    import numpy as np

    from engine.train import calibrate
    from engine.train.data import Encoded

    def encoded(labels: list[int]) -> Encoded:
        n = len(labels)
        return Encoded([np.ones(3, dtype=np.int32)] * n, np.array(labels), np.zeros((n, 3), dtype=np.float32), [""] * n,
                       cut=np.zeros(n, dtype=bool))  # fmt: skip

    def probs(block: list[float]) -> np.ndarray:
        out = np.zeros((len(block), 4), dtype=np.float32)
        out[:, calibrate.BLOCK] = block
        out[:, 1] = 1 - np.asarray(block)
        return out

    # dev: 600 benign scored at most 0.6, 100 attacks at 0.97; calibration: 1,400 benign, of which 3 score 0.95 and
    # 20 score 0.99 but are blocked by the rules anyway
    dev = encoded([1] * 600 + [calibrate.BLOCK] * 100)
    dev_probs = probs(list(np.linspace(0.0, 0.6, 600)) + [0.97] * 100)
    extra_scores = [0.1] * 1377 + [0.95] * 3 + [0.99] * 20
    extra = calibrate.Extra(encoded([1] * 1400), np.array([False] * 1380 + [True] * 20), {"sha256": "s", "builds": [{"seed": 2}]})
    monkeypatch.setattr(calibrate, "score_onnx", lambda model, data, window: probs(extra_scores))
    monkeypatch.setattr(calibrate, "alone_scorer", lambda model, data, window: lambda i: np.r_[dev_probs, probs(extra_scores)][i])

    alone_dev, union_dev, none = calibrate.set_threshold("m.onnx", 64, dev, dev_probs, np.zeros(700, dtype=bool), 0.001)
    assert none is None and 0.6 < alone_dev < 0.601  # the dev split alone: above its highest benign score
    threshold, union, record = calibrate.set_threshold("m.onnx", 64, dev, dev_probs, np.zeros(700, dtype=bool), 0.001, extra)
    # 2,000 benign requests allow 2 model blocks: the third-highest score the rules let through (0.95) must pass
    assert 0.95 < threshold < 0.951
    assert union == {**calibrate.figures(dev_probs, dev.labels, threshold, np.zeros(700, dtype=bool)),  # dev rows only
                     "rules": calibrate.rules_id(),
                     # 0.1 % of all 2,000 benign requests and the one at the cut; unnamed groups are no family
                     "threshold_basis": {"benign_top": 3, "groups": 1, "largest_group": "", "largest_group_requests": 3,
                                         "one_family": False}}  # fmt: skip
    assert union["tpr"] == 1.0 and union["fpr"] == 0.0
    assert record == {"benign_requests": 2000, "dev_benign": 600,
                      "extra": {"requests": 1400, "sha256": "s", "builds": [2], "blocked_by_rules": 20, "blocked_by_model_only": 0}}  # fmt: skip
