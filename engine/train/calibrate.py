"""Measure exported models on the dev split, pick the int8 variant, calibrate the block threshold.

`int8(net, dev, ...)` is the whole step from a trained network to the int8 model a bundle serves: export,
quantise both ways, measure both, keep the better. Training and fine-tuning both call it.

The threshold is set on dev benign requests (held out from training by group, never the test split): the
lowest threshold whose benign false-positive rate stays within the target, never below 0.5. Dev scores come
from batches; those near the threshold are scored again alone (`settled_threshold`), as the gateway scores
them (Model.run_settled), and the threshold is set again on the settled scores.
"""

from __future__ import annotations

import functools
import math
import random
import shutil
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from engine.model import near, open_session
from engine.train.data import Encoded, batches, pad, progress
from engine.verdict import LABELS

BLOCK = LABELS.index("block")


def figures(probs: np.ndarray, labels: np.ndarray, threshold: float, ruled: np.ndarray | None = None) -> dict:
    attack = labels == BLOCK
    blocked = probs[:, BLOCK] >= threshold
    if ruled is not None:
        blocked = blocked | ruled
    tpr = float(blocked[attack].mean()) if attack.any() else 0.0
    fpr = float(blocked[~attack].mean()) if (~attack).any() else 0.0
    routed = ~attack & ~blocked
    rest = probs.copy()
    rest[:, BLOCK] = -1
    routing = float((rest[routed].argmax(1) == labels[routed]).mean()) if routed.any() else 0.0
    return {"tpr": round(tpr, 5), "fpr": round(fpr, 5), "balanced_accuracy": round((tpr + 1 - fpr) / 2, 5),
            "routing_accuracy": round(routing, 5), "threshold": threshold}  # fmt: skip


def score_onnx(sess_or_path, data: Encoded, window: int) -> np.ndarray:
    """Label scores of every row of `data` from the int8 model (a session or a path), in length-grouped batches."""
    sess = open_session(str(sess_or_path), threads=1) if isinstance(sess_or_path, (str, Path)) else sess_or_path
    probs = np.zeros((len(data.ids), len(LABELS)), dtype=np.float32)
    for idx in batches([len(x) for x in data.ids], 65536, window, random.Random(0)):
        probs[idx] = sess.run(None, {"input_ids": pad(data.ids, idx, window)})[0]
    return probs


def measure_onnx(sess, data: Encoded, window: int, probs: np.ndarray) -> dict:
    """A one-thread session's figures on `data` (`probs`: its scores of it, score_onnx) and its median time for a
    typical request, as the gateway runs it (int8 scores both formats at once, then times them one after the other)."""
    typical = [i for i, x in enumerate(data.ids) if len(x) <= 256][:200] or list(range(min(200, len(data.ids))))
    times = []
    for i in typical:
        x = pad(data.ids, [i], window)
        t = time.perf_counter()
        sess.run(None, {"input_ids": x})
        times.append((time.perf_counter() - t) * 1000)
    return {
        "probs": probs,
        "figures": figures(probs, data.labels, 0.5),
        "p50_ms": float(np.median(times)) if times else 0.0,
        "tokens": int(np.median([len(data.ids[i]) for i in typical])) if typical else 0,
    }


def quantization_record(choice: str, measured: dict[str, dict], fp32_dev: dict, layout: str) -> dict:
    """bundle.json's "quantization": the format served, the dynamic model's weight layout when that is the one
    (bundles without it are u8), and the dev figures of every candidate and of fp32."""
    return {"format": choice, **({"layout": layout} if choice == "dynamic" else {}),
            "candidates": {k: m["figures"] for k, m in measured.items()}, "fp32_dev": fp32_dev}  # fmt: skip


PREFERRED = "dynamic"  # no calibration data in the graph; bench/model.py measured it as fast as static or faster
SPEED_MARGIN = 0.2  # another variant must be this much faster to be chosen: one timing on a shared machine is noise


def choose(measured: dict[str, dict], fp32: dict) -> str:
    """Among the variants within 0.5 point of fp32's balanced accuracy: `PREFERRED`, unless another is faster
    by more than SPEED_MARGIN; with none within 0.5 point, the most accurate. The margin keeps a rerun of
    the same command from flipping formats on timing noise (a rerun of 0.3.1's measured 0.56 ms dynamic
    against 0.48 ms static, where the first run had found dynamic the faster)."""
    ok = [k for k, m in measured.items() if m["figures"]["balanced_accuracy"] >= fp32["balanced_accuracy"] - 0.005]
    if not ok:
        return max(measured, key=lambda k: measured[k]["figures"]["balanced_accuracy"])
    fastest = min(ok, key=lambda k: measured[k]["p50_ms"])
    if PREFERRED in ok and measured[fastest]["p50_ms"] > (1 - SPEED_MARGIN) * measured[PREFERRED]["p50_ms"]:
        return PREFERRED
    return fastest


