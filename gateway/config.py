"""Config: YAML → frozen dataclasses, checked at start.

`load(path)` reads the file (PyYAML safe_load), lays the environment over it (twelve-factor: the few keys
a container sets, see ENV), then explicit overrides (the CLI's flags), and builds `Config`. An unknown key,
a value of the wrong type or out of range stops the gateway with one line naming the full key:
`breaker.failures_to_open: must be > 0, got 0`. Every default lives here; deploy/gateway.example.yaml
spells them out and a test keeps the two in step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import yaml

from gateway.address import Address  # re-exported: the gateway imports it from here
from gateway.config_cache import ResponseCacheConfig
from gateway.config_journal import JournalConfig
from gateway.config_limits import LimitsConfig, ShutdownConfig
from gateway.config_redis import RedisCacheConfig
from gateway.config_serve import AuthzConfig, check_workers
from gateway.errors import ConfigError
from gateway.schema import Bad, build, check, digits, merge_actions, overlay

if TYPE_CHECKING:
    from engine.decide import EngineSettings

MiB = 1 << 20
LABELS = ("block", "cache", "origin", "allow")
ROUTING = ("auto", "policy", "model")  # model.routing
ACTIONS = ("block", "forward", "cache")  # cache: serve from the edge response cache, fill it on a miss
DEFAULT_ACTIONS = {"block": "block", "cache": "cache", "origin": "forward", "allow": "forward"}
MODES = ("enforce", "detect")

# Environment variable → config key. CLEF_CONFIG names the file itself (read by the CLI).
ENV = {
    "CLEF_ORIGIN": "origin.url",
    "CLEF_LISTEN": "listen",
    "CLEF_ADMIN": "admin.listen",
    "CLEF_MODEL_BUNDLE": "model.bundle",
    "CLEF_MODE": "mode",
    "CLEF_LOG_LEVEL": "logging.level",
    "CLEF_REDIS_URL": "cache.redis.url",
    "CLEF_ADMIN_TOKEN": "admin.token",
    "CLEF_WORKERS": "workers",
    "CLEF_SHADOW_BUNDLE": "model.shadow_bundle",
    "CLEF_JOURNAL_PATH": "journal.path",
}
ENV_INTEGERS = frozenset({"CLEF_WORKERS"})  # the environment's values are text; these are read as integers


@dataclass(frozen=True)
class AdminConfig:
    listen: Address = Address("127.0.0.1", 9901)
    max_body_bytes: int = MiB  # a larger /v1/decision body answers 413
    max_batch: int = 64  # a longer input list answers 422
    token: str = field(default="", repr=False)  # "": none; else `Authorization: Bearer …` on all but /health
    decision_rate: float = 50.0  # /v1/decision inputs per second, a token bucket; 0: no limit
    decision_burst: int = 128  # inputs the bucket holds; at least max_batch, so any batch can pass

    def __post_init__(self) -> None:
        check(self.max_body_bytes > 0, "max_body_bytes", "must be > 0", self.max_body_bytes)
        check(self.max_batch > 0, "max_batch", "must be > 0", self.max_batch)
        if self.token and (len(self.token) < 16 or self.token != self.token.strip()):
            raise Bad("token", "must be at least 16 characters without surrounding spaces")  # never echo it
        check(self.decision_rate >= 0, "decision_rate", "must be >= 0", self.decision_rate)
        check(self.decision_burst >= self.max_batch, "decision_burst", "must be >= max_batch", self.decision_burst)


@dataclass(frozen=True)
class OriginConfig:
    url: str | None = None  # required to serve: here, CLEF_ORIGIN or --origin
    host: str = "origin"  # Host sent upstream: `origin` (the URL's) or `preserve` (the client's)
    connect_timeout_s: float = 5.0
    timeout_s: float = 60.0  # longest silence while waiting for the origin's headers or next bytes
    max_connections: int = 100
    fail_threshold: int = 5  # consecutive failures (unreachable, timeout, reset) that mark it down; 0: never
    down_for_s: float = 10.0  # while down, requests answer 502 at once (or stale from the edge cache)

    def __post_init__(self) -> None:
        if self.url is not None:
            from yarl import URL

            url = URL(self.url) if "://" in self.url else None
            ok = url is not None and url.scheme in ("http", "https") and bool(url.host) and not url.query_string
            check(ok, "url", "must be an http:// or https:// URL without a query", self.url)
        check(self.host in ("origin", "preserve"), "host", "must be origin or preserve", self.host)
        check(self.connect_timeout_s > 0, "connect_timeout_s", "must be > 0", self.connect_timeout_s)
        check(self.timeout_s > 0, "timeout_s", "must be > 0", self.timeout_s)
        check(self.max_connections > 0, "max_connections", "must be > 0", self.max_connections)
        check(self.fail_threshold >= 0, "fail_threshold", "must be >= 0", self.fail_threshold)
        check(self.down_for_s > 0, "down_for_s", "must be > 0", self.down_for_s)


@dataclass(frozen=True)
class ModelConfig:
    enabled: bool = True  # false: no model; every request is decided by the rules alone (benchmarks, triage)
    bundle: str | None = None  # bundle folder; null = the default bundle shipped in the package
    threads: int = 1  # ONNX Runtime threads per lane
    max_batch: int = 16
    max_queue: int = 1024  # beyond it, requests go to the rules at once
    max_tokens: int | None = None  # token budget; null = the bundle's
    timeout_ms: float = 800.0  # past it, the rules decide (and the breaker counts a failure)
    inspect_bytes: int = MiB  # body bytes read into memory and shown to the engine before deciding
    shadow_bundle: str | None = None  # a second bundle deciding live traffic off the path, only counted and journaled
    shadow_max_pending: int = 64  # requests waiting for the shadow model at most; more are dropped (counted)
    routing: str = "auto"  # who routes what the model lets through: policy | model | auto (what the bundle records)

    def __post_init__(self) -> None:
        if self.bundle is not None:
            check(Path(self.bundle).is_dir(), "bundle", "must be an existing folder", self.bundle)
        if self.shadow_bundle is not None:
            check(Path(self.shadow_bundle).is_dir(), "shadow_bundle", "must be an existing folder", self.shadow_bundle)
        check(self.shadow_max_pending > 0, "shadow_max_pending", "must be > 0", self.shadow_max_pending)
        check(self.routing in ROUTING, "routing", f"must be one of {', '.join(ROUTING)}", self.routing)
        for name in ("threads", "max_batch", "max_queue"):
            check(getattr(self, name) > 0, name, "must be > 0", getattr(self, name))
        check(self.max_tokens is None or self.max_tokens > 0, "max_tokens", "must be > 0", self.max_tokens)
        check(self.timeout_ms > 0, "timeout_ms", "must be > 0", self.timeout_ms)
        check(self.inspect_bytes >= 0, "inspect_bytes", "must be >= 0", self.inspect_bytes)


@dataclass(frozen=True)
class CacheConfig:
    ttl_s: float = 600.0  # 0 turns the decision cache off
    max_entries: int = 100_000
    responses: ResponseCacheConfig = ResponseCacheConfig()  # the edge cache for `cache` actions (config_cache.py)
    redis: RedisCacheConfig = RedisCacheConfig()  # decisions shared by replicas (config_redis.py)

    def __post_init__(self) -> None:
        check(self.ttl_s >= 0, "ttl_s", "must be >= 0", self.ttl_s)
        check(self.max_entries >= 0, "max_entries", "must be >= 0", self.max_entries)


@dataclass(frozen=True)
class BreakerConfig:
    failures_to_open: int = 5  # consecutive model errors before opening
    reset_after_s: float = 30.0  # wait before one trial call

    def __post_init__(self) -> None:
        check(self.failures_to_open > 0, "failures_to_open", "must be > 0", self.failures_to_open)
        check(self.reset_after_s > 0, "reset_after_s", "must be > 0", self.reset_after_s)


@dataclass(frozen=True)
class RulesConfig:
    path: str | None = None  # ruleset YAML; null = the default rules shipped in the package
    overrides: tuple[dict, ...] = ()  # operator allow/deny rules, checked by the rule engine at start
    ensemble: bool = True  # the rules read what the model let through; a rules block stands
    asset_probes: bool = True  # with the ensemble, a model block that only calls a page-asset request a probe is the rules' to decide

    def __post_init__(self) -> None:
        if self.path is not None:
            check(Path(self.path).is_file(), "path", "must be an existing file", self.path)


@dataclass(frozen=True)
class LabelAction:
    action: str = "forward"  # block | forward | cache
    min_confidence: float = 0.0  # below it, `otherwise` applies instead
    otherwise: str = "forward"  # forward | cache

    def __post_init__(self) -> None:
        check(self.action in ACTIONS, "action", f"must be one of {', '.join(ACTIONS)}", self.action)
        check(0.0 <= self.min_confidence <= 1.0, "min_confidence", "must be between 0 and 1", self.min_confidence)
        check(self.otherwise in ("forward", "cache"), "otherwise", "must be forward or cache", self.otherwise)


@dataclass(frozen=True)
class BlockResponse:
    status: int = 403
    body: str = "Forbidden: this request was blocked by the gateway.\n"
    content_type: str = "text/plain"

    def __post_init__(self) -> None:
        check(400 <= self.status <= 599, "status", "must be a 4xx or 5xx status", self.status)
        check(bool(self.content_type.strip()), "content_type", "must not be empty", self.content_type)


@dataclass(frozen=True)
class ActionMap:
    block: LabelAction = LabelAction(DEFAULT_ACTIONS["block"])
    cache: LabelAction = LabelAction(DEFAULT_ACTIONS["cache"])
    origin: LabelAction = LabelAction(DEFAULT_ACTIONS["origin"])
    allow: LabelAction = LabelAction(DEFAULT_ACTIONS["allow"])
    block_response: BlockResponse = BlockResponse()

    def for_label(self, label: str) -> LabelAction:
        return getattr(self, label)


@dataclass(frozen=True)
class Route:
    prefix: str  # path prefix, matched on the raw path; the longest match wins
    mode: str = "enforce"  # enforce | detect (decide, annotate, log, never block); defaults to the top-level mode
    actions: ActionMap = ActionMap()  # the top-level map with this route's keys laid over it

    def __post_init__(self) -> None:
        check(self.prefix.startswith("/"), "prefix", "must start with /", self.prefix)
        check(self.mode in MODES, "mode", "must be enforce or detect", self.mode)


@dataclass(frozen=True)
class HeadersConfig:
    echo: bool = False  # also put the x-clef-* decision headers on the response to the client


@dataclass(frozen=True)
class LoggingConfig:
    level: str = "info"  # debug | info | warning | error
    access_log: bool = True  # one JSON line per request on the `clef.access` logger
    log_query: bool = False  # log the path with its query (queries carry secrets: off by default)
    sample_allowed: float = 1.0  # share of requests that were let through to log; blocks and errors always are

    def __post_init__(self) -> None:
        levels = ("debug", "info", "warning", "error")
        check(self.level in levels, "level", f"must be one of {', '.join(levels)}", self.level)
        check(0.0 <= self.sample_allowed <= 1.0, "sample_allowed", "must be between 0 and 1", self.sample_allowed)


@dataclass(frozen=True)
class Config:
    listen: Address = Address("127.0.0.1", 8080)
    workers: int | None = None  # worker processes sharing `listen` (SO_REUSEPORT); null: one per core
    admin: AdminConfig = AdminConfig()
    origin: OriginConfig = OriginConfig()
    mode: str = "enforce"  # the default for every route
    model: ModelConfig = ModelConfig()
    cache: CacheConfig = CacheConfig()
    breaker: BreakerConfig = BreakerConfig()
    rules: RulesConfig = RulesConfig()
    actions: ActionMap = ActionMap()
    routes: tuple[Route, ...] = ()
    headers: HeadersConfig = HeadersConfig()
    limits: LimitsConfig = LimitsConfig()  # config_limits.py
    shutdown: ShutdownConfig = ShutdownConfig()
    logging: LoggingConfig = LoggingConfig()
    authz: AuthzConfig = AuthzConfig()  # the nginx auth_request / Envoy ext_authz listener (config_serve.py)
    journal: JournalConfig = JournalConfig()  # the decision journal, off unless journal.path (config_journal.py)
    _by_length: tuple[Route, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check(self.mode in MODES, "mode", "must be enforce or detect", self.mode)
        check_workers(self.workers)
        authz = self.authz.listen
        # the authz listener is told apart from the proxy's by its port (gateway/authz.py)
        check(authz is None or authz.port == 0 or authz.port != self.listen.port, "authz.listen",
              "must not use the proxy listener's port", authz and str(authz))  # fmt: skip
        object.__setattr__(self, "_by_length", tuple(sorted(self.routes, key=lambda r: -len(r.prefix))))

    def route(self, path: str) -> Route:
        """The route whose prefix is the longest match for `path`, or the top-level defaults."""
        for r in self._by_length:
            if path.startswith(r.prefix):
                return r
        return Route("/", self.mode, self.actions)

    def require_origin(self) -> str:
        if not self.origin.url:
            raise ConfigError("origin.url: required to serve (set it in the config, CLEF_ORIGIN or --origin)")
        return self.origin.url

    def engine_settings(self) -> "EngineSettings":
        from engine.decide import EngineSettings  # late: the gateway's config must load without a model

        m = self.model
        return EngineSettings(
            bundle=m.bundle,
            threads=m.threads,
            max_batch=m.max_batch,
            max_queue=m.max_queue,
            max_tokens=m.max_tokens,
            timeout_ms=m.timeout_ms,
            cache_ttl_s=self.cache.ttl_s,
            cache_max_entries=self.cache.max_entries,
            failures_to_open=self.breaker.failures_to_open,
            reset_after_s=self.breaker.reset_after_s,
            rules=self.rules.path,
            overrides=self.rules.overrides,
            ensemble=self.rules.ensemble,
            asset_probes=self.rules.asset_probes,
            disabled=not m.enabled,
            shared_cache_url=self.cache.redis.url,
            shared_cache_timeout_ms=self.cache.redis.timeout_ms,
            shared_cache_prefix=self.cache.redis.prefix,
            shadow_bundle=m.shadow_bundle,
            shadow_max_pending=m.shadow_max_pending,
            routing=m.routing,
        )


def load(
    path: str | Path | None = None, env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> Config:
    """The config file (None: defaults only), then the environment, then `overrides` ({"origin.url": ...})."""
    raw: Any = {}
    if path is not None:
        try:
            raw = yaml.safe_load(Path(path).read_text("utf-8"))
        except OSError as err:
            raise ConfigError(f"{path}: cannot read ({err.strerror or err})") from None
        except yaml.YAMLError as err:
            where = getattr(err, "problem_mark", None)
            at = f" at line {where.line + 1}" if where else ""
            raise ConfigError(f"{path}: not valid YAML{at} ({getattr(err, 'problem', None) or err})") from None
    return from_dict(raw, env=env, overrides=overrides)


def from_dict(raw: Any, env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    env = os.environ if env is None else env
    layers = {var: (key, _env_value(var, env[var])) for var, key in ENV.items() if env.get(var)}
    raw, sources = overlay(raw, layers, overrides or {})
    raw = merge_actions(raw, {label: {"action": DEFAULT_ACTIONS[label]} for label in LABELS})
    try:
        return build(Config, raw, "")
    except ConfigError as err:
        key, _, rest = err.message.partition(":")
        if key in sources:  # a value from the environment: say which variable to fix
            raise ConfigError(f"{key} (from {sources[key]}):{rest}") from None
        raise


def _env_value(var: str, value: str) -> Any:
    if var in ENV_INTEGERS and digits(value.strip()):
        return int(value)
    return value  # left as text: the schema then names the key and the variable in its error
