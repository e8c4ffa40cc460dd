"""The `clef-gateway` command.

    clef-gateway serve --origin URL [--listen HOST:PORT] [--admin HOST:PORT] [--config FILE] [--bundle DIR]
                       [--workers N]
    clef-gateway demo [--origin URL] [--listen HOST:PORT] [--admin HOST:PORT] [--bundle DIR] [--once]
    clef-gateway check-config FILE
    clef-gateway feedback list|mark|import|export ...   the decision journal (gateway/feedback_cli.py)
    clef-gateway train --from-bundle default|DIR --feedback JOURNAL --out DIR   fine-tune, gated

Settings come from the config file (--config, or CLEF_CONFIG), then the environment (CLEF_ORIGIN,
CLEF_LISTEN, CLEF_ADMIN, CLEF_MODEL_BUNDLE, CLEF_MODE, CLEF_LOG_LEVEL, CLEF_REDIS_URL, CLEF_ADMIN_TOKEN,
CLEF_WORKERS), then the flags. A config error prints one line naming the full key and exits 2; an address
that cannot be bound exits 1.

`serve` runs `workers` processes (default: one per core); with more than one, this process is their
parent (gateway/supervisor.py, gateway/fleet.py) and each worker is this command again, told by the
parent which worker it is. `--workers 1` is one process, no parent.

Signals, while serving: SIGHUP reads the settings again the same way and reloads (config, rules, model
bundle; refused with a log line, the running set kept, when they do not load). SIGTERM or SIGINT stops
accepting, lets requests in flight finish for up to shutdown.grace_s, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import Any, Callable

from gateway import config as configs
from gateway import feedback_cli, supervisor
from gateway.config import Config
from gateway.config_serve import worker_count
from gateway.errors import ConfigError
from gateway.server import ListenError, running

EXIT_CONFIG = 2
log = logging.getLogger("clef.gateway")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    args.argv = argv  # what each worker is started with
    try:
        return args.run(args)
    except ConfigError as err:
        print(f"clef-gateway: config error: {err.message}", file=sys.stderr)
        return EXIT_CONFIG
    except ListenError as err:
        print(f"clef-gateway: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="clef-gateway", description="An edge gateway that decides every request.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="proxy requests to an origin, deciding each one")
    _common(serve)
    serve.add_argument("--workers", metavar="N", type=int, help="worker processes (default: one per core)")
    serve.set_defaults(run=cmd_serve)

    demo = sub.add_parser("demo", help="run a demo origin behind the gateway and send it some requests")
    _common(demo)
    demo.add_argument("--once", action="store_true", help="print the table and exit instead of serving")
    demo.set_defaults(run=cmd_demo)

    check = sub.add_parser("check-config", help="load and check a config file, then exit")
    check.add_argument("file", metavar="FILE")
    check.set_defaults(run=cmd_check_config)

    feedback_cli.add_commands(sub)  # feedback and train
    return p


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--origin", metavar="URL", help="the origin to forward to (origin.url)")
    p.add_argument("--listen", metavar="HOST:PORT", help="proxy address (default 127.0.0.1:8080)")
    p.add_argument("--admin", metavar="HOST:PORT", help="admin address (default 127.0.0.1:9901)")
    p.add_argument("--config", metavar="FILE", help="YAML config (default: $CLEF_CONFIG, else built-in defaults)")
    p.add_argument("--bundle", metavar="DIR", help="model bundle folder (default: the bundled model)")


def load(args: argparse.Namespace, base: dict[str, Any] | None = None) -> Config:
    path = args.config or os.environ.get("CLEF_CONFIG") or None
    flags = {"origin.url": args.origin, "listen": args.listen, "admin.listen": args.admin, "model.bundle": args.bundle,
             "workers": getattr(args, "workers", None), **supervisor.overrides()}  # a worker: what the parent says
    if path is None and base is not None:
        return configs.from_dict(base, overrides=flags)
    return configs.load(path, overrides=flags)


def setup_logging(config: Config) -> None:
    """Access lines go to stdout exactly as observe writes them (JSON); everything else to stderr."""
    level = getattr(logging, config.logging.level.upper())
    told = supervisor.told()
    who = f" [worker {told['index']}]" if told else ""  # several processes share stderr: say which one
    logging.basicConfig(level=level, format=f"%(asctime)s %(levelname)s %(name)s{who}: %(message)s", stream=sys.stderr)
    access = logging.getLogger("clef.access")
    access.handlers[:] = [logging.StreamHandler(sys.stdout)]
    access.setLevel(logging.INFO)
    access.propagate = False


def cmd_serve(args: argparse.Namespace) -> int:
    config = load(args)
    config.require_origin()
    setup_logging(config)
    count = worker_count(config.workers)
    if count > 1:
        from gateway import fleet

        return asyncio.run(fleet.serve(config, args.argv, count))
    supervisor.adopt()
    asyncio.run(_serve(config, args))
    return 0


async def _serve(config: Config, args: argparse.Namespace | None = None) -> None:
    stop = stop_on_signals()  # first: a SIGTERM while the model loads still ends the process cleanly
    serving: list[Any] = []  # the running gateway, once it is; a SIGHUP before then is ignored, not fatal
    if args is not None:
        reload_on_sighup(lambda: load(args), serving)
    told = supervisor.told()
    async with running(config, reuse_port=told is not None) as gw:
        serving.append(gw)
        model = gw.decider.health().get("model") or {}
        name = f"{model.get('name')}@{model.get('version')}" if model else "none (deciding on rules)"
        authz = f", authz {gw.authz_url}" if gw.authz_url else ""
        if told:  # not the gateway's own line (the parent prints that): no "->" in it
            line = f"worker {told['index']} (pid {os.getpid()}) serving {gw.proxy_url}, own admin {gw.admin_url}"
        else:
            line = f"proxy {gw.proxy_url} -> {config.origin.url}, admin {gw.admin_url}"
        print(f"clef-gateway: {line}, model {name}{authz}", file=sys.stderr, flush=True)
        await stop.wait()
        serving.clear()  # no reloads while draining
        log.info("stopping: no new connections; up to %gs for requests in flight", config.shutdown.grace_s)


def reload_on_sighup(settings: Callable[[], Config], serving: list[Any]) -> None:
    """SIGHUP: load the settings again and reload the gateway in `serving`; one at a time (a second SIGHUP
    meanwhile waits its turn). Installed before the gateway starts: SIGHUP's default would end the process."""
    loop = asyncio.get_running_loop()
    lock = asyncio.Lock()
    tasks: set[asyncio.Task] = set()

    async def reload() -> None:
        if not serving:
            log.warning("SIGHUP ignored: still starting")
            return
        async with lock:
            try:
                config = settings()
            except ConfigError as err:
                log.error("reload refused, the running config stays: %s", err.message)
                return
            await serving[0].reload(config)

    def on_hup() -> None:
        task = loop.create_task(reload())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    try:
        loop.add_signal_handler(signal.SIGHUP, on_hup)
    except (NotImplementedError, RuntimeError, AttributeError):  # no SIGHUP on this platform
        pass


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM, for a clean shutdown (listeners closed, the engine closed)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not on this platform or not the main thread
            pass
    return stop


def cmd_demo(args: argparse.Namespace) -> int:
    from gateway import demo

    return asyncio.run(demo.run(args))


def cmd_check_config(args: argparse.Namespace) -> int:
    config = configs.load(args.file)
    routes = ", ".join(f"{r.prefix} ({r.mode})" for r in config.routes) or "none"
    print(
        f"{args.file}: ok (listen {config.listen}, admin {config.admin.listen}, "
        f"origin {config.origin.url or 'unset'}, mode {config.mode}, routes: {routes})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
