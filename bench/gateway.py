"""Gateway benchmark: throughput and latency of clef-gateway against nginx and nginx + ModSecurity + CRS.

    python bench/gateway.py [--snapshot] [--rounds 3] [--duration 8] [--rate-fractions 0.25,0.5] [--quick]
                            [--workers 1,2]

Starts real processes on loopback, in a temp dir, and ends every one of them when it finishes, fails or is
interrupted (Ctrl-C, SIGTERM): one nginx origin that answers 200 with a 1 KiB body, and in front of it

    origin      the origin direct
    nginx       nginx as a reverse proxy (keep-alive upstream)
    modsec      nginx + ModSecurity v3 + OWASP CRS at paranoia level 1 (SecRuleEngine On)
    clef-cold   clef-gateway, the model on every request: every query distinct, the decision cache never hits
    clef-mix    clef-gateway, realistic repeats: 80 % of requests drawn from 50 distinct ones
    clef-off    clef-gateway with decisions disabled (model.enabled: false; the rules decide every request)
    clef-proxy  clef-gateway with an allow-all operator override: no model, no rules, the proxy path alone

clef-gateway runs as one process (`serve --workers 1`) in detect mode unless --enforce, so a request the
model would block still goes the whole way to the origin; nginx runs one worker. `--workers 1,2` runs each
clef-* configuration once per worker count, side by side in the same interleaved rounds (`clef-cold-w2`:
clef-cold with 2 workers), and reports each count's throughput over one worker's, per round. --snapshot
runs the gateway from a clean `git archive` of HEAD instead of the working tree (others' uncommitted edits).

Each is loaded by wrk (closed loop: `--connections` connections, one wrk thread, for `--duration` seconds
or `--max-requests` requests, whichever ends first) with GET and with a 1 KiB JSON POST; the same Lua
request generator (bench/load.py: 50 realistic paths, a distinct query parameter per request) feeds every
configuration, in `--rounds` interleaved rounds. Then an open-loop asyncio client sends at fixed rates
(shares of clef-cold's measured maximum) to the origin direct and through each proxy, for the added latency
over the origin (latency counted from each request's scheduled send time, so a stall is not hidden). The
load generator runs on the same machine and shares its CPU with the servers: say so with every figure.

Prints progress on stderr and a summary table on stdout; writes gateway.json and gateway_throughput.png.
Debian packages: nginx, libnginx-mod-http-modsecurity, modsecurity-crs, wrk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import load  # noqa: E402
from servers import Processes, Server, log, require, versions  # noqa: E402
from bench.plotting import pyplot  # noqa: E402

CONFIGS = {
    "origin": "origin direct (nginx return 200, 1 KiB)",
    "nginx": "nginx reverse proxy",
    "modsec": "nginx + ModSecurity v3 + CRS PL1",
    "clef-cold": "clef-gateway, model, cache-cold",
    "clef-mix": "clef-gateway, model, 80 % repeats",
    "clef-off": "clef-gateway, decisions disabled",
    "clef-proxy": "clef-gateway, allow-all override",
}
# clef-proxy: an operator override that allows every request is checked before the model and the rules, so
# this is the gateway's proxy path alone (parse, annotate, forward, log): the floor under every clef-* figure.
PROXY_ONLY = "rules:\n  overrides:\n    - {id: bench-allow-all, action: allow}\n"
METHODS = ("GET", "POST")


COUNTERS = ("clef_decisions_total", "clef_edge_cache_requests_total", "clef_decision_seconds_sum",
            "clef_decision_seconds_count")  # fmt: skip


def counters(srv: Server) -> dict[str, float]:
    """The gateway's decision and edge-cache counters and its decision-time sums, from the admin /metrics."""
    out = {}
    for line in srv.admin_text("/metrics").splitlines():
        if line.startswith(COUNTERS):
            key, _, value = line.rpartition(" ")
            out[key.replace("clef_", "").replace("_total", "")] = float(value)
    return out


