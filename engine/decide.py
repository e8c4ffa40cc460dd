"""Decider.decide(features) → Verdict: overrides → decision cache → model (behind the breaker) → rules.

The model is awaited for at most `timeout_ms`; a timeout, an error, a full queue or an open breaker sends
the request to the rules, so every request gets a decision at predictable latency. With `ensemble` (the
default) the rules also read every request the model let through, and a rules block stands: the two
catch different attacks. Only decisions of the model path are cached (keyed by the model and, with the
ensemble, the ruleset): in-process, and, when a Redis URL is set, in Redis as well
(engine/shared_cache.py), which is asked after a local miss and before the model, within its own short
timeout. When the model saw only part of a large body, the rules scan the whole of it as well.

With `shadow_bundle` set, a second bundle is loaded beside the model (engine/shadow.py): it decides the
same traffic off the request's path, for comparison before a promotion. A shadow bundle that does not
load leaves the decider without a shadow (`shadow_error` says why); it never changes a decision.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol

from engine import bundle as bundles
from engine.batcher import INLINE_BODY_BYTES, Batcher
from engine.breaker import Breaker
from engine.cache import DecisionCache
from engine.errors import EngineError
from engine.features import Features
from engine.labels import by_policy
from engine.model import Model
from engine.shadow import Shadow
from engine.shared_cache import SharedCache
from engine.verdict import Verdict
from rules.engine import RuleEngine

log = logging.getLogger("clef.engine")
RULES_INLINE_BODY_BYTES = 4096  # larger bodies are read by the rules in a thread
# What /health says of a model: which one serves. /health answers without the admin token and is polled by
# every probe, so the bundle's folder, training record and eval figures stay with /v1/models (token-protected).
HEALTH_MODEL_KEYS = ("name", "version", "sha256", "max_tokens", "routing")


def brief(info: dict[str, Any]) -> dict[str, Any]:
    return {k: info[k] for k in HEALTH_MODEL_KEYS if k in info}


@dataclass(frozen=True)
class EngineSettings:
    bundle: str | None = None  # bundle folder; None = the default bundle inside the package
    threads: int = 1  # ONNX Runtime intra-op threads per lane
    max_batch: int = 16
    max_queue: int = 1024
    max_tokens: int | None = None  # token budget; None = the bundle's
    timeout_ms: float = 800.0
    cache_ttl_s: float = 600.0
    cache_max_entries: int = 100_000
    failures_to_open: int = 5
    reset_after_s: float = 30.0
    rules: str | None = None  # ruleset YAML; None = rules/default.yaml
    ensemble: bool = True  # the rules also read what the model let through, and their block stands
    asset_probes: bool = True  # with the ensemble: a model block that only calls a page-asset request a probe is the rules' to decide
    overrides: tuple[dict, ...] = ()
    disabled: bool = False  # decisions off: every request gets the rules' routing label (for benchmarks)
    shared_cache_url: str = ""  # Redis URL of the cache shared by replicas; "" = none
    shared_cache_timeout_ms: float = 10.0  # longest wait for Redis per read; past it, a miss
    shared_cache_prefix: str = "clef:decision:"
    shadow_bundle: str | None = None  # a second bundle deciding alongside, off the request's path; None = none
    shadow_max_pending: int = 64  # requests waiting for the shadow at most; more are dropped (counted)
    routing: str = "auto"  # who routes what the model lets through: policy | model | auto (what the bundle records)


class Predictor(Protocol):
    """What the decider needs of a model: the real one is ModelRunner, tests pass fakes to reach faults."""

    id: str

    def info(self) -> dict[str, Any]: ...
    async def predict(self, features: Features) -> Verdict: ...
    async def close(self) -> None: ...


class ModelRunner:
    """A loaded bundle behind the batcher. With `routing` "policy", what the model lets through is routed by
    the written labelling policy (engine.labels.by_policy) rather than by its routing head."""

    def __init__(self, model: Model, max_batch: int, max_queue: int, routing: str = "model"):
        self.model = model
        self.id = model.id
        self.routing = routing
        self.batcher = Batcher(model, max_batch=max_batch, max_queue=max_queue)

    @classmethod
    def load(cls, settings: EngineSettings) -> "ModelRunner":
        bundle = bundles.load(settings.bundle)
        model = Model(bundle, threads=settings.threads, max_tokens=settings.max_tokens)
        model.warm_up()
        return cls(model, settings.max_batch, settings.max_queue, bundles.routing_of(settings.routing, bundle))

    def info(self) -> dict[str, Any]:
        return {**self.model.bundle.info(), "max_tokens": self.model.max_tokens, "routing": self.routing}

    async def predict(self, features: Features) -> Verdict:
        verdict = await self.batcher.predict(features)
        return by_policy(verdict, features) if self.routing == "policy" else verdict

    async def close(self) -> None:
        await self.batcher.close()


class Decider:
    def __init__(
        self,
        model: Predictor | None,
        rules: RuleEngine,
        settings: EngineSettings = EngineSettings(),
        clock: Callable[[], float] | None = None,
        model_error: str | None = None,
        shadow: Shadow | None = None,
        shadow_error: str | None = None,
    ):
        self.model = model
        self.rules = rules
        self.settings = settings
        self.clock = clock or time.monotonic
        self.cache = DecisionCache(settings.cache_ttl_s, settings.cache_max_entries, clock=self.clock)
        self.breaker = Breaker(settings.failures_to_open, settings.reset_after_s, clock=self.clock)
        self.shared: SharedCache | None = None
        if settings.shared_cache_url and self.cache.enabled:  # its TTL is the local cache's: 0 turns both off
            self.shared = SharedCache(
                settings.shared_cache_url, settings.cache_ttl_s, settings.shared_cache_timeout_ms,
                settings.shared_cache_prefix, clock=self.clock,
            )  # fmt: skip
        self.timeout_s = settings.timeout_ms / 1000.0
        self.model_error = model_error if model is None else None
        self.shadow = shadow
        self.shadow_error = shadow_error if shadow is None else None
        self.counts: Counter[str] = Counter()  # decisions by source
        self.fallbacks: Counter[str] = Counter()  # rules fallbacks by reason

    @classmethod
    def create(cls, settings: EngineSettings = EngineSettings(), clock=None, model: Predictor | None = None) -> "Decider":
        """Load rules and model. A broken bundle does not stop the engine: it decides on rules alone and
        /health says why. A broken ruleset does stop it (RuleError): it is the last line of defence."""
        rules = RuleEngine.load(settings.rules, overrides=settings.overrides)
        error = None
        if model is None and not settings.disabled:
            try:
                model = ModelRunner.load(settings)
            except EngineError as err:
                error = str(err)
                log.error("model unavailable, deciding on rules alone: %s", err)
        shadow, shadow_error = cls._shadow(settings, clock)
        return cls(model, rules, settings, clock=clock, model_error=error, shadow=shadow, shadow_error=shadow_error)

    @staticmethod
    def _shadow(settings: EngineSettings, clock: Callable[[], float] | None) -> tuple[Shadow | None, str | None]:
        if not settings.shadow_bundle or settings.disabled:
            return None, None
        try:
            shadow = replace(settings, bundle=settings.shadow_bundle, max_queue=settings.shadow_max_pending)
            runner = ModelRunner.load(shadow)
        except EngineError as err:
            log.error("shadow model unavailable, running without it: %s", err)
            return None, str(err)
        return Shadow(runner, settings.shadow_max_pending, settings.cache_ttl_s, clock=clock), None

    @property
    def model_id(self) -> str:
        return self.model.id if self.model else ""

    @property
    def cache_id(self) -> str:
        """What a cached decision depends on besides the request: the model (and who routes for it), and the
        rules when they take part in every decision."""
        if self.model is None:
            return ""
        model = self.model.id + ("+policy-routes" if getattr(self.model, "routing", "model") == "policy" else "")
        if not self.settings.ensemble:
            return model
        return f"{model}+{self.rules.model}" + ("" if self.settings.asset_probes else "+asset-blocks")

    async def decide(self, features: Features) -> Verdict:
        verdict = await self._decide(features)
        self.counts[verdict.source.value] += 1
        return verdict

    async def _decide(self, features: Features) -> Verdict:
        if (override := self.rules.override(features)) is not None:
            return override
        if self.model is None:
            self.fallbacks["disabled" if self.settings.disabled else "unavailable"] += 1
            return await self._rules(self.rules.evaluate, features)
        if len(features.body) > INLINE_BODY_BYTES:
            await asyncio.to_thread(lambda: features.canonical)
        key = features.cache_key(self.cache_id)
        if (hit := self.cache.get(key)) is not None:
            return hit.from_cache()
        if self.shared is not None and (hit := await self.shared.get(key)) is not None:
            self.cache.put(key, hit)
            return hit
        if not self.breaker.allows():
            self.fallbacks["breaker_open"] += 1
            return await self._rules(self.rules.evaluate, features)
        try:
            verdict = await asyncio.wait_for(self.model.predict(features), self.timeout_s)
        except (EngineError, asyncio.TimeoutError) as err:
            self.breaker.record_failure()
            self.fallbacks["timeout" if isinstance(err, asyncio.TimeoutError) else "error"] += 1
            return await self._rules(self.rules.evaluate, features)
        self.breaker.record_success()
        if self.settings.ensemble or verdict.truncated:
            # Two views of one request: the rules' signatures and libinjection catch classes a small model
            # learns slowly (and they read all of a body the model saw only part of). A rules block
            # stands; measured on the held-out split, the union gains ~10 points of attack recall for
            # ~0.16 point of false positives (bench/RESULTS.md).
            assets = self.settings.asset_probes
            verdict = await self._rules(lambda f: self.rules.second_look(verdict, f, assets), features)
        self.cache.put(key, verdict)
        if self.shared is not None:
            self.shared.put(key, verdict)
        return verdict

    @staticmethod
    async def _rules(fn: Callable[[Features], Verdict], features: Features) -> Verdict:
        """A rules call; off the event loop for a body over 4 KB (bench/RESULTS.md: 0.4–0.6 ms for a 1 KB body,
        6.6 ms median for a 16 KB JSON document of long values, ~35 ms for 64 KB of 3,000 short leaves), so
        one such request does not hold up the others. Small bodies stay inline, where a hop to a thread would
        cost about what it saves."""
        if len(features.body) > RULES_INLINE_BODY_BYTES:
            return await asyncio.to_thread(fn, features)
        return fn(features)

    def health(self) -> dict[str, Any]:
        total = sum(self.counts.values())
        out: dict[str, Any] = {
            "status": "ok",
            "model": brief(self.model.info()) if self.model else None,
            "breaker": self.breaker.state,
            "decisions": dict(self.counts),
            "fallback_ratio": round(self.counts.get("rules", 0) / total, 4) if total else 0.0,
            "rules": self.rules.model,
        }
        if self.shared is not None:  # a Redis that is down slows nothing: it is reported, not a 503
            out["shared_cache"] = self.shared.health()
        if self.shadow is not None or self.shadow_error:  # reported, never a 503: it decides nothing
            out["shadow"] = (
                {"model": brief(self.shadow.info()), "agreement": self.shadow_agreement()} if self.shadow
                else {"error": f"shadow model not loaded: {self.shadow_error}"}
            )  # fmt: skip
        if self.settings.disabled:
            out["model_disabled"] = True
        elif self.model is None:
            out.update(status="unavailable", reason=f"model not loaded: {self.model_error}")
        elif self.breaker.state != "closed":
            out.update(status="unavailable", reason=f"circuit breaker {self.breaker.state}: deciding on rules")
        return out

    def models(self) -> list[dict[str, Any]]:
        live = [self.model.info()] if self.model else []
        return live + ([{**self.shadow.info(), "shadow": True}] if self.shadow else [])

    def shadow_agreement(self) -> float | None:
        """Share of shadow decisions that matched the live label; None before the first."""
        n = sum(self.shadow.agreement.values()) if self.shadow else 0
        return round(sum(c for (a, b), c in self.shadow.agreement.items() if a == b) / n, 4) if n else None

    async def start(self) -> None:
        """Check the shared cache once, so /health says at once when Redis is unreachable."""
        if self.shared is not None and not await self.shared.ping():
            log.warning("shared cache unreachable at start: %s", self.shared.health())

    async def close(self) -> None:
        if self.shadow is not None:
            await self.shadow.close()
        if self.model:
            await self.model.close()
        if self.shared is not None:
            await self.shared.close()
