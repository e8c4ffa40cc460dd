"""Does a bundle's int8 model score the same on a CPU without int8 dot-product instructions?

    python bench/cpu_paths.py [--bundle DIR] --requests FILE.jsonl [--sample 500] [--cpu Haswell] [--control] [--out DIR]

ONNX Runtime multiplies a dynamic int8 model's unsigned activations by its signed weights with VNNI where the CPU has
it (exact 32-bit sums), and otherwise, on AVX2, by summing pairs of products in 16 bits, which saturate when the
weights use the full signed 8-bit range. The `s8` layout holds the weights to 7 bits so that it cannot
(engine/train/export.py). This benchmark checks that by running: the same token ids (a sample of real requests,
encoded once) go through the model natively and under `qemu-x86_64 -cpu Haswell` (user-mode emulation of a CPU with
AVX2 and no AVX-512 or VNNI; needs the `qemu-user` package), and it prints how far the block score moves between the
two and how many decisions at the bundle's threshold differ. `--control` also runs a copy of the model quantised
with full-range signed weights (made from the bundle's weights.pt; needs the `train` extra), where the emulated CPU
should disagree: evidence that the check can fail. Emulation says nothing about speed, and is slow: 1,000 requests take minutes.
Writes cpu_paths.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.model import open_session  # noqa: E402
from engine.verdict import LABELS  # noqa: E402

BLOCK = LABELS.index("block")


def score(model: str, ids_path: str, out: str, window: int) -> None:
    """The label probabilities of every id array in `ids_path`, one request at a time in the session the gateway
    opens (one thread), as it runs a lone request: what also runs under emulation."""
    arrays = np.load(ids_path, allow_pickle=True)["ids"]
    sess = open_session(model, threads=1)
    probs = []
    for x in arrays:
        batch = np.zeros((1, max(window, -(-len(x) // window) * window)), dtype=np.int64)
        batch[0, : len(x)] = x
        probs.append(sess.run(None, {"input_ids": batch})[0][0])
    np.save(out, np.asarray(probs, dtype=np.float32))


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-7, 1 - 1e-7)
    return np.log(p / (1 - p))


def compare(native: np.ndarray, emulated: np.ndarray, threshold: float) -> dict:
    """How far the block score moved between the two CPUs, and the decisions at `threshold` that differ."""
    moved = np.abs(logit(native[:, BLOCK]) - logit(emulated[:, BLOCK]))
    return {
        "requests": int(len(native)),
        "block_logit_moved_median": float(np.median(moved)),
        "block_logit_moved_p99": float(np.quantile(moved, 0.99)),
        "block_logit_moved_max": float(moved.max()),
        "probability_moved_max": float(np.abs(native - emulated).max()),
        "decisions_differ": int(((native[:, BLOCK] >= threshold) != (emulated[:, BLOCK] >= threshold)).sum()),
    }


def emulated(qemu: str, cpu: str, model: str, ids_path: str, out: str, window: int) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(site.getsitepackages()))
    cmd = [qemu, "-cpu", cpu, os.path.realpath(sys.executable), __file__, "--score", model, ids_path, out, str(window)]
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:  # qemu prints one warning per CPU feature it cannot emulate: only a failure is shown
        raise RuntimeError(f"emulated run failed ({done.returncode}): {done.stderr[-2000:]}")


def control_model(bundle, dest: Path) -> Path:
    """The bundle's weights quantised like the s8 layout but with full-range signed weights (no reduce_range)."""
    from engine.train import weights
    from engine.train.export import export_onnx, quantize_dynamic

    fp32 = export_onnx(weights.load(bundle), dest.with_name("fp32.onnx"))
    return quantize_dynamic(fp32, dest, per_channel=False, layout="s8", full_range=True)


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--score":
        score(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default=None, help="bundle folder (default: the packaged default)")
    ap.add_argument("--requests", required=True, help="request-shaped JSONL: the sample is read evenly from it")
    ap.add_argument("--sample", type=int, default=500)
    ap.add_argument("--cpu", default="Haswell", help="the CPU model qemu emulates (default Haswell: AVX2, no VNNI)")
    ap.add_argument("--control", action="store_true", help="also a full-range signed copy of the model")
    ap.add_argument("--out", default="bench/results/cpu-paths")
    args = ap.parse_args(argv)
    qemu = shutil.which("qemu-x86_64")
    if platform.machine() != "x86_64":
        print("error: the emulated CPU runs this machine's Python, which must be an x86-64 one", file=sys.stderr)
        return 2
    if not qemu:
        print("error: qemu-x86_64 not found (apt-get install qemu-user)", file=sys.stderr)
        return 2

    from engine import bundle as bundles
    from engine.eval import features_of
    from engine.model import Model

    bundle = bundles.load(args.bundle) if args.bundle else bundles.load()
    model = Model(bundle)
    lines = [line for line in Path(args.requests).open(encoding="utf-8") if line.strip()]
    step = max(1, len(lines) // max(1, args.sample))
    records = [json.loads(line) for line in lines[::step][: args.sample]]
    t0 = time.time()
    res = {"bundle": bundle.id, "requests_file": str(args.requests), "cpu": args.cpu, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        ids_path = str(Path(tmp) / "ids.npz")
        np.savez(ids_path, ids=np.array([model.encode(features_of(r)).ids for r in records], dtype=object))
        models = {"bundle": str(bundle.model_path)}
        if args.control:
            models["full-range control"] = str(control_model(bundle, Path(tmp) / "control.onnx"))
        threshold = bundle.thresholds.get("block", 0.5)
        for name, path in models.items():
            native, emul = Path(tmp) / f"{len(res['models'])}-native.npy", Path(tmp) / f"{len(res['models'])}-emulated.npy"
            score(path, ids_path, str(native), bundle.window)
            print(f"[{name}] {len(records)} requests scored natively; under qemu -cpu {args.cpu} ({time.time() - t0:.0f}s)", flush=True)
            emulated(qemu, args.cpu, path, ids_path, str(emul), bundle.window)
            res["models"][name] = compare(np.load(native), np.load(emul), threshold)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cpu_paths.json").write_text(json.dumps(res, indent=2) + "\n")
    print(f"\n{bundle.id}: the same {len(records)} requests natively and on an emulated {args.cpu} (AVX2, no VNNI)")
    print("| model | block logit moved: median / p99 / max | probability moved, max | decisions differ |")
    print("|---|---|---|---|")
    for name, m in res["models"].items():
        print(f"| {name} | {m['block_logit_moved_median']:.2g} / {m['block_logit_moved_p99']:.2g} / {m['block_logit_moved_max']:.2g} "
              f"| {m['probability_moved_max']:.2g} | {m['decisions_differ']} |")  # fmt: skip
    print(f"results: {out / 'cpu_paths.json'}  ({time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
