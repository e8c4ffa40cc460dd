"""Config of the decision journal, `journal`: a frozen dataclass checked at start.

Kept apart from config.py, as the caches' keys are. The journal is opt-in (an empty `path` leaves it off):
a SQLite file of sampled decisions with their redacted requests (engine/journal.py), written by one thread
off the request's path (engine/journal_writer.py), read by `clef-gateway feedback` and the admin API, and
what `clef-gateway train --feedback` retrains from. `path` and the writer's limits change on a restart
only; the sample rates on a reload.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.redact import DEFAULT_FIELDS
from gateway.schema import check

if TYPE_CHECKING:
    from engine.journal_writer import JournalSettings

RESTART_ONLY = ("journal.path", "journal.max_rows", "journal.max_age_days", "journal.max_body_bytes",
                "journal.max_queue", "journal.redact_fields")  # fmt: skip


@dataclass(frozen=True)
class JournalConfig:
    path: str = ""  # SQLite file; "": no journal
    sample_blocked: float = 1.0  # share of blocked requests journaled (enforced or detected)
    sample_other: float = 0.01  # share of the other decisions journaled
    sample_disagreed: float = 1.0  # share of requests on which the shadow model disagreed (model.shadow_bundle)
    max_rows: int = 1_000_000  # beyond it the oldest unmarked rows go (marked rows stay)
    max_age_days: float = 30.0  # unmarked rows older than this go
    max_body_bytes: int = 65536  # body prefix kept per request, after redaction
    max_queue: int = 1024  # decisions waiting for the writer; past it they are dropped (clef_journal_dropped_total)
    redact_fields: tuple[str, ...] = DEFAULT_FIELDS  # header, query, form and JSON names whose values never land

    def __post_init__(self) -> None:
        if self.path:
            parent = Path(self.path).expanduser().parent
            check(parent.is_dir(), "path", "must be in an existing folder", self.path)
            check(not Path(self.path).is_dir(), "path", "must be a file, not a folder", self.path)
        for name in ("sample_blocked", "sample_other", "sample_disagreed"):
            value = getattr(self, name)
            check(0.0 <= value <= 1.0, name, "must be between 0 and 1", value)
        check(self.max_rows > 0, "max_rows", "must be > 0", self.max_rows)
        check(self.max_age_days > 0, "max_age_days", "must be > 0", self.max_age_days)
        check(self.max_body_bytes >= 0, "max_body_bytes", "must be >= 0", self.max_body_bytes)
        check(self.max_queue > 0, "max_queue", "must be > 0", self.max_queue)
        for i, name in enumerate(self.redact_fields):
            check(bool(name.strip()), f"redact_fields[{i}]", "must not be empty", name)

    @property
    def enabled(self) -> bool:
        return bool(self.path)

    def settings(self) -> "JournalSettings":
        from engine.journal_writer import JournalSettings

        return JournalSettings(
            path=str(Path(self.path).expanduser()),
            max_rows=self.max_rows,
            max_age_days=self.max_age_days,
            max_body_bytes=self.max_body_bytes,
            max_queue=self.max_queue,
            redact_fields=tuple(f.lower() for f in self.redact_fields),
        )
