"""observe: one structured access-log line and the metrics, per request, whatever happened.

Input: the Exchange as handle() leaves it: possibly without a verdict (a 413 before deciding), without a
response (the client went away), with an error (502, 504, a cut stream). Output: nothing; the metrics
move (gateway/metrics.py) and one JSON line goes to the `clef.access` logger (the CLI prints those lines
to stdout as they are). Never raises: a request must not fail because it could not be logged.

Fields: time, id (the request's; its decision journal entry has the same), client, method, path
(without the query unless `logging.log_query`: queries carry secrets and payloads, and the decision
already says what was in them), status, bytes_in, bytes_out, decision,
confidence, features, source, model, tokens (when the model read the request), action, intended, mode,
route, cache (what the edge cache did), decision_ms (deciding: the model's time, batching included, when
source is model; the cache's, rules' or override's otherwise), upstream_status,
upstream_ms, total_ms, and error when one occurred. Never a body.

Sampling: `logging.sample_allowed` of the requests let through are logged; blocks, detect-mode blocks
and errors always are.

`refused()` writes the same line, with what is known (client, status, error), for what never became a
request the pipeline saw: a head aiohttp's parser rejected, a slowloris head, a connection over the limit.

What never appears: a body, a query (unless asked for), a header value. Error messages are the gateway's
own sentences; none quotes request bytes.

After the metrics, the decision is handed to the shadow model and the decision journal when they are on
(gateway/learning.py): a task and a queue put, never a wait.

Short-circuits: nothing; it runs last, in handle()'s finally.
"""

from __future__ import annotations

import json
import logging
import random
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from gateway import learning

if TYPE_CHECKING:
    from gateway.config import Config
    from gateway.errors import GatewayError
    from gateway.exchange import Exchange

log = logging.getLogger("clef.access")
errors = logging.getLogger("clef.gateway")


def begin(ex: Exchange) -> None:
    if ex.metrics is not None:
        ex.metrics.begin()


def record(ex: Exchange) -> None:
    if ex.metrics is not None:
        try:
            ex.metrics.observe(ex)
        except Exception:  # nor are metrics
            errors.exception("could not record the metrics")
    if ex.journal is not None or getattr(ex.decider, "shadow", None) is not None:
        try:
            learning.hand_off(ex)
        except Exception:  # nor is learning from it
            errors.exception("could not hand the decision to the shadow model or the journal")
    settings = ex.config.logging
    if not settings.access_log or not log.isEnabledFor(logging.INFO) or not sampled(ex, settings.sample_allowed):
        return
    try:
        log.info(json.dumps(entry(ex, settings.log_query), separators=(",", ":"), ensure_ascii=False))
    except Exception:  # a log line is never worth a failed request
        errors.exception("could not write the access log line")


def refused(config: Config, metrics: Any, err: GatewayError, client: str) -> None:
    """The line and the counts for a refusal made before the pipeline (gateway/protocol.py)."""
    if metrics is not None:
        try:
            metrics.refused(err)
        except Exception:
            errors.exception("could not record the metrics")
    if not config.logging.access_log or not log.isEnabledFor(logging.INFO):
        return
    line: dict[str, Any] = dict.fromkeys(FIELDS)
    line.update(time=_now(), client=client, status=err.status, bytes_in=0, bytes_out=0, features=[],
                error={"type": err.kind, "message": err.message})  # fmt: skip
    try:
        log.info(json.dumps(line, separators=(",", ":"), ensure_ascii=False))
    except Exception:
        errors.exception("could not write the access log line")


def sampled(ex: Exchange, share: float) -> bool:
    """Blocks (enforced or detected) and errors are always logged; the rest at `share`."""
    if share >= 1.0 or ex.error is not None or ex.status >= 500:
        return True
    if ex.action is not None and (ex.action.blocks or ex.action.detected):
        return True
    return random.random() < share


def entry(ex: Exchange, log_query: bool = False) -> dict[str, Any]:
    request, verdict, action = ex.request, ex.verdict, ex.action
    line: dict[str, Any] = {
        "time": _now(),
        "id": ex.id,
        "client": request.remote or "",
        "method": request.method,
        "path": request.raw_path if log_query else request.raw_path.partition("?")[0],
        "status": ex.status,
        "bytes_in": ex.bytes_in,
        "bytes_out": ex.bytes_out or _length(ex),
        "decision": verdict.label if verdict else None,
        "confidence": round(float(verdict.confidence), 3) if verdict else None,
        "features": list(verdict.features) if verdict else [],
        "source": verdict.source.value if verdict else None,
        "model": verdict.model if verdict else None,
        "tokens": verdict.tokens if verdict and verdict.tokens else None,
        "action": action.kind if action else None,
        "intended": action.intended if action else None,
        "mode": action.mode if action else (ex.route.mode if ex.route else None),
        "route": action.route if action else (ex.route.prefix if ex.route else None),
        "cache": ex.cache_status if action else None,
        "decision_ms": _ms(ex.decision_s),
        "upstream_status": ex.upstream_status,
        "upstream_ms": _ms(ex.upstream_s),
        "total_ms": _ms(ex.clock() - ex.started),
    }
    if verdict is not None and verdict.truncated:
        line["truncated"] = True
    if ex.error is not None:
        line["error"] = {"type": ex.error.kind, "message": ex.error.message}
    return line


FIELDS = ("time", "id", "client", "method", "path", "status", "bytes_in", "bytes_out", "decision",
          "confidence", "features", "source", "model", "tokens", "action", "intended", "mode", "route", "cache",
          "decision_ms", "upstream_status", "upstream_ms", "total_ms")  # fmt: skip


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _length(ex: Exchange) -> int:
    # A block (or any plain Response) is not streamed by act: its body length is what it holds.
    body = getattr(ex.response, "body", None)
    return len(body) if isinstance(body, (bytes, bytearray)) else 0


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 3)
