"""The command line: check-config and config errors in-process; serve and demo as real processes."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp

from gateway.cli import main
from tests.factories import INTERIM_BUNDLE

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "deploy" / "gateway.example.yaml"
CLI = [sys.executable, "-m", "gateway.cli"]


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CLEF_")}
    return {**clean, "PYTHONPATH": str(ROOT), **extra}


def test_check_config_accepts_the_example(capsys):
    assert main(["check-config", str(EXAMPLE)]) == 0
    assert "ok" in capsys.readouterr().out


def test_config_error_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("breaker:\n  failures_to_open: 0\n")
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == "clef-gateway: config error: breaker.failures_to_open: must be > 0, got 0\n"
    assert main(["serve", "--origin", "http://127.0.0.1:9", "--config", str(bad)]) == 2


def test_bad_flag_value_names_the_key(capsys):
    assert main(["serve", "--origin", "http://127.0.0.1:9", "--listen", "nowhere"]) == 2
    assert capsys.readouterr().err == "clef-gateway: config error: listen: must be HOST:PORT, got 'nowhere'\n"


def test_serve_without_an_origin_is_a_config_error(capsys, monkeypatch):
    monkeypatch.delenv("CLEF_ORIGIN", raising=False)
    monkeypatch.delenv("CLEF_CONFIG", raising=False)
    assert main(["serve"]) == 2
    assert capsys.readouterr().err.startswith("clef-gateway: config error: origin.url: required")


def test_unknown_key_from_the_process_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  treads: 4\n")
    done = subprocess.run(
        [*CLI, "serve", "--origin", "http://127.0.0.1:9"], env=env(CLEF_CONFIG=str(bad)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("clef-gateway: config error: model.treads: unknown key")


async def test_serve_proxies_until_terminated(upstream):
    proc = await asyncio.create_subprocess_exec(
        *CLI, "serve", "--workers", "1", "--origin", upstream.url, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
        env=env(CLEF_MODE="detect"), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        started = None
        while started is None:  # log lines (a model warning) may come first
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert line, "serve exited before it started"
            started = re.search(r"proxy (\S+) -> .* admin (\S+),", line)
        proxy, admin = started.groups()
        async with aiohttp.ClientSession() as s:
            async with s.get(proxy + "/hello") as resp:
                assert resp.status == 200
            async with s.get(admin + "/v1/models") as resp:
                assert resp.status == 200
        access = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode()
        assert '"path":"/hello"' in access  # the access log, one JSON line on stdout
        assert upstream.seen[-1].header("x-clef-decision")
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0


@INTERIM_BUNDLE
def test_demo_once_prints_the_table():
    done = subprocess.run(
        [*CLI, "demo", "--once", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"],
        env=env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.splitlines()[0].split() == ["request", "status", "decision", "confidence", "source", "features"]
    rows = {line.split(":")[0]: line for line in out.splitlines()[2:10]}
    assert set(rows) == {
        "a page", "a static asset", "a search with 'select' in it", "a JSON POST with prose", "SQL injection",
        "XSS", "path traversal probe", "Log4Shell header",
    }  # fmt: skip
    for hostile in ("SQL injection", "XSS", "path traversal probe", "Log4Shell header"):
        assert " 403 " in rows[hostile] and " block " in rows[hostile], rows[hostile]
    assert " 200 " in rows["a page"]
