"""Real processes for the benchmarks: a fast nginx origin, nginx as a reverse proxy (with or without
ModSecurity v3 + OWASP CRS), and clef-gateway, each on loopback ports in a temp dir, never daemonised.

`Processes` owns every process a benchmark starts: each gets its own session (so a Ctrl-C at the terminal
reaches only the benchmark, which then stops them in order), and `close()` ends each one by its process
group id, TERM first, KILL after a grace period. Use it as a context manager; SIGTERM is turned into
SystemExit so the `finally` runs then too.

Debian packages: nginx, libnginx-mod-http-modsecurity, modsecurity-crs (and wrk for bench/gateway.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MODSEC_MODULE = "/usr/lib/nginx/modules/ngx_http_modsecurity_module.so"
# Debian ships ModSecurity's modsecurity.conf-recommended as /etc/nginx/modsecurity.conf (with
# libnginx-mod-http-modsecurity); other layouts keep the upstream name under /etc/modsecurity.
MODSEC_RECOMMENDED = ("/etc/modsecurity/modsecurity.conf-recommended", "/etc/nginx/modsecurity.conf")
CRS_SETUP = ("/etc/modsecurity/crs/crs-setup.conf", "/usr/share/modsecurity-crs/crs-setup.conf.example")
CRS_RULES = "/usr/share/modsecurity-crs/rules"
ORIGIN_BODY = ("<!doctype html><title>origin</title><p>" + "lorem ipsum dolor sit amet " * 40)[:1023] + "\n"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout:.0f} s")


def find_first(paths: tuple[str, ...], what: str) -> str:
    for p in paths:
        if Path(p).is_file():
            return p
    raise SystemExit(f"{what} not found (looked at {', '.join(paths)}); apt-get install modsecurity-crs "
                     "libnginx-mod-http-modsecurity")  # fmt: skip


def require(*tools: str) -> None:
    missing = [t for t in tools if not shutil.which(t) and not Path(f"/usr/sbin/{t}").exists()]
    if missing:
        raise SystemExit(f"missing: {', '.join(missing)} (Debian: apt-get install {' '.join(missing)})")


def nginx_bin() -> str:
    return shutil.which("nginx") or "/usr/sbin/nginx"


def versions() -> dict[str, str]:
    """Debian package versions of what the benchmarks run (empty where dpkg does not know a package)."""
    out = {}
    for pkg in ("nginx", "libnginx-mod-http-modsecurity", "libmodsecurity3", "modsecurity-crs", "wrk"):
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout:
            out[pkg] = r.stdout
    return out


def git_commit() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()


def process_cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (all their threads), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def session_pids(sid: int) -> list[int]:
    """Every live process in session `sid` (nginx's master and workers, the gateway and its children)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[3]) == sid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


class Server:
    def __init__(self, name: str, proc: subprocess.Popen, port: int, admin_port: int | None = None):
        self.name, self.proc, self.port, self.admin_port = name, proc, port, admin_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        return process_cpu_s(session_pids(self.proc.pid))

    def admin_json(self, path: str) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}{path}", timeout=10) as r:
            return json.loads(r.read())

    def admin_text(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}{path}", timeout=10) as r:
            return r.read().decode()