def delta(after: dict, before: dict) -> dict:
    """Counts over one run, and the gateway's own mean decision time per source (ms) from its histogram."""
    d = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}
    out = {k: int(v) for k, v in d.items() if not k.startswith("decision_seconds")}
    for k, total in d.items():
        if k.startswith("decision_seconds_sum") and (n := d.get(k.replace("_sum", "_count"))):
            out["decision_ms_mean" + k[len("decision_seconds_sum") :]] = round(1000 * total / n, 3)
    return out


class Runner:
    """Runs wrk and the fixed-rate client, each run with its own tag (so no run warms another's caches)."""

    def __init__(self, args, procs: Processes, script: Path):
        self.args, self.procs, self.script, self.runs = args, procs, script, 0

    def next_tag(self) -> str:
        self.runs += 1
        return load.tag(self.runs)

    def wrk(self, srv: Server, method: str, mode: str) -> dict:
        a = self.args
        if a.warmup > 0:
            load.wrk(self.procs, self.script, srv.url, method, mode, self.next_tag(), a.warmup, a.connections,
                     a.max_requests)  # fmt: skip
        before = counters(srv) if srv.admin_port else {}
        cpu0, load0 = srv.cpu_s(), load.load_avg()
        r = load.wrk(self.procs, self.script, srv.url, method, mode, self.next_tag(), a.duration, a.connections,
                     a.max_requests)  # fmt: skip
        cpu = srv.cpu_s() - cpu0
        r.update(server_cpu_s=round(cpu, 2), server_cpu_us_per_request=round(1e6 * cpu / max(1, r["requests"]), 1),
                 load_avg_before=load0, load_avg_after=load.load_avg())  # fmt: skip
        if srv.admin_port:
            r["counters"] = delta(counters(srv), before)
        return r

    def fixed_rate(self, srv: Server, method: str, rate: float) -> dict:
        a = self.args
        before = counters(srv) if srv.admin_port else {}
        load0 = load.load_avg()
        r = asyncio.run(load.fixed_rate(srv.port, method, rate, a.rate_duration, a.max_requests, self.next_tag()))
        r.update(load_avg_before=load0, load_avg_after=load.load_avg())
        if srv.admin_port:
            r["counters"] = delta(counters(srv), before)
        return r


def throughput_round(servers: dict[str, Server], runner: Runner, configs: list[str], rnd: int) -> list[dict]:
    rows = []
    for name in configs:
        for method in METHODS:
            r = runner.wrk(servers[name], method, "mix" if base(name) == "clef-mix" else "cold")
            r.update(config=name, method=method, round=rnd)
            rows.append(r)
            log(f"  round {rnd} {name:<10} {method:<4} {r['rps']:>9,.0f} req/s  p50 {r['p50_ms']:.2f} ms  p99 "
                f"{r['p99_ms']:.2f} ms  non-2xx {r['non_2xx']}  server CPU {r['server_cpu_us_per_request']} µs/req  "
                f"load {r['load_avg_before']}->{r['load_avg_after']}  {r.get('counters', '')}")  # fmt: skip
    return rows


def base(name: str) -> str:
    """The configuration a worker-count variant belongs to: clef-cold-w2 -> clef-cold."""
    head, sep, n = name.rpartition("-w")
    return head if sep and n.isdigit() else name


def with_workers(configs: list[str], counts: list[int]) -> tuple[list[str], dict[str, str]]:
    """Each clef-* configuration once per worker count (1: its own name, n: name-wN), with descriptions."""
    names, described = [], {}
    for c in configs:
        for n in counts if c.startswith("clef-") else [1]:
            name = c if n == 1 else f"{c}-w{n}"
            names.append(name)
            many = c.startswith("clef-") and len(counts) > 1
            described[name] = CONFIGS[c] + (f", {n} worker{'s' if n > 1 else ''}" if many else "")
    return names, described


