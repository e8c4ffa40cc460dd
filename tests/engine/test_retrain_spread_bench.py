"""bench/retrain_spread.py: retrained bundles against the default, read off bench/roc.py's served results."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.factories import bench_script

spread = bench_script("retrain_spread")


def served(tpr_at_fp: float, rates: dict[str, float], own_tpr: float, own_fp: int, at_first=None) -> dict:
    """A bench/roc.py --served entry: 10,000 benign requests, served TPRs at the first bundle's 67 false
    positives, at fixed rates, at the bundle's own threshold and (for a draw) at the first bundle's threshold."""
    s = {"rules_benign": 45, "rules_attacks": 900,
         "own": {"threshold": 0.95, "tpr": own_tpr, "fp": own_fp, "fpr": own_fp / 10000},
         "at_fpr": {rate: {"threshold": 0.9, "tpr": tpr, "fp": 1, "fpr": 0.001} for rate, tpr in rates.items()},
         "at_first_fp": {"threshold": 0.95, "tpr": tpr_at_fp, "fp": 67, "fpr": 0.0067, "matched_fp": 67}}  # fmt: skip
    if at_first is not None:
        s["at_first_threshold"] = {"threshold": 0.95, "tpr": at_first[0], "fp": at_first[1], "fpr": at_first[1] / 10000}
    return s


def roc_file(path, draw: dict, bundle="clef-default@9.9.1", ref_bundle="clef-default@9.9.0", data="test.jsonl"):
    ref = {"bundle": ref_bundle, "data": data, "attacks": 1000, "benign": 10000,
           "served": served(0.975, {"0.2%": 0.970, "1%": 0.984}, 0.975, 67)}  # fmt: skip
    path.write_text(json.dumps([ref, {"bundle": bundle, "data": data, "attacks": 1000, "benign": 10000, "served": draw}]))
    return path


def test_the_deltas_and_the_clause_are_read_per_rate(tmp_path, capsys):
    near = roc_file(tmp_path / "near.json", served(0.972, {"0.2%": 0.968, "1%": 0.990}, 0.96, 50, at_first=(0.974, 70)))
    far = roc_file(tmp_path / "far.json", served(0.969, {"0.2%": 0.962, "1%": 0.985}, 0.96, 50, at_first=(0.976, 75)))
    hot = roc_file(tmp_path / "hot.json", served(0.975, {"0.2%": 0.970, "1%": 0.984}, 0.96, 50, at_first=(0.975, 73)))
    out = tmp_path / "out"
    assert spread.main(["--roc", f"near={near}", "--roc", f"far={far}", "--roc", f"hot={hot}", "--out", str(out)]) == 0
    res = json.loads((out / "spread.json").read_text())
    near_row, far_row, hot_row = res["draws"]
    assert near_row["tpr"] == {"67 FP": -0.3, "0.2%": -0.2, "1%": 0.6}  # a gain of 0.6 is not outside the clause
    assert near_row["at_reference_threshold"] == {"threshold": 0.95, "tpr": -0.1, "fp": 3, "fpr": 0.03}
    assert near_row["verdict"]["holds"] and near_row["verdict"]["worst"] == -0.3
    assert far_row["verdict"] == {"holds": False, "tpr_short": {"67 FP": -0.6, "0.2%": -0.8}, "fpr_over": True, "worst": -0.8}
    assert hot_row["verdict"]["fpr_over"] and not hot_row["verdict"]["tpr_short"]  # 6 more FP of 10,000: 0.06 point
    assert res["held"] == 1 and res["per_rate"]["0.2%"] == {"mean": -0.33, "sd": 0.42, "min": -0.8, "max": 0.0}
    if importlib.util.find_spec("matplotlib") is None:  # the chart needs the bench extra; the figures do not
        assert "matplotlib not installed" in capsys.readouterr().err and not (out / "spread.png").exists()
    else:
        assert (out / "spread.png").stat().st_size > 1000


def test_files_with_another_reference_or_not_served_are_refused(tmp_path, capsys):
    ok = roc_file(tmp_path / "ok.json", served(0.972, {"0.2%": 0.968, "1%": 0.990}, 0.96, 50))
    other = roc_file(tmp_path / "other.json", served(0.972, {"0.2%": 0.968, "1%": 0.990}, 0.96, 50), ref_bundle="clef-default@9.8.0")
    split = roc_file(tmp_path / "split.json", served(0.972, {"0.2%": 0.968, "1%": 0.990}, 0.96, 50))
    runs = json.loads(split.read_text())
    runs[0]["served"]["own"]["fp"] = 68  # another split, or other rules beside the reference
    split.write_text(json.dumps(runs))
    renamed = roc_file(tmp_path / "renamed.json", served(0.972, {"0.2%": 0.968, "1%": 0.990}, 0.96, 50), data="old/test.jsonl")
    assert spread.main(["--roc", f"a={ok}", "--roc", f"b={renamed}", "--out", str(tmp_path / "r")]) == 0
    assert "note: b read old/test.jsonl" in capsys.readouterr().out
    model_only = tmp_path / "model.json"
    model_only.write_text(json.dumps([{"bundle": "a"}, {"bundle": "b"}]))
    for bad, said in ((other, "reference's bundle"), (split, "its reference serves otherwise"), (model_only, "not a served run")):
        assert spread.main(["--roc", f"a={ok}", "--roc", f"b={bad}", "--out", str(tmp_path / "o")]) == 2
        assert said in capsys.readouterr().err
    assert spread.main(["--roc", str(ok), "--out", str(tmp_path / "o")]) == 2
    assert "expected LABEL=FILE" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("rates", [{"0.2%": 0.968}, {"0.2%": 0.968, "1%": 0.990}])
def test_a_rate_one_file_lacks_is_left_out_of_the_summary(tmp_path, rates):
    a = roc_file(tmp_path / "a.json", served(0.972, {"0.2%": 0.968, "1%": 0.990}, 0.96, 50))
    b = roc_file(tmp_path / "b.json", served(0.972, rates, 0.96, 50))
    assert spread.main(["--roc", f"a={a}", "--roc", f"b={b}", "--out", str(tmp_path / "o")]) == 0
    res = json.loads((tmp_path / "o" / "spread.json").read_text())
    assert set(res["per_rate"]) == {"67 FP", *rates}
    assert "at_reference_threshold" not in res["draws"][0]  # an older file without the column
