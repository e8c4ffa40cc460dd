"""annotate: Action and Verdict → the x-clef-* headers for the origin and, when configured, the client.

Input: the action and the verdict. Output: Annotations, the headers to add upstream (always) and on the
response (only with `headers.echo`). They are computed before act because a streamed response must have
its headers before its first byte. `strip` removes every x-clef-* header a client sent: a client must
never forge a decision.

    x-clef-decision    block | cache | origin | allow
    x-clef-confidence  0.000-1.000
    x-clef-feature     the reasons, comma-separated (empty when none)
    x-clef-source      model | cache | rules | override
    x-clef-model       the bundle (name@version) or ruleset that decided
    x-clef-action      what enforce mode does: block | forward | cache
    x-clef-mode        enforce | detect (detect: a `block` action was forwarded, not enforced)

Short-circuits: nothing; this phase does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from engine.verdict import Verdict
from gateway.actions import Action

PREFIX = "x-clef-"

Headers = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Annotations:
    upstream: Headers
    client: Headers  # empty unless `headers.echo`


def headers(action: Action, verdict: Verdict, echo: bool = False) -> Annotations:
    values: Headers = (
        ("x-clef-decision", verdict.label),
        ("x-clef-confidence", f"{float(verdict.confidence):.3f}"),
        ("x-clef-feature", ",".join(verdict.features)),
        ("x-clef-source", verdict.source.value),
        ("x-clef-model", _token(verdict.model)),
        ("x-clef-action", action.intended),
        ("x-clef-mode", action.mode),
    )
    return Annotations(upstream=values, client=values if echo else ())


def strip(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every header but the x-clef-* ones."""
    return [(k, v) for k, v in items if not k.lower().startswith(PREFIX)]


def _token(value: str) -> str:
    # A bundle name comes from a file an operator chose; still, never let it break a header line.
    return "".join(ch for ch in value if ch.isprintable() and ch not in "\r\n")
