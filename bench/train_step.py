"""Training step time with PyTorch held to one instruction set (does training need AVX-512?), and with two
networks trained at the same time (engine.train.parallel: is that faster?).

    python bench/train_step.py [--isa native,avx2,native-x2] [--turns 2] [--out bench/results/train-step]

Issue 3 asks for training within 60 minutes on a 2-core machine with AVX2 and nothing newer. A machine with
AVX-512 can run PyTorch's own kernels, MKL and oneDNN as an AVX2-only CPU would: `ATEN_CPU_CAPABILITY=avx2`,
`MKL_ENABLE_INSTRUCTIONS=AVX2` and `ONEDNN_MAX_CPU_ISA=AVX2`. This benchmark times the default network's
training step (forward, backward, AdamW; engine.train.net.ClefNet at its default size, 2 threads; training's
loop also weights the loss and clips gradients, element-wise work left out here) on batches of
the shapes training makes (24,576 tokens: 384 x 64 up to 3 x 8,192), once per instruction set and turn, each in a
fresh process, the sets in turns so that load on a shared machine falls on all of them. It prints the median step
time per shape and the ratio to the native set, and writes train_step.json and train_step.png under --out.

`native-x2` runs two such processes at once, their OpenMP threads waiting passively and their allocator keeping
freed memory, as `python -m engine.train --networks 2` trains its networks (three on two cores share them likewise): its step time is each process's, and
the summary's `throughput_vs_` figure counts the steps both make, against the first set's one process.

`bf16` and `bf16-x2` are `native` and `native-x2` with the step's matrix products in bfloat16, as
`python -m engine.train --precision bf16` (and `auto` on a CPU with AVX512-BF16 or AMX) trains: `--isa
native,bf16,native-x2,bf16-x2` compares the two precisions. On a CPU without bf16 dot products PyTorch emulates
them and the bf16 sets are the slowest.

What it cannot tell: the clock and core of another machine. The int8 serving path (ONNX Runtime's MLAS) picks
its kernels from the CPU itself and has no such switch, so serving speed on AVX2 is not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.train.parallel import WORKER_ENV  # noqa: E402

SHAPES = [(384, 64), (96, 256), (24, 1024), (3, 8192)]  # batch x tokens: 24,576 tokens each, as training batches
ISA_ENV = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "native-x2": dict(WORKER_ENV),  # with two processes at once (PROCESSES), as training starts them
    "bf16": {},  # the native set with bf16 matrix products (PRECISION: `python -m engine.train --precision bf16`)
    "bf16-x2": dict(WORKER_ENV),
}
PROCESSES = {"native-x2": 2, "bf16-x2": 2}  # sets timed as several processes at once; the others run alone
PRECISION = {"bf16": "bf16", "bf16-x2": "bf16"}  # the training steps' precision per set (fp32 where not named)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure(shapes: list[tuple[int, int]], repeats: int, threads: int, precision: str = "fp32") -> dict:
    """In this process: median seconds per training step for each shape (`precision`: the matrix products', as
    engine.train.loop runs them), and the capability PyTorch runs with."""
    import torch
    import torch.nn.functional as F

    from engine.labels import FEATURES
    from engine.train.loop import step_logits
    from engine.train.net import ClefNet
    from engine.verdict import LABELS

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = ClefNet(8192, len(LABELS), len(FEATURES))
    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    out = {"capability": torch.backends.cpu.get_cpu_capability(), "seconds": {}}
    for batch, length in shapes:
        ids = torch.randint(1, 8192, (batch, length))
        y = torch.randint(0, len(LABELS), (batch,))
        yf = torch.randint(0, 2, (batch, len(FEATURES))).float()

        def step() -> None:
            labels, features = step_logits(net, ids, precision)
            loss = F.cross_entropy(labels, y) + F.binary_cross_entropy_with_logits(features, yf)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        for _ in range(2):  # warm-up: first calls allocate and pick kernels
            step()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        out["seconds"][f"{batch}x{length}"] = statistics.median(times)
    return out


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """"384x64,3x8192" -> [(384, 64), (3, 8192)]."""
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",")]


def run_isa(isa: str, shapes: list[tuple[int, int]], repeats: int, threads: int) -> dict:
    """One turn of a set: its processes started at once; each shape's step time is their mean."""
    env = {**os.environ, **ISA_ENV[isa]}
    arg = ",".join(f"{b}x{n}" for b, n in shapes)
    cmd = [sys.executable, __file__, "--child", arg, "--repeats", str(repeats), "--threads", str(threads),
           "--precision", PRECISION.get(isa, "fp32")]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(PROCESSES.get(isa, 1))]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate()
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, cmd, stdout, stderr)
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    seconds = {s: statistics.mean(o["seconds"][s] for o in outs) for s in outs[0]["seconds"]}
    return {"capability": outs[0]["capability"], "seconds": seconds, "processes": len(outs)}