class Processes:
    """Starts processes in their own sessions and ends every one of them, in reverse order, on close()."""

    def __init__(self, workers: int = 1):
        self.procs: list[subprocess.Popen] = []
        self.workers = workers
        self.tmp = Path(tempfile.mkdtemp(prefix="clef-bench-"))
        self.tmp.chmod(0o755)  # nginx workers run as nobody when we are root; they read nothing here but may list it
        self._old_term = None

    def __enter__(self) -> "Processes":
        self._old_term = signal.signal(signal.SIGTERM, _raise_exit)
        return self

    def __exit__(self, *exc) -> None:
        self.close()
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(cmd, start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen, grace: float = 5.0) -> None:
        """TERM the process's group (its own session, so only what it started), then KILL after `grace`."""
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(5)
        _signal_group(proc.pid, signal.SIGKILL)  # nginx workers that outlived their master, if any
        if proc in self.procs:
            self.procs.remove(proc)

    def close(self) -> None:
        for proc in reversed(list(self.procs)):
            try:
                self.stop(proc)
            except Exception as err:  # keep going: every other process must still be ended
                log(f"  could not stop pid {proc.pid}: {err}")
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the servers --------------------------------------------------------------------------------

    def _nginx(self, name: str, server_block: str, main: str = "", http: str = "") -> Server:
        port = free_port()
        d = self.tmp / name
        (d / "tmp").mkdir(parents=True, exist_ok=True)
        (d / "tmp").chmod(0o777)
        conf = d / "nginx.conf"
        conf.write_text(f"""{main}
worker_processes {self.workers};
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_max_body_size 64m;  # clef-gateway's default limits.max_body_bytes
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    {http}
    server {{
        listen 127.0.0.1:{port} default_server;
        {server_block}
    }}
}}
""")
        err = open(d / "stderr.log", "wb")
        proc = self.popen([nginx_bin(), "-p", str(d), "-c", str(conf), "-e", str(d / "error.log")], stderr=err,
                          stdout=subprocess.DEVNULL)  # fmt: skip
        try:
            wait_port(port, proc, 30)
        except RuntimeError as e:
            raise RuntimeError(f"{name}: {e}\n{(d / 'error.log').read_text(errors='replace')[-2000:]}") from None
        return Server(name, proc, port)

    def origin(self) -> Server:
        """The one origin every configuration ends at: nginx answering 200 with a 1 KiB HTML body."""
        body = ORIGIN_BODY.replace("\\", "\\\\").replace('"', '\\"')
        return self._nginx("origin", f'default_type text/html;\n        location / {{ return 200 "{body}"; }}')

    def nginx_proxy(self, origin: Server, modsecurity: bool = False, name: str | None = None) -> Server:
        """nginx as a reverse proxy to `origin`, with ModSecurity v3 + CRS PL1 if asked. Keep-alive to the
        origin (an upstream block with `keepalive`), as clef-gateway's pooled client does."""
        name = name or ("modsecurity" if modsecurity else "nginx")
        main, waf = "", ""
        if modsecurity:
            rules = self.modsecurity_rules(self.tmp / name)
            main = f"load_module {MODSEC_MODULE};"
            waf = f"modsecurity on;\n        modsecurity_rules_file {rules};"
        block = f"""{waf}
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}"""
        upstream = f"upstream origin {{ server 127.0.0.1:{origin.port}; keepalive 64; }}"
        return self._nginx(name, block, main, http=upstream)

    def modsecurity_rules(self, d: Path) -> Path:
        """main.conf: the recommended ModSecurity config with SecRuleEngine On, then CRS at paranoia level 1."""
        d.mkdir(parents=True, exist_ok=True)
        recommended = find_first(MODSEC_RECOMMENDED, "modsecurity.conf-recommended")
        setup = find_first(CRS_SETUP, "crs-setup.conf")
        if not Path(CRS_RULES).is_dir():
            raise SystemExit(f"{CRS_RULES} not found: apt-get install modsecurity-crs")
        audit = d / "audit.log"
        audit.touch()
        audit.chmod(0o666)
        main = d / "main.conf"
        main.write_text(f"""Include {recommended}
SecRuleEngine On
SecAuditLog {audit}
Include {setup}
SecAction "id:900000,phase:1,nolog,pass,t:none,setvar:tx.paranoia_level=1"
Include {CRS_RULES}/*.conf
""")
        return main

    def snapshot(self, rev: str = "HEAD") -> Path:
        """A clean export of `rev` (git archive), so uncommitted edits in the checkout do not change the figures."""
        d = self.tmp / "code"
        d.mkdir()
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(d)], input=archive, check=True)
        return d

    def gateway(self, origin: Server, enabled: bool = True, name: str | None = None, extra: str = "",
                code: Path = ROOT, workers: int = 1) -> Server:  # fmt: skip
        """clef-gateway serve from `code` with `workers` processes (1: no parent), access log on (to /dev/null)."""
        name = name or ("clef" if enabled else "clef-off")
        d = self.tmp / name
        d.mkdir(parents=True, exist_ok=True)
        port, admin = free_port(), free_port()
        cfg = d / "gateway.yaml"
        cfg.write_text(f"model:\n  enabled: {'true' if enabled else 'false'}\n{extra}")
        cmd = [sys.executable, "-m", "gateway.cli", "serve", "--origin", origin.url, "--listen", f"127.0.0.1:{port}",
               "--admin", f"127.0.0.1:{admin}", "--config", str(cfg), "--workers", str(workers)]  # fmt: skip
        err = open(d / "stderr.log", "wb")
        env = {**os.environ, "PYTHONPATH": str(code)}
        for var in ("CLEF_CONFIG", "CLEF_ORIGIN", "CLEF_LISTEN", "CLEF_ADMIN", "CLEF_MODE", "CLEF_WORKERS"):
            env.pop(var, None)
        proc = self.popen(cmd, cwd=code, stdout=subprocess.DEVNULL, stderr=err, env=env)
        try:
            wait_port(admin, proc, 120)
            wait_port(port, proc, 10)
        except RuntimeError as e:
            raise RuntimeError(f"{name}: {e}\n{(d / 'stderr.log').read_text(errors='replace')[-2000:]}") from None
        return Server(name, proc, port, admin)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the group we created with start_new_session: this process and its children only
    except (ProcessLookupError, PermissionError):
        pass


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)