def scaling(rows: list[dict], throughput: dict) -> dict:
    """name-wN -> method -> its req/s over the one-worker name's, per round (the same conditions), median."""
    out: dict = {}
    for name in throughput:
        if base(name) == name or base(name) not in throughput:
            continue
        for method in METHODS:
            if t := ratio_target(rows, method, name, base(name), 0.0):
                mine = throughput[name].get(method, {})
                out.setdefault(name, {})[method] = {
                    "ratio": t["ratio"], "per_round": t["per_round"], "measured": t["measured"],
                    "rps": mine.get("rps", 0), "server_cpu_us_per_request": mine.get("server_cpu_us_per_request"),
                }  # fmt: skip
    return out


def _processes(settings: dict) -> str:
    counts = settings.get("gateway_workers", [settings.get("gateway_processes", 1)])
    return "1 process" if counts == [1] else f"{' and '.join(map(str, counts))} worker processes"


def rate_key(method: str, fraction: float) -> str:
    return f"{method} at {100 * fraction:.0f} %"


def rate_round(servers: dict[str, Server], runner: Runner, configs: list[str], max_rps: dict[str, float],
               fractions: list[float], rnd: int) -> list[dict]:  # fmt: skip
    rows = []
    for fraction in fractions:
        for method in METHODS:
            rate = fraction * max_rps[method]
            for name in [c for c in configs if base(c) in ("origin", "nginx", "clef-cold", "clef-off", "clef-proxy")]:
                r = runner.fixed_rate(servers[name], method, rate)
                r.update(config=name, method=method, fraction=fraction, key=rate_key(method, fraction), round=rnd)
                rows.append(r)
                log(f"  round {rnd} fixed {rate:,.0f}/s {method:<4} {name:<10} p50 {r['p50_ms']} ms  p90 "
                    f"{r['p90_ms']} ms  p99 {r['p99_ms']} ms  ok {r['ok']}/{r['sent']}  errors {r['errors']}  "
                    f"late {r['sent_late_5ms']}  {r['statuses']}  load {r['load_avg_before']}->"
                    f"{r['load_avg_after']}  {r.get('counters', '')}")  # fmt: skip
    return rows


def medians(rows: list[dict], keys: tuple[str, ...]) -> dict:
    """config -> method (or "method at N %") -> the median over rounds of each figure in `keys`."""
    grouped: dict[str, dict[str, list[dict]]] = {}
    for r in rows:
        grouped.setdefault(r["config"], {}).setdefault(r.get("key", r["method"]), []).append(r)
    return {
        cfg: {m: {**{k: round(statistics.median(r[k] for r in rs), 3) for k in keys}, "rounds": len(rs)}
              for m, rs in by.items()}
        for cfg, by in grouped.items()
    }  # fmt: skip


