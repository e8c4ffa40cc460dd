"""Rules benchmark: what a decision by the default ruleset costs, by request shape and body size.

    python bench/ruleset.py [--rules FILE] [--repeat 200] [--out bench/results]

Times `RuleEngine.evaluate` (the whole decision: every rule, every part, the anomaly score) on requests
built here: a browser GET with a query, a 1 KiB JSON POST, a form POST, a 16 KiB JSON document, and JSON
and form bodies of 64 KiB, 256 KiB and 1 MiB (prose with numbers and punctuation, the shape of a long
post), and a 40 KB JSON import of 400 distinct records (more values of one kind than rules/targets.PER_KIND).
The large bodies and the import are decided twice: as the rules alone read them (a body over 64 KiB as one unit
and as its fields, every value past PER_KIND one by one), and as the gateway's second look reads a request the
model read whole (`read_whole`: fields only, the values past PER_KIND as one). Each is decided
`--repeat` times after a warm-up; prints median, p90 and p99 per shape, writes results JSON and a PNG
chart of median time against body size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import pyplot  # noqa: E402
from engine.features import Features  # noqa: E402
from rules import RuleEngine  # noqa: E402
from rules.targets import LARGE_BODY  # noqa: E402

HEADERS = [("Host", "shop.example.com"), ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"),
           ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"), ("Accept-Language", "en-GB,en;q=0.7"),
           ("Cookie", "session=8f14e45fceea167a5a36dedd4bea2543; theme=dark")]  # fmt: skip
PROSE = ("Our order #4411 arrived on 12/03 — two of the 3 boxes were fine, but the lamp (model L-220) was cracked. "
         "I'd like a replacement, or a refund of 49.90 EUR if that's easier; O'Brien at the depot said to write here. ")  # fmt: skip


def prose(n: int) -> str:
    return (PROSE * (n // len(PROSE) + 1))[:n]


def shapes() -> list[tuple[str, int, Features, bool]]:
    """(name, body bytes, features, read_whole) for each request shape."""
    out = [("GET with a query", 0, Features.build("GET", "/search", "q=red+running+shoes&size=42&page=2", HEADERS), False)]
    js = [("Content-Type", "application/json")]
    form = [("Content-Type", "application/x-www-form-urlencoded")]
    body = json.dumps({"name": "Siobhán O'Connor", "email": "siobhan@example.ie", "message": prose(900)})
    out.append(("JSON POST 1 KiB", len(body), Features.build("POST", "/api/v1/messages", "", HEADERS + js, body), False))
    body = "name=Jo+O%27Brien&email=jo%40example.com&subject=Order+4411&message=" + prose(700).replace(" ", "+")
    out.append(("form POST 1 KiB", len(body), Features.build("POST", "/contact", "", HEADERS + form, body), False))
    records = json.dumps({"items": [{"id": i, "name": f"Customer number {i}", "note": f"Ordered {i % 7} items, delivered "
                                     f"on time (ref #{i * 31})", "city": ["Paris", "Lyon", "New York"][i % 3]} for i in range(400)]})  # fmt: skip
    f = Features.build("POST", "/api/import", "", HEADERS + js, records)
    out += [("JSON of 400 distinct records", len(records), f, False), ("JSON of 400 distinct records, read whole", len(records), f, True)]
    for size in (16 << 10, 64 << 10, 256 << 10, 1 << 20):
        label = f"{size >> 10} KiB" if size < 1 << 20 else "1 MiB"
        body = json.dumps({"title": "Notes", "items": [{"id": i, "text": prose(500)} for i in range(size // 530)]})
        bodies = [("JSON", Features.build("POST", "/api/v1/docs", "", HEADERS + js, body))]
        if size >= 64 << 10:
            body = "title=Notes&content=" + prose(size).replace(" ", "+")
            bodies.append(("form", Features.build("POST", "/cms/save", "", HEADERS + form, body)))
        for kind, f in bodies:
            out.append((f"{kind} body {label}", len(f.body), f, False))
            if len(f.body) > LARGE_BODY:  # smaller ones without joined values are read alike both ways
                out.append((f"{kind} body {label}, read whole", len(f.body), f, True))
    return out


def timed(engine: RuleEngine, build, repeat: int, read_whole: bool = False) -> list[float]:
    """Milliseconds per decision, each on a freshly built Features (no cached canonical text or decoding)."""
    for _ in range(3):
        engine.evaluate(build(), read_whole)
    out = []
    for _ in range(repeat):
        f = build()
        t = time.perf_counter()
        engine.evaluate(f, read_whole)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rules", default=None, help="ruleset YAML (default: the packaged default.yaml)")
    ap.add_argument("--repeat", type=int, default=200, help="decisions per shape (fewer for bodies over 64 KiB)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args(argv)
    t = time.perf_counter()
    engine = RuleEngine.load(args.rules) if args.rules else RuleEngine.load()
    print(f"ruleset {engine.model}: loaded in {(time.perf_counter() - t) * 1000:.0f} ms; {os.cpu_count()} cores, shared",
          file=sys.stderr)  # fmt: skip
    rows = []
    print(f"{'request':<34} {'body bytes':>11} {'median ms':>10} {'p90 ms':>8} {'p99 ms':>8}  decision")
    for name, size, f, whole in shapes():
        repeat = args.repeat if size <= 64 << 10 else max(20, args.repeat // 10)

        def build(f=f):
            return Features.build(f.method, f.path, f.query, f.headers, f.body)

        times = sorted(timed(engine, build, repeat, whole))
        q = lambda p: times[min(len(times) - 1, int(p * len(times)))]  # noqa: E731
        verdict = engine.evaluate(build(), whole)
        row = {"request": name, "body_bytes": size, "read_whole": whole, "median_ms": round(statistics.median(times), 3),
               "p90_ms": round(q(0.90), 3), "p99_ms": round(q(0.99), 3), "n": len(times), "decision": verdict.label}  # fmt: skip
        rows.append(row)
        print(f"{name:<34} {size:>11,} {row['median_ms']:>10.3f} {row['p90_ms']:>8.3f} {row['p99_ms']:>8.3f}  {verdict.label}",
              flush=True)  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rules.json").write_text(json.dumps({"ruleset": engine.model, "cores": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    chart(rows, out / "rules_latency.png")
    print(f"wrote {out / 'rules.json'} and {out / 'rules_latency.png'}", file=sys.stderr)
    return 0


def chart(rows: list[dict], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(10, 4))
    for kind, marker in (("JSON", "o"), ("form", "s")):
        sized = [r for r in rows if r["request"].startswith(kind) and r["body_bytes"] and "records" not in r["request"]]
        lines = [("rules alone", "-", [r for r in sized if not r["read_whole"]])]
        if any(r["read_whole"] for r in sized):  # the second look splits only large bodies: below, both lines are one
            lines.append(("second look, read whole", "--", [r for r in sized if r["read_whole"] or r["body_bytes"] <= LARGE_BODY]))
        for label, style, line in lines:
            pts = [(r["body_bytes"], r["median_ms"]) for r in line]
            ax.plot(*zip(*pts), marker=marker, linestyle=style, label=f"{kind} body, {label} (median)")
    for r in (r for r in rows if "records" in r["request"]):
        ax.plot([r["body_bytes"]], [r["median_ms"]], marker="^" if r["read_whole"] else "v", linestyle="none",
                label=f"JSON of 400 records, {'second look, read whole' if r['read_whole'] else 'rules alone'}")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("body bytes")
    ax.set_ylabel("rules decision, ms")
    ax.set_title("Default ruleset: decision time by body size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