def rules_blocks(records: list[dict], cut: Sequence[bool] | None = None, procs: int = 1) -> np.ndarray:
    """Which records the default rules block: the model serves beside them (engine.decide's ensemble).
    `cut[i]`: record i did not fit the model's token budget (or its verdict says truncated). Where it did, the rules
    read it as their second look at a verdict that is not truncated does (a body over 64 KiB as its fields:
    RuleEngine.scan); without `cut`, as the rules decide alone. `procs` > 1 reads the records in that many worker
    processes (the benchmarks over whole held-out splits)."""
    items = [(r, cut is not None and not cut[i]) for i, r in enumerate(records)]
    if procs <= 1:
        return np.array([_blocked(item) for item in items], dtype=bool)
    from multiprocessing import Pool

    with Pool(procs, initializer=default_rules) as pool:
        return np.array(pool.map(_blocked, items, chunksize=256), dtype=bool)


@functools.cache
def default_rules():
    """The packaged rules, compiled once a process (about 0.9 s): rules_blocks reads every split with them, in this
    process or in each worker, and rules_id names them."""
    from rules.engine import RuleEngine

    return RuleEngine.load()


def rules_id() -> str:
    """The rules that rules_blocks reads (`rules:clef-default@16`): a threshold is set on what they let through, so
    bundle.json's dev_with_rules names them, and a rules change calls for `python -m engine.train.recalibrate`."""
    return default_rules().model


def _blocked(item: tuple[dict, bool]) -> bool:
    """Whether the default rules block one record (`item`: the record, and whether the model read it whole)."""
    from engine.eval import features_of as record_features

    record, whole = item
    f = record_features(record)
    return default_rules().evaluate(f, read_whole=whole and not f.truncated).blocked


CEILING = 0.9999
"""The highest block threshold calibration sets (log-odds 9.2). It was 0.99 (log-odds 4.6) until 2026-12-06, and runs
whose dev split held a family of near-copy benign requests scoring above it (bench/RESULTS.md: 0.12.0, 0.19.0,
0.19.1) got 0.99 while their model still blocked more than the target there: a cap, not a calibration. 0.9999 still
leaves the float32 block score some 1,700 steps of resolution above it (2**-24 apart below 1); a threshold that
reaches it is a cap again, and the run's log says so (`at_ceiling`, settled_threshold)."""


def at_ceiling(threshold: float) -> bool:
    return threshold >= CEILING


def stored(threshold: float) -> float:
    """The threshold as bundle.json keeps it: six decimals, rounded up, so that the stored threshold still lets
    through the benign score it was set just above (rounding to nearest could put it under that score)."""
    return math.ceil(threshold * 1e6 - 1e-9) / 1e6


def block_threshold(probs: np.ndarray, labels: np.ndarray, target_fpr: float, ruled: np.ndarray | None = None) -> float:
    """The lowest block threshold in [0.5, CEILING] at which the model blocks at most `target_fpr` of the benign
    requests. With `ruled` (benign requests the rules block anyway), the model's budget is the target on top of
    the rules' own false positives: only the benign requests the rules let through count against it."""
    idx, allowed = weighed(labels, target_fpr, ruled)
    if len(idx) == 0:
        return 0.5
    return float(min(CEILING, max(0.5, threshold_allowing(probs[idx, BLOCK].astype(np.float32), allowed))))