def git_state(snapshot: bool) -> dict:
    """The commit the gateway runs from, read when the run starts (others may commit while it runs)."""

    def git(*a):
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = not snapshot and bool(git("status", "--porcelain", "--", "gateway", "engine", "rules"))
    return {"commit": git("rev-parse", "--short", "HEAD"), "snapshot": snapshot, "uncommitted_changes": dirty}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="seconds of warm-up before each wrk run (0: none)")
    ap.add_argument("--max-requests", type=int, default=500_000, help="requests per run at most")
    ap.add_argument("--connections", type=int, default=32, help="wrk connections (one wrk thread)")
    ap.add_argument("--rounds", type=int, default=1, help="repeat every run, interleaved, and report medians")
    ap.add_argument("--rate-duration", type=float, default=10.0, help="seconds per fixed-rate run")
    ap.add_argument(
        "--rate-fractions",
        default="0.5",
        help="fixed rates, as shares of clef-cold's max (comma-separated; the target is at 0.5)",
    )
    ap.add_argument(
        "--enforce",
        action="store_true",
        help="run clef-gateway in enforce mode (default: detect, so a block never skips the origin)",
    )
    ap.add_argument(
        "--snapshot",
        action="store_true",
        help="run clef-gateway from a clean `git archive HEAD` export, not the working tree",
    )
    ap.add_argument("--nginx-workers", type=int, default=1, help="nginx worker processes")
    ap.add_argument("--workers", default="1", help="clef-gateway worker processes, comma-separated (e.g. 1,2): "
                    "each clef-* configuration runs once per count, in the same rounds")  # fmt: skip
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of " + ",".join(CONFIGS))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--quick", action="store_true", help="3 s runs, for a smoke test (figures not for recording)")
    ap.add_argument(
        "--replot", metavar="JSON", help="only redo the table, chart and derived figures from a results JSON"
    )
    args = ap.parse_args(argv)
    if args.replot:
        return replot(Path(args.replot), Path(args.out))
    if args.quick:
        args.duration, args.warmup, args.rate_duration = 3, 1, 3.0
    configs = [c for c in args.configs.split(",") if c]
    args.rate_fractions = [float(f) for f in args.rate_fractions.split(",") if f]
    if unknown := set(configs) - set(CONFIGS):
        ap.error(f"unknown configs: {', '.join(sorted(unknown))}")
    args.workers = [int(n) for n in args.workers.split(",") if n]
    configs, args.descriptions = with_workers(configs, args.workers)
    require("nginx", "wrk")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count()
    log(f"{cores} cores, shared with the load generator and anything else running (load {load.load_avg()}); "
        f"{args.rounds} round(s) of {args.duration} s runs, {args.connections} connections")  # fmt: skip

    mode = "enforce" if args.enforce else "detect"
    with Processes(workers=args.nginx_workers) as procs:
        servers: dict[str, Server] = {"origin": procs.origin()}
        if "nginx" in configs:
            servers["nginx"] = procs.nginx_proxy(servers["origin"])
        if "modsec" in configs:
            servers["modsec"] = procs.nginx_proxy(servers["origin"], modsecurity=True)
        args.code = git_state(args.snapshot)
        code = procs.snapshot(args.code["commit"]) if args.snapshot else ROOT
        for n in args.workers:
            w = "" if n == 1 else f"-w{n}"
            if {f"clef-cold{w}", f"clef-mix{w}"} & set(configs):
                servers[f"clef-cold{w}"] = servers[f"clef-mix{w}"] = procs.gateway(
                    servers["origin"], name=f"clef{w}", extra=f"mode: {mode}\n", code=code, workers=n)
            if f"clef-off{w}" in configs:
                servers[f"clef-off{w}"] = procs.gateway(servers["origin"], enabled=False, name=f"clef-off{w}",
                                                        extra=f"mode: {mode}\n", code=code, workers=n)
            if f"clef-proxy{w}" in configs:
                servers[f"clef-proxy{w}"] = procs.gateway(servers["origin"], enabled=False, name=f"clef-proxy{w}",
                                                          code=code, extra=f"mode: {mode}\n{PROXY_ONLY}", workers=n)
        model = {}
        if cold := next((c for c in configs if base(c) == "clef-cold"), None):
            model = servers[cold].admin_json("/health").get("model") or {}
        for name in configs:
            log(f"  {name:<13} {servers[name].url}  {args.descriptions[name]}")
        runner = Runner(args, procs, load.lua_script(procs.tmp / "requests.lua"))

        rows = []
        for rnd in range(1, args.rounds + 1):
            rows += throughput_round(servers, runner, configs, rnd)
        med = medians(rows, ("rps", "p50_ms", "p90_ms", "p99_ms", "server_cpu_us_per_request"))
        rate_rows = []
        if "clef-cold" in med and "origin" in configs and args.rate_fractions:
            max_rps = {m: med["clef-cold"][m]["rps"] for m in METHODS}
            for rnd in range(1, args.rounds + 1):
                rate_rows += rate_round(servers, runner, configs, max_rps, args.rate_fractions, rnd)

    result = summarise(args, cores, mode, model, rows, rate_rows)
    (out / "gateway.json").write_text(json.dumps(result, indent=2) + "\n")
    chart(result, out / "gateway_throughput.png")
    print(table(result))
    log(f"wrote {out / 'gateway.json'} and {out / 'gateway_throughput.png'}")
    return 0


