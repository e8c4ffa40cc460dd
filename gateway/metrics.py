"""Metrics: the gateway's Prometheus series, in a registry of each app's own.

Input: each finished Exchange (`observe`, called by the observe phase) and, at scrape time, the state the
engine and the edge cache keep anyway (breaker, fallbacks, caches, batch sizes). Output: the text
exposition for the admin listener's GET /metrics (`scrape`). A per-app CollectorRegistry, never the
global one, so several apps in one process (tests, benchmarks) keep their own counts.

Per request, a few dictionary and list increments on the event loop (Tally, Buckets): no lock, no label
child to build, about a microsecond in all, where prometheus_client's own metrics cost several. They are
turned into metric families only when Prometheus asks; so is what the engine and the edge cache already
count themselves, which is read, not copied on every request.

    clef_requests_total, clef_request_seconds, clef_requests_in_flight
    clef_decisions_total{label,source,action}, clef_decision_seconds{source}
    clef_model_input_tokens, clef_model_batch_size, clef_model_info{name,version}, clef_config_info{hash}
    clef_fallbacks_total{reason}, clef_fallback_ratio, clef_breaker_state (0 closed, 1 half-open, 2 open),
    clef_breaker_opened_total
    clef_decision_cache_hits_total, clef_decision_cache_misses_total, clef_decision_cache_entries
    clef_edge_cache_requests_total{status}, clef_edge_cache_hits_total, clef_edge_cache_misses_total,
    clef_edge_cache_bytes, clef_edge_cache_entries, clef_edge_cache_evictions_total,
    clef_edge_cache_served_bytes_total
    clef_upstream_responses_total{status}, clef_upstream_seconds
    clef_errors_total{kind} (every answer the gateway made itself: x-clef-error), clef_refused_total{kind}
    (refused before the pipeline: parse errors, slow heads, connections over the limit)
    clef_origin_up (1 up, 0 marked down by passive health), clef_origin_failures (in a row),
    clef_origin_marked_down_total, clef_config_generation (1, then +1 per reload)
    clef_shadow_agreement_total{live,shadow}, clef_shadow_dropped_total, clef_shadow_failed_total (with
    model.shadow_bundle); clef_journal_written_total, clef_journal_dropped_total, clef_journal_failed_total,
    clef_journal_queued (with journal.path)
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)

if TYPE_CHECKING:
    from gateway.config import Config
    from gateway.edgecache import EdgeCache
    from gateway.exchange import Exchange

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.8, 1.0, 2.5, 5.0, 10.0, 30.0)
TOKENS = tuple(float(1 << n) for n in range(4, 17))  # 16 … 65,536, the model's longest input
BATCH = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
BREAKER = {"closed": 0, "half-open": 1, "open": 2}


class Tally:
    """A counter by label values, kept in a dict; only ever touched from the event loop."""

    def __init__(self, name: str, doc: str, labels: tuple[str, ...] = ()):
        self.name, self.doc, self.labels = name, doc, labels
        self.counts: dict[tuple, int] = {}

    def inc(self, *values: Any) -> None:
        self.counts[values] = self.counts.get(values, 0) + 1

    def family(self) -> Metric:
        out = CounterMetricFamily(self.name, self.doc, labels=self.labels)
        for values, n in sorted(self.counts.items(), key=lambda kv: str(kv[0])):
            out.add_metric([str(v) for v in values], n)
        return out


class Buckets:
    """A histogram by label values: a count per bucket and a sum, cumulated only when scraped."""

    def __init__(self, name: str, doc: str, bounds: tuple[float, ...], labels: tuple[str, ...] = ()):
        self.name, self.doc, self.bounds, self.labels = name, doc, bounds, labels
        self.series: dict[tuple, list] = {}  # label values → [counts per bucket and +Inf, sum]

    def observe(self, value: float, *values: Any) -> None:
        series = self.series.get(values)
        if series is None:
            series = self.series[values] = [[0] * (len(self.bounds) + 1), 0.0]
        series[0][bisect_left(self.bounds, value)] += 1  # buckets are `le`: a value on a bound counts in it
        series[1] += value

    def family(self) -> Metric:
        out = HistogramMetricFamily(self.name, self.doc, labels=self.labels)
        for values, (counts, total) in sorted(self.series.items(), key=lambda kv: str(kv[0])):
            running, buckets = 0, []
            for bound, n in zip((*(repr(b) for b in self.bounds), "+Inf"), counts):
                running += n
                buckets.append((bound, running))
            out.add_metric([str(v) for v in values], buckets, sum_value=total)
        return out


class Metrics:
    def __init__(
        self, config: Config, decider: Callable[[], Any], edge: EdgeCache | None = None, origin: Any = None
    ) -> None:
        self.decisions = Tally("clef_decisions", "Requests decided, by label, source and action taken",
                               ("label", "source", "action"))  # fmt: skip
        self.decision_seconds = Buckets("clef_decision_seconds", "Time to decide a request, by source", LATENCY,
                                        ("source",))  # fmt: skip
        self.tokens = Buckets("clef_model_input_tokens", "Tokens the model read per request it decided", TOKENS)
        self.batch = Buckets("clef_model_batch_size", "Requests per model call", BATCH)
        self.upstream = Tally("clef_upstream_responses", "Origin responses by status", ("status",))
        self.upstream_seconds = Buckets("clef_upstream_seconds", "Time to the origin's response headers", LATENCY)
        self.requests = Tally("clef_requests", "Requests answered, by status", ("status",))
        self.request_seconds = Buckets("clef_request_seconds", "Time from the request to its answer", LATENCY)
        self.edge_status = Tally("clef_edge_cache_requests", "Requests by what the edge cache did (x-clef-cache)",
                                 ("status",))  # fmt: skip
        self.errors = Tally("clef_errors", "Answers the gateway made itself, by kind (x-clef-error)", ("kind",))
        self.refusals = Tally("clef_refused", "Refused before the pipeline: parse errors, slow heads, connections "
                              "over the limit", ("kind",))  # fmt: skip
        self.started = 0
        self.finished = 0
        self.generation = 1
        self.configured(config)
        self.origin = origin
        self.journal: Any = None  # the journal's writer, set by app.py once it runs
        self._decider = decider
        self._batches: Any = None  # the batcher's recent batch sizes, found once the engine is up
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_State(self, decider, edge))

    def configured(self, config: Config, generation: int = 1) -> None:
        """The config in force: at start, and again after each reload."""
        self.config_hash = hashlib.sha256(repr(config).encode()).hexdigest()[:16]
        self.generation = generation
        self._batches = None  # a reload brings a new model and batcher: find its batch sizes again

    def begin(self) -> None:
        self.started += 1

    def refused(self, err: Any) -> None:
        self.requests.inc(err.status)
        self.errors.inc(err.kind)
        self.refusals.inc(err.kind)

    def observe(self, ex: Exchange) -> None:
        self.finished += 1
        verdict = ex.verdict
        if verdict is not None:
            source = verdict.source.value
            self.decisions.inc(verdict.label, source, ex.action.kind if ex.action is not None else "none")
            if (decided := ex.decision_s) is not None:
                self.decision_seconds.observe(decided, source)
            if verdict.tokens and source == "model":
                self.tokens.observe(verdict.tokens)
        if ex.upstream_status is not None:
            self.upstream.inc(ex.upstream_status)
            if ex.upstream_s is not None:
                self.upstream_seconds.observe(ex.upstream_s)
        self.requests.inc(ex.status)
        if ex.error is not None:
            self.errors.inc(ex.error.kind)
        self.edge_status.inc(ex.cache_status)
        self.request_seconds.observe(ex.clock() - ex.started)
        if self._batches:
            self.drain_batches()
        elif self._batches is None:
            self._find_batches()

    def _find_batches(self) -> None:
        model = getattr(self._decider(), "model", None)
        found = getattr(getattr(model, "batcher", None), "batches", None)
        self._batches = found if found is not None else ()  # () : no batcher (a fake or no model), stop looking

    def drain_batches(self) -> None:
        """Move the batcher's recorded batch sizes into the histogram. The batcher keeps only the recent
        ones (a bounded deque kept for metrics); taking them as they come loses none between scrapes."""
        if self._batches is None:
            self._find_batches()
        batches = self._batches
        while batches:
            self.batch.observe(batches.popleft())

    def scrape(self) -> bytes:
        self.drain_batches()
        return generate_latest(self.registry)

    def families(self) -> Iterator[Metric]:
        for metric in (self.requests, self.request_seconds, self.decisions, self.decision_seconds, self.tokens,
                       self.batch, self.upstream, self.upstream_seconds, self.edge_status, self.errors,
                       self.refusals):  # fmt: skip
            yield metric.family()


class _State:
    """Read at scrape time: the request series above, and what the engine and the edge cache count."""

    def __init__(self, metrics: Metrics, decider: Callable[[], Any], edge: EdgeCache | None):
        self.metrics, self.decider, self.edge = metrics, decider, edge

    def describe(self) -> list[Metric]:
        return []  # the series below depend on what is running; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        yield from m.families()
        yield GaugeMetricFamily("clef_requests_in_flight", "Requests being handled", value=m.started - m.finished)
        yield InfoMetricFamily("clef_config", "The loaded config", value={"hash": m.config_hash})
        yield GaugeMetricFamily("clef_config_generation", "1 at start, +1 per reload", value=m.generation)
        if m.origin is not None:
            yield GaugeMetricFamily("clef_origin_up", "1 up, 0 marked down by passive health",
                                    value=0 if m.origin.down() else 1)  # fmt: skip
            yield GaugeMetricFamily("clef_origin_failures", "Origin failures in a row", value=m.origin.failures)
            yield CounterMetricFamily("clef_origin_marked_down", "Times the origin was marked down",
                                      value=m.origin.marked_down)  # fmt: skip
        if m.journal is not None:
            yield from self.journal_series(m.journal)
        decider = self.decider()
        if decider is not None:
            yield from self.engine(decider)
        if self.edge is not None:
            yield from self.edge_cache(self.edge)

    def engine(self, decider: Any) -> Iterator[Metric]:
        if decider.model is not None:
            info = decider.model.info()
            yield InfoMetricFamily("clef_model", "The decision model", value={
                "name": str(info.get("name", "")), "version": str(info.get("version", ""))})  # fmt: skip
        fallbacks = CounterMetricFamily("clef_fallbacks", "Decisions left to the rules, by reason", labels=("reason",))
        for reason, n in sorted(decider.fallbacks.items()):
            fallbacks.add_metric((reason,), n)
        yield fallbacks
        total = sum(decider.counts.values())
        ratio = decider.counts.get("rules", 0) / total if total else 0.0
        yield GaugeMetricFamily("clef_fallback_ratio", "Share of decisions made by the rules", value=ratio)
        breaker = decider.breaker
        yield GaugeMetricFamily("clef_breaker_state", "0 closed, 1 half-open, 2 open", value=BREAKER[breaker.state])
        yield CounterMetricFamily("clef_breaker_opened", "Times the breaker opened", value=breaker.opened)
        cache = decider.cache
        yield CounterMetricFamily("clef_decision_cache_hits", "Decision cache hits", value=cache.hits)
        yield CounterMetricFamily("clef_decision_cache_misses", "Decision cache misses", value=cache.misses)
        yield GaugeMetricFamily("clef_decision_cache_entries", "Decisions cached", value=len(cache))
        if getattr(decider, "shadow", None) is not None:
            yield from self.shadow_series(decider.shadow)

    def journal_series(self, writer: Any) -> Iterator[Metric]:
        yield CounterMetricFamily("clef_journal_written", "Decisions written to the journal", value=writer.written)
        yield CounterMetricFamily("clef_journal_dropped", "Decisions not journaled: the writer's queue was full",
                                  value=writer.dropped)  # fmt: skip
        yield CounterMetricFamily("clef_journal_failed", "Decisions the journal could not write (disk, lock)",
                                  value=writer.failed)  # fmt: skip
        yield GaugeMetricFamily("clef_journal_queued", "Decisions waiting for the journal's writer",
                                value=writer.queued)  # fmt: skip

    def shadow_series(self, shadow: Any) -> Iterator[Metric]:
        agreement = CounterMetricFamily("clef_shadow_agreement", "Shadow model decisions beside the live ones, by "
                                        "live and shadow label", labels=("live", "shadow"))  # fmt: skip
        for (live, other), n in sorted(shadow.agreement.items()):
            agreement.add_metric((live, other), n)
        yield agreement
        yield CounterMetricFamily("clef_shadow_dropped", "Requests the busy shadow model skipped", value=shadow.dropped)
        yield CounterMetricFamily("clef_shadow_failed", "Shadow model calls that failed", value=shadow.failed)
        info = shadow.info()
        yield InfoMetricFamily("clef_shadow_model", "The shadow model", value={
            "name": str(info.get("name", "")), "version": str(info.get("version", ""))})  # fmt: skip

    def edge_cache(self, edge: EdgeCache) -> Iterator[Metric]:
        s = edge.stats
        yield CounterMetricFamily("clef_edge_cache_hits", "Answered from a stored response", value=s.hits)
        yield CounterMetricFamily("clef_edge_cache_misses", "Asked the origin for a whole response", value=s.misses)
        yield CounterMetricFamily("clef_edge_cache_evictions", "Entries pushed out for room", value=s.evictions)
        yield CounterMetricFamily("clef_edge_cache_served_bytes", "Body bytes answered from the store",
                                  value=s.served_bytes)  # fmt: skip
        yield GaugeMetricFamily("clef_edge_cache_bytes", "Memory held by stored responses", value=edge.bytes)
        yield GaugeMetricFamily("clef_edge_cache_entries", "Stored responses", value=len(edge))