def weighed(labels: np.ndarray, target_fpr: float, ruled: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """(rows, allowed): the benign requests the block threshold is set on (those the rules let through, when
    `ruled` is given), and how many of them the model may block: `target_fpr` of all the benign requests."""
    benign_mask = labels != BLOCK
    allowed = int(np.floor(target_fpr * int(benign_mask.sum())))
    if ruled is not None:
        benign_mask &= ~ruled
    return np.flatnonzero(benign_mask), allowed


def threshold_basis(probs: np.ndarray, labels: np.ndarray, groups: Sequence[str], target_fpr: float,
                    ruled: np.ndarray | None = None) -> dict:
    """Which dev families the block threshold rests on: the benign requests that `block_threshold` weighs (those
    the rules let through) with the budget's highest scores plus the one that sets the cut, and how many of them
    the largest group holds. When one family holds most of them, a retrain's threshold lands wherever that family's
    scores do: 0.24.1, a second draw of 0.24.0's recipe, scored one OAuth family above 0.997 and set 0.9974
    where 0.24.0 set 0.9297 (bench/RESULTS.md, "A second draw of the three-network bf16 recipe")."""
    idx, allowed = weighed(labels, target_fpr, ruled)
    top = idx[np.argsort(-probs[idx, BLOCK], kind="stable")[: allowed + 1]]
    counts = Counter(groups[i] for i in top)
    group, n = counts.most_common(1)[0] if counts else ("", 0)
    return {"benign_top": len(top), "groups": len(counts), "largest_group": group, "largest_group_requests": n,
            "one_family": bool(group) and len(top) > 1 and 2 * n > len(top)}  # fmt: skip


def alone_scorer(path: Path, data: Encoded, window: int) -> Callable[[int], np.ndarray]:
    """Row i's label scores with the request run alone in the int8 model at `path`, as the gateway settles it."""
    sess = open_session(str(path), threads=1)
    return lambda i: sess.run(None, {"input_ids": pad(data.ids, [i], window)})[0][0]


def settle(probs: np.ndarray, threshold: float, alone: Callable[[int], np.ndarray]) -> tuple[np.ndarray, int]:
    """(probs, n): `probs` with every row whose block score lies near `threshold` (engine.model.near)
    replaced by `alone(row)`, the request's scores run alone, and how many rows that was."""
    rows = near(probs[:, BLOCK], threshold)
    out = probs.copy()
    for i in rows:
        out[i] = alone(i)
    return out, len(rows)


def settled_threshold(probs: np.ndarray, labels: np.ndarray, target_fpr: float, ruled: np.ndarray | None,
                      alone: Callable[[int], np.ndarray], log: Callable[[str], None] = progress) -> tuple[float, np.ndarray]:  # fmt: skip
    """(threshold, settled probs): the block threshold on batched dev scores, then again on the same scores
    with the rows near it scored alone, so the threshold holds for the scores the gateway acts on."""
    first = block_threshold(probs, labels, target_fpr, ruled)
    settled, n = settle(probs, first, alone)
    threshold = block_threshold(settled, labels, target_fpr, ruled)
    log(f"  settled {n} requests near the threshold alone: {first:.4f} -> {threshold:.4f}"
        + (" (the ceiling: the model still blocks more than the target there)" if at_ceiling(threshold) else ""))
    return threshold, settled


@dataclass
class Extra:
    """Benign requests beyond the dev split to set the threshold on (engine.train.calibration): encoded, which of
    them the rules block, and the calibration file's record."""

    data: Encoded
    ruled: np.ndarray
    record: dict


def joined(a: Encoded, b: Encoded) -> Encoded:
    cut = None if a.cut is None or b.cut is None else np.concatenate([a.cut, b.cut])
    return Encoded(a.ids + b.ids, np.concatenate([a.labels, b.labels]), np.concatenate([a.features, b.features]),
                   a.groups + b.groups, cut=cut)  # fmt: skip


def set_threshold(model: Path, window: int, dev: Encoded, dev_probs: np.ndarray, dev_ruled: np.ndarray, target_fpr: float,
                  extra: Extra | None = None, log: Callable[[str], None] = progress,
                  fixed: float | None = None) -> tuple[float, dict, dict | None]:  # fmt: skip
    """(threshold, dev figures with the rules at it, bundle.json's "calibration" or None): the settled block threshold
    of the int8 model at `model` on the dev split's benign requests, and on `extra`'s too when given (scored here).
    With `fixed`, the threshold is that number instead (a recipe's operating point that runs of it share): the
    threshold calibration would have set is still found and recorded beside it ("calibrated"), and the dev figures
    are the number's, so a bundle says what share of its dev traffic the number blocks."""
    data, probs, ruled = dev, dev_probs, dev_ruled
    if extra is not None:
        t0 = time.time()
        extra_probs = score_onnx(model, extra.data, window)
        log(f"  scored {len(extra.data.ids):,} calibration requests in {time.time() - t0:.0f} s")
        data, probs, ruled = joined(dev, extra.data), np.concatenate([dev_probs, extra_probs]), np.concatenate([dev_ruled, extra.ruled])
    alone = alone_scorer(model, data, window)
    threshold, settled = settled_threshold(probs, data.labels, target_fpr, ruled, alone, log)
    basis = threshold_basis(settled, data.labels, data.groups, target_fpr, ruled)
    if basis["one_family"]:
        log(f"  the threshold rests on one family: {basis['largest_group']} holds {basis['largest_group_requests']} of the "
            f"{basis['benign_top']} highest-scoring benign requests it is set on, so a retrain may set it elsewhere "
            "(--block-threshold holds one number; more benign families in the dev split spread it)")  # fmt: skip
    held = {}
    if fixed is not None:
        held = {"fixed": {"block": fixed, "calibrated": stored(threshold), "target_fpr": target_fpr}}
        settled, _ = settle(settled, fixed, alone)  # the rows near the number, as the gateway scores them
        threshold = fixed
    union = {**figures(settled[: len(dev.ids)], dev.labels, threshold, dev_ruled), "rules": rules_id(), "threshold_basis": basis}
    if held:
        log(f"  block threshold fixed at {fixed} (calibrated to {100 * target_fpr:g} % it would be "
            f"{held['fixed']['calibrated']:.4f}); dev with the rules there: TPR {union['tpr']:.4f} FPR {union['fpr']:.4f}")  # fmt: skip
    if extra is None:
        return threshold, union, held or None
    n, dev_benign = len(dev.ids), int((dev.labels != BLOCK).sum())
    model_blocks = (settled[n:, BLOCK] >= threshold) & ~extra.ruled
    record = {
        "benign_requests": dev_benign + len(extra.data.ids),
        "dev_benign": dev_benign,
        "extra": {"requests": len(extra.data.ids), "sha256": extra.record.get("sha256"),
                  "builds": [b.get("seed") for b in extra.record.get("builds", [])],
                  "blocked_by_rules": int(extra.ruled.sum()), "blocked_by_model_only": int(model_blocks.sum())},  # fmt: skip
    }
    log(f"  calibration: {record['benign_requests']:,} benign requests (dev {record['dev_benign']:,}); of the "
        f"{len(extra.data.ids):,} others the rules block {int(extra.ruled.sum())}, the model {int(model_blocks.sum())} more")  # fmt: skip
    return threshold, union, {**record, **held}


def threshold_allowing(scores: np.ndarray, allowed: int) -> float:
    """The lowest threshold (blocked: score >= threshold) that blocks at most `allowed` of `scores`: just
    above the (allowed+1)-th highest score, in the scores' own precision; 0 when all may be blocked."""
    if allowed >= len(scores):
        return 0.0
    cut = np.sort(scores)[::-1][allowed]
    return float(np.nextafter(cut, np.asarray(1.0, dtype=cut.dtype)))


def int8(net, dev: Encoded, fp32_dev: dict, dest: Path, seed: int,
         log: Callable[[str], None] = progress, form: str = "auto", layout: str = "s8") -> tuple[str, dict[str, dict]]:  # fmt: skip
    """Export `net` (a ClefNet), quantise it dynamically and statically (activations calibrated on up to 256
    dev sequences), measure both on `dev`, and copy the one `choose` keeps to `dest`, or the `form` asked for
    (the choice reads timings, which a loaded machine can tip). `layout`: the dynamic model's weights
    (engine.train.export.LAYOUTS). (choice, measured)."""
    from engine.train.export import export_onnx, quantize_dynamic, quantize_static

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = export_onnx(net, Path(tmp) / "model.onnx")
        rng = random.Random(seed)
        calib = [dev.ids[i] for i in rng.sample(range(len(dev.ids)), min(256, len(dev.ids)))]
        calib = [c[:1024] for c in calib]
        candidates = {
            "dynamic": quantize_dynamic(fp32, Path(tmp) / "dynamic.onnx", per_channel=False, layout=layout),
            "static": quantize_static(fp32, Path(tmp) / "static.onnx", calib, net.window),
        }
        # both formats score the dev split at the same time, a core each (ONNX Runtime lets go of the GIL while it
        # runs; one-thread sessions give the same scores either way); their timings are taken one after the other
        sessions = {k: open_session(str(p), threads=1) for k, p in candidates.items()}
        with ThreadPoolExecutor(len(sessions)) as pool:
            scored = dict(zip(sessions, pool.map(lambda sess: score_onnx(sess, dev, net.window), sessions.values())))
        measured = {k: measure_onnx(sess, dev, net.window, scored[k]) for k, sess in sessions.items()}
        for k, m in measured.items():
            log(f"  {k}: dev balanced accuracy {100 * m['figures']['balanced_accuracy']:.2f} %  "
                f"p50 {m['p50_ms']:.3f} ms at {m['tokens']} tokens")  # fmt: skip
        choice = choose(measured, fp32_dev) if form == "auto" else form
        shutil.copyfile(candidates[choice], dest)
    return choice, measured