def added_latency(rate_rows: list[dict]) -> dict:
    """config -> "method at N %" -> added p50/p90/p99 over the origin direct at the same rate: per round (the
    same conditions), then the median over rounds."""
    base = {(r["key"], r["round"]): r for r in rate_rows if r["config"] == "origin"}
    diffs: dict[str, dict[str, list[dict]]] = {}
    for r in rate_rows:
        b = base.get((r["key"], r["round"]))
        if r["config"] != "origin" and b:
            d = {f"added_{p}_ms": r[f"{p}_ms"] - b[f"{p}_ms"] for p in ("p50", "p90", "p99")}
            diffs.setdefault(r["config"], {}).setdefault(r["key"], []).append(d)
    return {c: {m: {k: round(statistics.median(d[k] for d in ds), 3) for k in ds[0]} for m, ds in by.items()}
            for c, by in diffs.items()}  # fmt: skip


def ratio_target(rows: list[dict], method: str, num: str, den: str, floor: float) -> dict | None:
    """num/den throughput per round (the two measured minutes apart in the same run), then the median."""
    by = {(r["config"], r["round"]): r["rps"] for r in rows if r["method"] == method}
    rounds = sorted({r["round"] for r in rows})
    ratios = [by[(num, k)] / by[(den, k)] for k in rounds if (num, k) in by and by.get((den, k))]
    if not ratios:
        return None
    mid = statistics.median(ratios)
    each = ", ".join(f"{x:.2f}" for x in ratios)
    return {"ratio": round(mid, 3), "per_round": [round(x, 3) for x in ratios], "met": mid >= floor,
            "measured": f"{mid:.2f}x (per round: {each})"}  # fmt: skip


def derive(res: dict) -> dict:
    """The medians, added latencies and targets, from the raw runs (so --replot can redo them)."""
    rows, rate_rows = res["runs"], res["fixed_rate_runs"]
    res["throughput"] = medians(rows, ("rps", "p50_ms", "p90_ms", "p99_ms", "server_cpu_us_per_request"))
    res["fixed_rate"] = medians(rate_rows, ("rate", "p50_ms", "p90_ms", "p99_ms")) if rate_rows else {}
    res["added_latency"] = added = added_latency(rate_rows)
    targets = {}
    for method in METHODS:
        if t := ratio_target(rows, method, "clef-cold", "modsec", 2.0):
            targets[f"clef-cold >= 2x nginx+ModSecurity CRS PL1, {method}"] = t
        if t := ratio_target(rows, method, "clef-cold", "clef-off", 0.5):
            targets[f"clef-cold >= 0.5x clef-off (model costs at most half), {method}"] = t
        if a := added.get("clef-cold", {}).get(rate_key(method, 0.5)):
            targets[f"added latency at half load, {method}: p50 <= 2 ms, p99 <= 10 ms"] = {
                "measured": f"p50 {a['added_p50_ms']:+.2f} ms, p99 {a['added_p99_ms']:+.2f} ms",
                "met": a["added_p50_ms"] <= 2 and a["added_p99_ms"] <= 10,
            }  # fmt: skip
    res["targets"] = targets
    res["scaling"] = scaling(rows, res["throughput"])
    loads = [r[k] for r in rows + rate_rows for k in ("load_avg_before", "load_avg_after")]
    res["machine"]["load_avg_1min_during_runs"] = [min(loads), round(statistics.median(loads), 2), max(loads)]
    return res


