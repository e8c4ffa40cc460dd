"""Model benchmark: latency and memory of the int8 bundle by input length, threads, and batch size.

    python bench/model.py [--bundle DIR] [--out bench/results] [--quick] [--requests FILE.jsonl]

For 64, 256, 1K, 4K, 16K and 64K tokens, with 1 and 2 ONNX Runtime threads: median and p90 of the
model's forward pass (and of canonicalise + tokenise + forward for a realistic request of that size,
nothing remembered from its previous run),
cost per token, and the peak RSS of a fresh process that loads the bundle and runs that length once.
Then batch throughput for short requests, and the served session against one with every ONNX Runtime
graph rewrite (engine.model.DISABLED_OPTIMIZERS left in), timed in turns in this run. With `--requests`,
also the forward pass over a sample of real requests (request-shaped JSONL, such as a held-out split):
what a typical request costs, benign requests and attacks apart, and in batches of 15 benign requests and an attack. Prints a table, writes results JSON and a PNG chart of latency against length.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import pyplot  # noqa: E402
from engine import bundle as bundles  # noqa: E402
from engine.features import Features  # noqa: E402
from engine.model import DISABLED_OPTIMIZERS, Encoded, Model, open_session  # noqa: E402

LENGTHS = [64, 256, 1024, 4096, 16384, 65536]


def request_of_tokens(model: Model, n: int) -> Features:
    """A realistic JSON POST whose encoding is about `n` tokens (prose in a content field)."""
    words = "the quick brown fox jumps over the lazy dog while reading the manual about select and union ".split()
    text, body = [], ""
    f = Features.build("GET", "/")
    for k in range(1, 10**7):
        text.append(words[k % len(words)])
        if k % 64 == 0 or k < 64:
            body = json.dumps({"title": "notes", "content": " ".join(text)})
            f = Features.build("POST", "/api/posts", headers={"content-type": "application/json", "user-agent": "Mozilla/5.0"}, body=body)
            if model.encode(f).length >= n:
                break
    return f


def cold(model: Model, req: Features) -> None:
    """Canonical text, tokens and forward pass of a fresh copy of `req`, nothing remembered from the last
    time: the cost of a request never seen before (the same request timed again would find its values'
    forms and its lines' tokens remembered)."""
    model.forget()
    model.run([model.encode(Features(**{k: getattr(req, k) for k in ("method", "path", "query", "headers", "body", "body_size")}))])


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def rss_for(bundle: str | None, length: int, threads: int) -> float:
    """Peak RSS (MiB) of a fresh process that loads the bundle and runs one input of `length` tokens."""
    code = (
        "import sys, resource, numpy as np; sys.path.insert(0, %r)\n"
        "from engine import bundle as b; from engine.model import Model, Encoded\n"
        "m = Model(b.load(%r), threads=%d)\n"
        "e = Encoded(np.random.randint(12, m.tokenizer.get_vocab_size(), %d).astype(np.int64), False)\n"
        "m.run([e])\n"
        # VmHWM, not getrusage's ru_maxrss: on Linux that one keeps the forking parent's high-water mark
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])\n"
    ) % (str(ROOT), bundle, threads, length)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


# Instruction sets ONNX Runtime's int8 kernels pick from: the same graph ran 2.0-3.3x faster per token on a CPU with
# AVX-512 VNNI than on one with AVX2 alone (bench/RESULTS.md), so a latency figure means little without them.
INT8_FLAGS = ("avx2", "avx_vnni", "avx512f", "avx512_vnni", "amx_int8")


