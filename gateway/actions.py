"""actions: Verdict → Action, from the action map of the request's route.

Input: the engine's verdict and the route (its merged action map and its mode). Output: an Action saying
what the gateway does (`block`, `forward` or `cache`) and what enforce mode would have done. A label's
action applies only when the verdict's confidence reaches that label's `min_confidence`; below it, the
label's `otherwise` applies (a doubtful block is forwarded). A detect-only route never blocks: it forwards,
and the Action keeps the block it would have been, for the headers and the log.

Short-circuits: nothing; this phase does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.verdict import Verdict
from gateway.config import BlockResponse, Route


@dataclass(frozen=True, slots=True)
class Action:
    kind: str  # what the gateway does: block | forward | cache (served from the edge cache)
    intended: str  # what enforce mode does with this verdict; differs from kind only on detect routes
    label: str
    mode: str  # enforce | detect
    route: str  # the matched route's prefix
    block_response: BlockResponse

    @property
    def blocks(self) -> bool:
        return self.kind == "block"

    @property
    def detected(self) -> bool:
        """A detect-only route let through what enforce mode would have blocked."""
        return self.intended == "block" and self.kind != "block"


def resolve(verdict: Verdict, route: Route) -> Action:
    rule = route.actions.for_label(verdict.label)
    intended = rule.action if verdict.confidence >= rule.min_confidence else rule.otherwise
    kind = "forward" if intended == "block" and route.mode == "detect" else intended
    return Action(
        kind=kind,
        intended=intended,
        label=verdict.label,
        mode=route.mode,
        route=route.prefix,
        block_response=route.actions.block_response,
    )