def summarise(args, cores, mode, model, rows, rate_rows) -> dict:
    configs = list(dict.fromkeys(r["config"] for r in rows))
    return derive({
        "machine": {"cores": cores, "shared": True, "python": platform.python_version(),
                    "platform": platform.platform(),
                    "note": f"{cores}-core machine shared with other engineers' work (training, tests) and with the "
                            "load generator: wrk and the fixed-rate client run on the same cores as the servers"},
        "code": args.code,
        "versions": versions(),
        "model": f"{model.get('name')}@{model.get('version')}" if model else None,
        "settings": {"duration_s": args.duration, "warmup_s": args.warmup, "connections": args.connections,
                     "wrk_threads": 1, "rounds": args.rounds, "max_requests": args.max_requests,
                     "nginx_workers": args.nginx_workers, "gateway_workers": args.workers, "gateway_mode": mode,
                     "rate_fractions": args.rate_fractions, "rate_duration_s": args.rate_duration,
                     "post_body_bytes": len(load.POST_BODY), "origin_body_bytes": 1024, "quick": args.quick},
        "configs": {k: args.descriptions[k] for k in configs},
        "runs": rows,
        "fixed_rate_runs": rate_rows,
    })  # fmt: skip


def replot(path: Path, out: Path) -> int:
    res = derive(json.loads(path.read_text()))
    (out / "gateway.json").write_text(json.dumps(res, indent=2) + "\n")
    chart(res, out / "gateway_throughput.png")
    print(table(res))
    return 0


def table(res: dict) -> str:
    m, st = res["machine"], res["settings"]
    lo, mid, hi = m.get("load_avg_1min_during_runs", [0, 0, 0])
    lines = [f"{m['cores']} cores, shared with other work and with the load generator (1-min load average "
             f"{lo}-{hi}, median {mid}); {st['rounds']} round(s), "
             f"{st['duration_s']} s wrk runs ({st['connections']} connections), medians; clef-gateway: "
             f"{_processes(st)}, {st['gateway_mode']} mode, model {res['model']}", "",
             "| configuration | GET req/s | GET p50 / p90 / p99 ms | POST 1 KiB req/s | POST p50 / p90 / p99 ms "
             "| server CPU µs/req GET / POST |", "|---|---|---|---|---|---|"]  # fmt: skip

    def lat(x):
        return f"{x['p50_ms']:.2f} / {x['p90_ms']:.2f} / {x['p99_ms']:.2f}" if x else "–"

    for cfg, by in res["throughput"].items():
        g, p = by.get("GET", {}), by.get("POST", {})
        cpu = f"{g.get('server_cpu_us_per_request', '–')} / {p.get('server_cpu_us_per_request', '–')}"
        rps = f"{g.get('rps', 0):,.0f} | {lat(g)} | {p.get('rps', 0):,.0f} | {lat(p)}"
        lines.append(f"| {res['configs'][cfg]} | {rps} | {cpu} |")
    if res["fixed_rate"]:
        lines += ["", "Fixed rate (open loop, asyncio client), as a share of clef-cold's maximum:", "",
                  "| configuration | load | req/s | p50 / p90 / p99 ms | added over origin p50 / p90 / p99 ms |",
                  "|---|---|---|---|---|"]  # fmt: skip
        keys = sorted({k for by in res["fixed_rate"].values() for k in by}, key=lambda k: (k.split()[0], k))
        for key in keys:
            for cfg, by in res["fixed_rate"].items():
                if r := by.get(key):
                    a = res["added_latency"].get(cfg, {}).get(key)
                    add = (
                        f"{a['added_p50_ms']:+.2f} / {a['added_p90_ms']:+.2f} / {a['added_p99_ms']:+.2f}" if a else "–"
                    )
                    lines.append(f"| {res['configs'][cfg]} | {key} | {r['rate']:,.0f} | {lat(r)} | {add} |")
    if res.get("scaling"):
        lines += ["", "Workers: throughput over one worker's, and server CPU per request (per round, then the median):",
                  "", "| configuration | method | req/s | x one worker | server CPU µs/req |", "|---|---|---|---|---|"]
        for cfg, by in res["scaling"].items():
            for method, sc in by.items():
                lines.append(f"| {res['configs'][cfg]} | {method} | {sc['rps']:,.0f} | {sc['measured']} | "
                             f"{sc['server_cpu_us_per_request']} |")  # fmt: skip
    if res["targets"]:
        lines += ["", "| target | measured | met |", "|---|---|---|"]
        lines += [f"| {k} | {t['measured']} | {'yes' if t['met'] else 'no'} |" for k, t in res["targets"].items()]
    return "\n".join(lines)


