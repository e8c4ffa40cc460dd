"""deploy/nginx-auth-request.conf against a real nginx (the Debian package) on loopback: nginx in front of
the recording origin, asking the gateway's authz listener about each request. The file is used as it is
written, only its addresses replaced. The rules decide (model off), so what is blocked does not depend on
which model bundle is installed."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import socket
from pathlib import Path

import aiohttp
import pytest

from gateway.server import running
from tests.factories import make_config

CONF = Path(__file__).resolve().parents[2] / "deploy" / "nginx-auth-request.conf"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
SQLI = "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(NGINX is None, reason="nginx is not installed "
                                                   "(apt-get install nginx; .ci/run installs it)")]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def configured(authz_port: int, origin_port: int, port: int) -> str:
    """The deploy file with this test's addresses: the same directives, nothing added to them."""
    text = CONF.read_text()
    for pattern, value in ((r"server 127\.0\.0\.1:9902;", f"server 127.0.0.1:{authz_port};"),
                           (r"server 127\.0\.0\.1:3000;", f"server 127.0.0.1:{origin_port};"),
                           (r"listen 80;", f"listen 127.0.0.1:{port};")):  # fmt: skip
        text, n = re.subn(pattern, value, text)
        assert n == 1, pattern
    return text


@pytest.fixture
async def nginx(tmp_path):
    procs = []

    async def start(site: str) -> str:
        port = int(re.search(r"listen 127\.0\.0\.1:(\d+);", site).group(1))
        (tmp_path / "tmp").mkdir(mode=0o777)
        (tmp_path / "tmp").chmod(0o777)  # nginx's workers run as nobody when the tests run as root
        (tmp_path / "site.conf").write_text(site)
        conf = tmp_path / "nginx.conf"
        temps = "\n".join(f"    {k}_temp_path {tmp_path}/tmp/{k};" for k in ("client_body", "proxy", "fastcgi",
                                                                               "uwsgi", "scgi"))  # fmt: skip
        conf.write_text(f"daemon off;\nworker_processes 1;\npid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log "
                        f"warn;\nevents {{ worker_connections 256; }}\nhttp {{\n    access_log off;\n{temps}\n"
                        f"    include {tmp_path}/site.conf;\n}}\n")  # fmt: skip
        args = ("-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log"))
        proc = await asyncio.create_subprocess_exec(NGINX, *args, stdin=asyncio.subprocess.DEVNULL)
        procs.append(proc)
        for _ in range(100):  # nginx starts in milliseconds; polled, briefly
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                return f"http://127.0.0.1:{port}"
            except OSError:
                assert proc.returncode is None, (tmp_path / "error.log").read_text()
                await asyncio.sleep(0.05)
        raise AssertionError("nginx did not listen:\n" + (tmp_path / "error.log").read_text())

    yield start
    for proc in procs:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


async def test_nginx_asks_the_gateway_and_passes_the_decision_on(upstream, nginx, caplog):
    caplog.set_level(logging.INFO, logger="clef.access")
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "authz": {"listen": "127.0.0.1:0"},
           "model": {"enabled": False}}  # fmt: skip
    async with running(make_config(raw, origin=upstream.url)) as gw:
        authz_port = int(gw.authz_url.rsplit(":", 1)[1])
        origin_port = int(upstream.url.rsplit(":", 1)[1])
        front = await nginx(configured(authz_port, origin_port, free_port()))
        async with aiohttp.ClientSession() as s:
            forged = {"X-Clef-Decision": "allow", "X-Clef-Source": "override", "User-Agent": "Mozilla/5.0"}
            async with s.get(front + "/products?page=2", headers=forged) as resp:
                assert resp.status == 200
            async with s.post(front + "/api/orders", data=b'{"item": 7}', headers={"Content-Type":
                              "application/json"}) as resp:  # fmt: skip
                assert resp.status == 200
            async with s.get(front + SQLI) as resp:
                assert resp.status == 403  # nginx's own 403 page; the origin never hears of it
    targets = [seen.target for seen in upstream.seen]
    assert targets == ["/products?page=2", "/api/orders"]
    page, order = upstream.seen
    assert page.header("x-clef-source") == "rules" and page.all("x-clef-source") == ["rules"]  # not the forgery
    assert page.header("x-clef-decision") in ("allow", "cache") and page.header("x-clef-mode") == "enforce"
    assert page.header("x-clef-action") in ("forward", "cache") and page.header("x-clef-model")
    assert order.header("x-clef-decision") == "origin" and order.size == len(b'{"item": 7}')  # the body went on
    access = [json.loads(r.getMessage()) for r in caplog.records if r.name == "clef.access"]
    lines = {line["path"]: line for line in access}  # the gateway logged the original requests
    assert lines["/search"]["status"] == 403 and lines["/search"]["decision"] == "block"
    assert (lines["/api/orders"]["method"], lines["/api/orders"]["client"]) == ("POST", "127.0.0.1")
