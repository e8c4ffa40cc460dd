"""The config and decider that requests start with, swapped whole on a reload (SIGHUP).

Input: the first (config, Decider) at startup, then each reloaded pair. Output: `enter()` hands a request
the current Generation and counts it in flight; `leave()` counts it out. A request keeps the Generation
it entered with until it is answered, so a reload never changes the rules under a request half-way.

`swap()` makes a new Generation current at once; the old one is retired and its Decider closed only when
its last request leaves (a model's batcher must not stop under a request that is waiting for it).
`reload()` does the whole reload: build and warm the new Decider off the event loop, refuse it when it is
broken (a ruleset that does not load, a model that does not load while one is wanted), then swap.

Short-circuits: nothing; pipeline.handle() asks `in_flight` to shed load (limits.max_in_flight).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable

from gateway.config import Address, Config
from gateway.config_journal import RESTART_ONLY as JOURNAL_RESTART_ONLY
from gateway.errors import ConfigError

log = logging.getLogger("clef.gateway")

# What only a restart changes: sockets, the worker processes, the origin session, the edge cache's memory,
# the listener limits, the log level (set once on the root logger).
RESTART_ONLY = ("listen", "admin.listen", "authz.listen", "workers", "limits", "shutdown", "origin.connect_timeout_s",
                "origin.timeout_s", "origin.max_connections", "cache.responses", "logging.level",
                *JOURNAL_RESTART_ONLY)  # fmt: skip (the journal's file and writer: config_journal.py)


@dataclass(eq=False)
class Generation:
    config: Config
    decider: Any  # engine.decide.Decider
    number: int = 1
    in_flight: int = 0
    retired: bool = False
    closing: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)


class Holder:
    def __init__(self, config: Config, decider: Any = None, clock: Callable[[], float] | None = None):
        self.current = Generation(config, decider)
        self.clock = clock  # the engine's (tests pass a fake one): reloaded deciders get it too
        self.in_flight = 0  # across generations: what limits.max_in_flight bounds
        self._closing: set[asyncio.Task] = set()
        self._retired: list[Generation] = []

    @property
    def config(self) -> Config:
        return self.current.config

    @property
    def decider(self) -> Any:
        return self.current.decider

    def enter(self) -> Generation:
        gen = self.current
        gen.in_flight += 1
        self.in_flight += 1
        return gen

    def leave(self, gen: Generation) -> None:
        gen.in_flight -= 1
        self.in_flight -= 1
        if gen.retired and gen.in_flight == 0:
            self._close_later(gen)

    def swap(self, config: Config, decider: Any) -> Generation:
        old = self.current
        self.current = Generation(config, decider, old.number + 1)
        old.retired = True
        self._retired.append(old)
        if old.in_flight == 0:
            self._close_later(old)
        return old

    def _close_later(self, gen: Generation) -> None:
        if gen.closing:
            return
        gen.closing = True
        self._retired.remove(gen)
        task = asyncio.get_running_loop().create_task(_close(gen))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """At shutdown, after the listeners drained: the current decider and any retired one still open."""
        for gen in (*self._retired, self.current):
            if not gen.closing:
                gen.closing = True
                await _close(gen)
        self._retired.clear()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


async def _close(gen: Generation) -> None:
    try:
        if gen.decider is not None:
            await gen.decider.close()
    except Exception:
        log.exception("closing the decider of config generation %d", gen.number)
    finally:
        gen.closed.set()


def restart_only_changes(old: Config, new: Config) -> list[str]:
    """The keys among RESTART_ONLY whose values differ (the leaf keys, for a message naming them)."""
    changed: list[str] = []
    for key in RESTART_ONLY:
        a, b = _get(old, key), _get(new, key)
        if a != b:
            changed += _leaves(a, b, key) if is_dataclass(a) and not isinstance(a, Address) else [key]
    return changed


def _get(config: Config, key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = getattr(node, part)
    return node


def _leaves(a: Any, b: Any, key: str) -> list[str]:
    out = []
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x != y:
            nested = is_dataclass(x) and not isinstance(x, Address)
            out += _leaves(x, y, f"{key}.{f.name}") if nested else [f"{key}.{f.name}"]
    return out


async def reload(holder: Holder, config: Config, create: Callable[[Config], Any]) -> bool:
    """Build the engine `config` asks for with `create` (in a thread: it reads and warms a model), check
    it, and swap it in. False, with one error line, when it is refused: the running set stays."""
    try:
        config.require_origin()
        decider = await asyncio.to_thread(create, config)
    except ConfigError as err:
        log.error("reload refused, the running config stays: %s", err.message)
        return False
    except Exception as err:  # a file that cannot be read, say: refused all the same, never half-applied
        log.error("reload refused, the running config stays: %s: %s", type(err).__name__, err)
        return False
    if decider.model is None and config.model.enabled and getattr(decider, "model_error", None):
        await decider.close()
        log.error("reload refused, the running config stays: model: %s", decider.model_error)
        return False
    if getattr(decider, "shadow_error", None):  # a shadow asked for and not loaded: refused like a model
        await decider.close()
        log.error("reload refused, the running config stays: shadow model: %s", decider.shadow_error)
        return False
    await decider.start()
    for key in restart_only_changes(holder.config, config):
        log.warning("reload: %s changed; it takes effect on the next restart", key)
    old = holder.swap(config, decider)
    log.info("reload: config generation %d in place of %d (%d requests finishing on the old one)",
             holder.current.number, old.number, old.in_flight)  # fmt: skip
    return True