def chart(res: dict, path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    import numpy as np

    cfgs = list(res["throughput"])
    labels = [res["configs"][c].replace(", ", ",\n", 1) for c in cfgs]
    x = np.arange(len(cfgs))
    fig, ax = plt.subplots(1, 3, figsize=(18, 6.2), gridspec_kw={"width_ratios": [1.4, 1.4, 1.1]})
    for k, method in enumerate(METHODS):
        off = (k - 0.5) * 0.38
        rps = [res["throughput"][c].get(method, {}).get("rps", 0) for c in cfgs]
        bars = ax[0].bar(x + off, rps, 0.38, color=f"C{k}", label="GET" if method == "GET" else "POST 1 KiB")
        ax[0].bar_label(bars, [f"{v:,.0f}" for v in rps], fontsize=7, padding=2)
        p50 = [res["throughput"][c].get(method, {}).get("p50_ms", 0) for c in cfgs]
        p99 = [res["throughput"][c].get(method, {}).get("p99_ms", 0) for c in cfgs]
        ax[1].bar(x + off, p99, 0.38, color=f"C{k}", alpha=0.35)
        ax[1].bar(x + off, p50, 0.38, color=f"C{k}", label=f"{method} p50 (light: p99)")
    ax[0].set(yscale="log", ylabel="requests/s (log scale)", title="Throughput at saturation (wrk, closed loop)")
    ax[1].set(yscale="log", ylabel="ms (log scale)", title="Latency at saturation (wrk)")
    for a in ax[:2]:
        a.set_xticks(x, labels, fontsize=7, rotation=30, ha="right")
        a.grid(True, axis="y", which="both", alpha=0.3)
        a.legend(fontsize=8)
    rows = [(c, k) for c in res["added_latency"] for k in sorted(res["added_latency"][c])]
    if rows:
        y = np.arange(len(rows))
        for k, p in enumerate(("p50", "p99")):
            values = [res["added_latency"][c][key][f"added_{p}_ms"] for c, key in rows]
            ax[2].barh(y + (0.2 if p == "p50" else -0.2), values, 0.4, color=f"C{k + 2}", label=f"added {p}")
        ax[2].axvline(2, color="C2", ls="--", lw=1, label="target p50 2 ms")
        ax[2].axvline(10, color="C3", ls="--", lw=1, label="target p99 10 ms")
        ax[2].set_yticks(y, [f"{c}, {k}" for c, k in rows], fontsize=7)
        rate = {k: r["rate"] for by in res["fixed_rate"].values() for k, r in by.items()}
        rates = "\n".join(
            ", ".join(f"{k}: {v:,.0f}/s" for k, v in sorted(rate.items()) if k.startswith(m)) for m in METHODS
        )
        ax[2].set(xscale="symlog", xlabel="ms over the origin direct, same rate (symlog)")
        ax[2].set_title(
            "Added latency over the origin direct,\nfixed rate (% of clef-cold's max)\n" + rates, fontsize=8
        )
        ax[2].grid(True, axis="x", alpha=0.3)
        ax[2].legend(fontsize=7)
    lo, mid, hi = res["machine"].get("load_avg_1min_during_runs", [0, 0, 0])
    if not rows:
        ax[2].set_axis_off()  # no fixed-rate runs
    against = [name for key, name in (("nginx", "nginx"), ("modsec", "nginx + ModSecurity CRS PL1")) if key in cfgs]
    fig.suptitle(f"clef-gateway ({_processes(res['settings'])})" + (f" vs {' and '.join(against)}" if against else "")
                 + f" — {res['machine']['cores']} "
                 f"cores shared with other work and with the load generator (load average {lo}-{hi})",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted: every process it started has been stopped")
        sys.exit(130)