def summarise(runs: dict[str, list[dict]]) -> dict:
    """Per set: capability seen, median over turns per shape, the mean ratio of its step time to the first set's,
    and the mean ratio of its steps per second (all its processes together) to the first set's."""
    sets = list(runs)
    out = {}
    for isa in sets:
        shapes = runs[isa][0]["seconds"]
        out[isa] = {"capability": sorted({r["capability"] for r in runs[isa]}), "processes": runs[isa][0].get("processes", 1),
                    "seconds": {s: statistics.median(r["seconds"][s] for r in runs[isa]) for s in shapes}}  # fmt: skip
    first = out[sets[0]]
    for isa in sets:
        mine = out[isa]
        out[isa]["ratio_to_" + sets[0]] = round(statistics.mean(mine["seconds"][s] / first["seconds"][s] for s in first["seconds"]), 3)
        out[isa]["throughput_vs_" + sets[0]] = round(statistics.mean(
            (mine["processes"] / mine["seconds"][s]) / (first["processes"] / first["seconds"][s]) for s in first["seconds"]), 3)  # fmt: skip
    return out


def chart(summary: dict, path: Path) -> None:
    from bench.plotting import pyplot

    plt = pyplot()
    if plt is None:
        return
    shapes = list(next(iter(summary.values()))["seconds"])
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(summary)
    for k, (isa, s) in enumerate(summary.items()):
        xs = [i + k * width for i in range(len(shapes))]
        each = f", {s['processes']} at once" if s.get("processes", 1) > 1 else ""
        ax.bar(xs, [1000 * s["seconds"][sh] for sh in shapes], width, label=f"{isa} ({', '.join(s['capability'])}{each})")
    ax.set_xticks([i + width * (len(summary) - 1) / 2 for i in range(len(shapes))], shapes)
    ax.set_xlabel("batch (sequences x tokens)")
    ax.set_ylabel("ms per training step of one process (median)")
    ax.set_title("Training step of the default network")
    ax.legend(loc="lower center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--isa", default="native,avx2,native-x2", help=f"comma-separated, from {', '.join(ISA_ENV)}")
    ap.add_argument("--turns", type=int, default=2, help="fresh processes per set, in turns")
    ap.add_argument("--repeats", type=int, default=12, help="timed steps per shape in each process")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shapes", default=",".join(f"{b}x{n}" for b, n in SHAPES))
    ap.add_argument("--out", default="bench/results/train-step")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)  # a child's (PRECISION)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(parse_shapes(args.child), args.repeats, args.threads, args.precision)))
        return 0
    sets = [s.strip() for s in args.isa.split(",") if s.strip()]
    unknown = [s for s in sets if s not in ISA_ENV]
    if unknown:
        ap.error(f"unknown --isa {', '.join(unknown)}: choose from {', '.join(ISA_ENV)}")
    shapes = parse_shapes(args.shapes)
    runs: dict[str, list[dict]] = {s: [] for s in sets}
    for turn in range(args.turns):
        for isa in sets:
            t0 = time.time()
            runs[isa].append(run_isa(isa, shapes, args.repeats, args.threads))
            log(f"[turn {turn + 1}/{args.turns}] {isa}: PyTorch runs {runs[isa][-1]['capability']} ({time.time() - t0:.0f} s)")
    summary = summarise(runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"cpu": platform.processor() or platform.machine(), "threads": args.threads, "turns": args.turns,
              "repeats": args.repeats, "summary": summary, "runs": runs}  # fmt: skip
    (out / "train_step.json").write_text(json.dumps(result, indent=1) + "\n")
    chart(summary, out / "train_step.png")
    print(f"\n{'set':10s} {'PyTorch':10s} " + " ".join(f"{s:>10s}" for s in summary[sets[0]]["seconds"])
          + f"   step time vs {sets[0]}   steps/s vs {sets[0]}")  # fmt: skip
    for isa, s in summary.items():
        cells = " ".join(f"{1000 * v:8.1f}ms" for v in s["seconds"].values())
        print(f"{isa:10s} {','.join(s['capability']):10s} {cells}   {s['ratio_to_' + sets[0]]:14.3f}x   {s['throughput_vs_' + sets[0]]:10.3f}x")
    print(f"\nwrote {out / 'train_step.json'} and {out / 'train_step.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
