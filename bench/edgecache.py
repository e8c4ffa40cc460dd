"""Edge cache benchmark: throughput of cache hits against forwarding the same request to the origin.

    python bench/edgecache.py [--duration 10] [--connections 32] [--client auto|wrk|asyncio] [--model]

Starts an origin (a small aiohttp app serving a 4 KiB `/static/app.js` with `Cache-Control: public,
max-age=3600`) and two gateways in front of it, each in its own process, identical but for the edge
cache: on (`cache.responses.max_bytes` 256 MiB) and off (0: the `cache` action forwards, x-clef-cache:
BYPASS). An operator override decides `cache` for /static/ in both, so the decision costs the same; the
model is off unless --model (with it, repeated requests are answered by the decision cache anyway).
Access logs are off in both: this measures the cache, not the log.

Then the same GET /static/app.js is sent to each for --duration seconds at --connections connections,
with wrk when it is installed (a C client, so the gateway rather than the client is the bottleneck), else
with a bounded asyncio client. Prints requests per second and latency for each, and hits / forwarded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[1]
BODY = (b"/* app.js */\n" + b"function clef(){return 42}\n" * 160)[:4096]
PATH = "/static/app.js"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def origin(port: int) -> None:
    """Run the origin in this process (the benchmark starts it as a child)."""
    from aiohttp import web

    async def asset(request: web.Request) -> web.Response:
        headers = {"Cache-Control": "public, max-age=3600", "ETag": '"v1"', "Content-Type": "application/javascript"}
        return web.Response(body=BODY, headers=headers)

    app = web.Application()
    app.router.add_get(PATH, asset)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def gateway_config(origin_url: str, cache_on: bool, model: bool) -> dict:
    return {
        "listen": f"127.0.0.1:{free_port()}",
        "admin": {"listen": f"127.0.0.1:{free_port()}"},
        "origin": {"url": origin_url},
        "model": {"enabled": model},
        "rules": {"overrides": [{"id": "static", "action": "cache", "path_prefix": "/static/"}]},
        "cache": {"responses": {"max_bytes": (256 << 20) if cache_on else 0}},
        "logging": {"access_log": False, "level": "warning"},
    }


def spawn(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


async def ready(url: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url) as resp:
                    await resp.read()
                    return
            except aiohttp.ClientError:
                await asyncio.sleep(0.2)
    raise SystemExit(f"{url} did not come up within {timeout:.0f}s")


async def probe(url: str) -> str:
    async with aiohttp.ClientSession() as session:
        for _ in range(2):  # the first one fills the cache
            async with session.get(url) as resp:
                assert resp.status == 200 and await resp.read() == BODY, resp.status
                status = resp.headers.get("x-clef-cache", "?")
    return status


def run_wrk(url: str, duration: float, connections: int) -> dict:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{int(duration)}s", "--latency", url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip

    def ms(label: str) -> float:
        m = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\b", out, re.MULTILINE)
        if not m:
            return float("nan")
        return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "requests": total, "p50_ms": ms("50%"), "p99_ms": ms("99%"),
            "errors": int(errors.group(1)) if errors else 0}  # fmt: skip


async def run_asyncio(url: str, duration: float, connections: int) -> dict:
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + duration
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal errors
            while (start := time.perf_counter()) < stop:
                async with session.get(url) as resp:
                    await resp.read()
                    errors += resp.status != 200
                latencies.append(time.perf_counter() - start)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "rps": len(latencies) / elapsed,
        "requests": len(latencies),
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "errors": errors,
    }


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
    p.add_argument("--rounds", type=int, default=3, help="measurements of each, interleaved; the median is kept")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--client", choices=("auto", "wrk", "asyncio"), default="auto")
    p.add_argument("--model", action="store_true", help="load the model too (the override still decides)")
    p.add_argument("--origin-only", type=int, metavar="PORT", help=argparse.SUPPRESS)
    return p.parse_args()


async def measure(client: str, url: str, duration: float, connections: int) -> dict:
    if client == "wrk":
        return await asyncio.to_thread(run_wrk, url, duration, connections)
    return await run_asyncio(url, duration, connections)


def median_round(runs: list[dict]) -> dict:
    """The round with the median throughput, and every round's figure."""
    ordered = sorted(runs, key=lambda r: r["rps"])
    return {**ordered[len(ordered) // 2], "all": [round(r["rps"]) for r in runs]}


async def main(args: argparse.Namespace) -> None:
    client = "wrk" if args.client == "auto" and shutil.which("wrk") else ("asyncio" if args.client == "auto" else args.client)

    port = free_port()
    procs = [spawn([__file__, "--origin-only", str(port)])]
    tmp = Path(tempfile.mkdtemp(prefix="clef-bench-"))
    urls = {}
    try:
        await ready(f"http://127.0.0.1:{port}{PATH}")
        for name, on in (("hits", True), ("forwarded", False)):
            cfg = gateway_config(f"http://127.0.0.1:{port}", on, args.model)
            (tmp / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
            code = "from gateway.cli import main; raise SystemExit(main())"
            procs.append(spawn(["-c", code, "serve", "--config", str(tmp / f"{name}.yaml")]))
            urls[name] = f"http://{cfg['listen']}{PATH}"
        for name, url in urls.items():
            await ready(url)
            print(f"{name:>9}: x-clef-cache {await probe(url)}", flush=True)
        rounds: dict[str, list[dict]] = {name: [] for name in urls}
        for name, url in urls.items():  # warm both up: connections pooled, caches filled, code paths hot
            await measure(client, url, 1.0, args.connections)
        for _ in range(args.rounds):  # interleaved, so load from elsewhere on the machine falls on both alike
            for name, url in urls.items():
                rounds[name].append(await measure(client, url, args.duration, args.connections))
        results = {name: median_round(runs) for name, runs in rounds.items()}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nGET {PATH} ({len(BODY)} B), {args.connections} connections, {args.rounds} x {args.duration:g} s each,"
          f" client: {client}, {os.cpu_count()} CPUs, model {'on' if args.model else 'off'}\n")  # fmt: skip
    print(f"{'mode':>10} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}   rounds (req/s)")
    for name, r in results.items():
        print(f"{name:>10} {r['rps']:>8.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['errors']:>7}   {r['all']}")
    ratio = results["hits"]["rps"] / results["forwarded"]["rps"]
    print(f"\nhits / forwarded: {ratio:.2f}x (target: at least 3x)")


if __name__ == "__main__":
    arguments_ = arguments()
    if arguments_.origin_only:
        origin(arguments_.origin_only)  # the child process: serve until terminated
    else:
        asyncio.run(main(arguments_))