def machine() -> dict:
    """The CPU the figures were measured on: its name and the int8-relevant instruction sets it offers."""
    import onnxruntime

    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    return {"cpu": name, "int8_instructions": [f for f in INT8_FLAGS if f in flags],
            "cores": os.cpu_count(), "onnxruntime": onnxruntime.__version__}  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default=None)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--quick", action="store_true", help="fewer repeats (for a smoke run)")
    ap.add_argument("--requests", default=None, help="request-shaped JSONL: also time a sample of real requests")
    ap.add_argument("--sample", type=int, default=1000, help="how many requests --requests reads (evenly spread)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    b = bundles.load(args.bundle)
    cpu = machine()
    print(f"model {b.id}, {cpu['cores']} cores ({cpu['cpu']}; {' '.join(cpu['int8_instructions'])}); lengths {LENGTHS}",
          file=sys.stderr)
    rows = []
    for threads in (1, 2):
        model = Model(b, threads=threads)
        for n in LENGTHS:
            enc = Encoded(np.random.default_rng(n).integers(12, model.tokenizer.get_vocab_size(), n).astype(np.int64), False)
            reps = 3 if args.quick else (200 if n <= 256 else 50 if n <= 4096 else 8 if n <= 16384 else 4)
            model.run([enc])
            fwd = timed(lambda: model.run([enc]), reps)
            req = request_of_tokens(model, n) if n <= 16384 else None
            end = timed(lambda: cold(model, req), max(3, reps // 4)) if req else []
            rss = rss_for(args.bundle, n, threads)
            row = {
                "threads": threads, "tokens": n,
                "forward_p50_ms": round(statistics.median(fwd), 3),
                "forward_p90_ms": round(float(np.percentile(fwd, 90)), 3),
                "us_per_token": round(1000 * statistics.median(fwd) / n, 3),
                "request_p50_ms": round(statistics.median(end), 3) if end else None,
                "peak_rss_mib": round(rss, 1),
            }  # fmt: skip
            rows.append(row)
            print(f"  threads {threads} tokens {n:>6}: forward p50 {row['forward_p50_ms']:>9.3f} ms  "
                  f"({row['us_per_token']:.3f} µs/token)  request p50 {row['request_p50_ms']}  RSS {rss:.0f} MiB",
                  file=sys.stderr)  # fmt: skip
    model = Model(b, threads=1)
    batch_rows = []
    for size in (1, 4, 16, 64):
        encs = [Encoded(np.random.default_rng(i).integers(12, 8000, 100).astype(np.int64), False) for i in range(size)]
        t = timed(lambda: model.run(encs), 3 if args.quick else 30)
        batch_rows.append({"batch": size, "tokens_each": 100, "requests_per_s": round(size / (statistics.median(t) / 1000), 1)})
    result = {"bundle": b.id, "cores": os.cpu_count(), "machine": cpu, "latency": rows, "batch": batch_rows,
              "rewrites": rewrites(model, 10 if args.quick else 300)}  # fmt: skip
    if args.requests:
        result["requests"] = real_requests(model, Path(args.requests), args.sample)
    result["self_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    (out / "model.json").write_text(json.dumps(result, indent=2) + "\n")
    chart(rows, out / "model_latency.png")
    print(table(result))
    return 0


def rewrites(model: Model, reps: int) -> list[dict]:
    """The served session against one with every ONNX Runtime rewrite, one thread, timed in turns."""
    every = open_session(str(model.bundle.model_path), 1, disabled=())
    out = []
    for n in (64, 256, 1024):
        ids = np.random.default_rng(n).integers(12, model.tokenizer.get_vocab_size(), (1, n)).astype(np.int64)
        feed = {model.input_name: ids}
        served, full = [], []
        for _ in range(reps):
            served += timed(lambda: model.session.run(None, feed), 1)
            full += timed(lambda: every.run(None, feed), 1)
        row = {"tokens": n, "served_p50_ms": round(statistics.median(served), 3),
               "every_rewrite_p50_ms": round(statistics.median(full), 3)}  # fmt: skip
        row["ratio"] = round(row["served_p50_ms"] / row["every_rewrite_p50_ms"], 3)
        out.append(row)
        print(f"  rewrites, {n} tokens: served {row['served_p50_ms']} ms, every rewrite {row['every_rewrite_p50_ms']} ms "
              f"(x{row['ratio']}; left out: {', '.join(DISABLED_OPTIMIZERS)})", file=sys.stderr)  # fmt: skip
    return out


def mixed_batches(model: Model, encs: list[Encoded], labels: list, reps: int = 7, most: int = 20) -> dict | None:
    """Batches of 16 requests within 256 tokens, 15 benign and one attack, as the gateway's micro-batcher forms them
    under load (engine/batcher.py, up to 16): the forward pass per batch, p50 over up to `most` batches each run
    `reps` times. A cascade bundle (engine/train/cascade.py) runs its second network on the attack's row alone.
    None when the sample holds too few of either."""
    benign = [e for e, lab in zip(encs, labels) if e.length <= 256 and lab != "block"]
    attacks = [e for e, lab in zip(encs, labels) if e.length <= 256 and lab == "block"]
    n = min(len(benign) // 15, len(attacks), most)
    if n == 0:
        return None
    times = []
    for j in range(n):
        batch = benign[15 * j : 15 * (j + 1)] + [attacks[j]]
        times += timed(lambda: model.run(batch), reps)
    p50 = statistics.median(times)
    return {"batches": n, "batch_p50_ms": round(p50, 3), "per_request_ms": round(p50 / 16, 4)}


def real_requests(model: Model, path: Path, sample: int) -> dict:
    """Forward pass (padded to the window, one at a time, one thread) and canonical text + tokenising +
    forward over `sample` requests spread evenly through a request-shaped JSONL file."""
    from engine.eval import features_of

    with path.open(encoding="utf-8") as fh:
        lines = fh.readlines()
    step = max(1, len(lines) // sample)
    records = [json.loads(line) for line in lines[::step][:sample]]
    del lines
    tokens, fwd, whole, fresh, encs = [], [], [], [], []
    model.forget()
    for rec in records:  # in file order, what encoding remembers filling as it would in service
        f = features_of(rec)
        t = time.perf_counter()
        enc = model.encode(f)
        t1 = time.perf_counter()
        model.run([enc])
        t2 = time.perf_counter()
        encs.append(enc)
        tokens.append(enc.length)
        fwd.append((t2 - t1) * 1000)
        whole.append((t2 - t) * 1000)
    for rec in records:  # each as if never seen: nothing remembered
        model.forget()
        f = features_of(rec)
        t = time.perf_counter()
        model.run([model.encode(f)])
        fresh.append((time.perf_counter() - t) * 1000)
    def p50_within_256(keep=lambda rec: True) -> float:
        return round(statistics.median([t for t, n, r in zip(fwd, tokens, records) if n <= 256 and keep(r)] or [0.0]), 3)

    res = {"file": path.name, "requests": len(records), "tokens_p50": int(statistics.median(tokens)),
           "tokens_p90": int(np.percentile(tokens, 90)), "share_within_256": round(float(np.mean(np.array(tokens) <= 256)), 4),
           "forward_p50_ms": round(statistics.median(fwd), 3), "forward_p90_ms": round(float(np.percentile(fwd, 90)), 3),
           "forward_p50_within_256_ms": p50_within_256(),
           # benign requests and attacks apart: a cascade (engine/train/cascade.py) runs its second network only for
           # requests its first scores high, which attacks mostly are and benign requests mostly are not
           "forward_p50_within_256_benign_ms": p50_within_256(lambda r: r.get("label") != "block"),
           "forward_p50_within_256_attack_ms": p50_within_256(lambda r: r.get("label") == "block"),
           "with_encoding_p50_ms": round(statistics.median(whole), 3),
           "with_encoding_cold_p50_ms": round(statistics.median(fresh), 3)}  # fmt: skip
    mixed = mixed_batches(model, encs, [r.get("label") for r in records])
    if mixed:
        res["mixed_batches"] = mixed
        print(f"  {mixed['batches']} batches of 15 benign requests and an attack, within 256 tokens: forward p50 "
              f"{mixed['batch_p50_ms']} ms a batch, {mixed['per_request_ms']} ms a request", file=sys.stderr)  # fmt: skip
    print(f"  {res['requests']} requests of {path.name}: {res['tokens_p50']} tokens median, forward p50 "
          f"{res['forward_p50_ms']} ms ({res['forward_p50_within_256_ms']} ms over those within 256 tokens: benign "
          f"{res['forward_p50_within_256_benign_ms']} ms, attacks {res['forward_p50_within_256_attack_ms']} ms), with canonical text and tokenising {res['with_encoding_p50_ms']} ms "
          f"({res['with_encoding_cold_p50_ms']} ms with nothing remembered)", file=sys.stderr)
    return res


def table(res: dict) -> str:
    cpu = res.get("machine") or {}
    lines = [f"model {res['bundle']} on {res['cores']} cores"
             + (f" ({cpu['cpu']}; {' '.join(cpu['int8_instructions']) or 'no AVX2'})" if cpu else ""),
             "| threads | tokens | forward p50 ms | p90 ms | µs/token | request p50 ms | peak RSS MiB |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in res["latency"]:
        lines.append(f"| {r['threads']} | {r['tokens']} | {r['forward_p50_ms']} | {r['forward_p90_ms']} | "
                     f"{r['us_per_token']} | {r['request_p50_ms'] if r['request_p50_ms'] is not None else '–'} | {r['peak_rss_mib']} |")  # fmt: skip
    lines += ["", "| batch (100 tokens each) | requests/s, 1 thread |", "|---|---|"]
    lines += [f"| {r['batch']} | {r['requests_per_s']} |" for r in res["batch"]]
    lines += ["", f"| tokens | served p50 ms | every rewrite p50 ms | ratio (left out: {', '.join(DISABLED_OPTIMIZERS)}) |",
              "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {r['tokens']} | {r['served_p50_ms']} | {r['every_rewrite_p50_ms']} | {r['ratio']} |" for r in res["rewrites"]]
    if "requests" in res:
        q = res["requests"]
        lines += ["", "| requests | tokens p50 / p90 | within 256 tokens | forward p50 / p90 ms | forward p50 ms, those within 256 tokens: all / benign / attacks | with canonical text + tokenising p50 ms, in order / nothing remembered |",
                  "|---|---|---|---|---|---|",
                  f"| {q['requests']} of {q['file']} | {q['tokens_p50']} / {q['tokens_p90']} | {100 * q['share_within_256']:.1f} % | "
                  f"{q['forward_p50_ms']} / {q['forward_p90_ms']} | {q['forward_p50_within_256_ms']} / {q.get('forward_p50_within_256_benign_ms', '–')} / {q.get('forward_p50_within_256_attack_ms', '–')} | {q['with_encoding_p50_ms']} / {q['with_encoding_cold_p50_ms']} |"]  # fmt: skip
        if "mixed_batches" in q:
            mb = q["mixed_batches"]
            lines += ["", "| batches of 15 benign requests + 1 attack, within 256 tokens | forward p50 ms a batch | ms a request |",
                      "|---|---|---|", f"| {mb['batches']} | {mb['batch_p50_ms']} | {mb['per_request_ms']} |"]  # fmt: skip
    return "\n".join(lines)


def chart(rows: list[dict], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return

    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    for threads in (1, 2):
        rs = [r for r in rows if r["threads"] == threads]
        ax[0].loglog([r["tokens"] for r in rs], [r["forward_p50_ms"] for r in rs], "o-", label=f"{threads} thread(s)")
        ax[1].semilogx([r["tokens"] for r in rs], [r["us_per_token"] for r in rs], "o-", label=f"{threads} thread(s)")
    ax[0].set(xlabel="input tokens", ylabel="forward pass, median ms", title="Latency vs input length")
    ax[1].set(xlabel="input tokens", ylabel="µs per token", title="Cost per token (flat = linear)")
    for a in ax:
        a.grid(True, which="both", alpha=0.3)
        a.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
