"""learning: once a request is answered, its decision goes to the shadow model and the decision journal.

Input: the Exchange as observe sees it, in handle()'s finally. Output: nothing the request waits for.
Called by observe.record(); never raises into it.

- Shadow (model.shadow_bundle): when the live decision came from the model (or its cache of the model's
  verdicts), the shadow model decides the same request in the background (engine/shadow.py): bounded,
  dropped when busy. A disagreement is logged on `clef.shadow` (ids and labels only, never the request).
  Decisions by the rules or an override are not compared: they are not the model's.
- Journal (journal.path): the decision is kept with probability `journal.sample_blocked` when it was a
  block (enforced or only detected), `journal.sample_other` otherwise, and `journal.sample_disagreed` when
  the shadow disagreed. With a shadow, that choice waits for the shadow's decision, so the row holds both.
  Keeping it is a put on the writer's queue (engine/journal_writer.py), dropped and counted when full.
"""

from __future__ import annotations

import json
import logging
import random
import time
from typing import TYPE_CHECKING, Any, Callable

from engine.journal_writer import Entry
from engine.verdict import Source, Verdict

if TYPE_CHECKING:
    from gateway.exchange import Exchange

log = logging.getLogger("clef.shadow")
COMPARED = (Source.MODEL, Source.CACHE)


def hand_off(ex: Exchange, rng: Callable[[], float] = random.random) -> None:
    verdict, features = ex.verdict, ex.features
    if verdict is None or features is None:
        return  # refused before deciding: nothing to compare or learn from
    journal, settings = ex.journal, ex.config.journal
    share = settings.sample_blocked if verdict.blocked else settings.sample_other
    keep = _keeper(journal, Entry(ex.id, time.time(), features, verdict), share, settings.sample_disagreed, rng)
    shadow = getattr(ex.decider, "shadow", None)
    if shadow is not None and verdict.source in COMPARED:
        shadow.submit(features, verdict, keep)
    else:
        keep(None)


def _keeper(journal: Any, entry: Entry, share: float, disagreed_share: float,
            rng: Callable[[], float]) -> Callable[[Verdict | None], None]:  # fmt: skip
    """What to do once the shadow has spoken (or at once, without one): log a disagreement, journal a sample."""

    def keep(shadow: Verdict | None) -> None:
        live = entry.verdict
        disagreed = shadow is not None and shadow.label != live.label
        if disagreed:
            log.info(json.dumps({"id": entry.id, "live": live.label, "live_model": live.model,
                                 "shadow": shadow.label, "shadow_model": shadow.model,
                                 "shadow_confidence": round(shadow.confidence, 3)}))  # fmt: skip
        if journal is not None and rng() < (max(share, disagreed_share) if disagreed else share):
            journal.submit(Entry(entry.id, entry.ts, entry.features, live, shadow))

    return keep
