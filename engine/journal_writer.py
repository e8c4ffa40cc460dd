"""The journal's one writer: a bounded queue in memory and a thread that redacts and inserts in batches.

`submit(entry)` is what a request pays: a put on a queue, never a wait. When the queue holds `max_queue`
entries or `max_queue_bytes` of request bodies, the entry is dropped and counted (`dropped`): the
journal is a sample, a request must never wait for a disk. The thread takes whatever is queued (up to
`batch`), redacts each entry (engine/redact.py: the request parts, and the canonical text serving
computed, rewritten to match), inserts them in one transaction and, every `prune_every` rows, applies the
retention limits. Counters for the metrics: queued (now), written, dropped, failed (the disk said no).
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from typing import Callable

from engine import redact
from engine.features import Features
from engine.journal import Journal
from engine.verdict import Verdict

log = logging.getLogger("clef.journal")
_STOP = object()


@dataclass(frozen=True)
class JournalSettings:
    path: str
    max_rows: int = 1_000_000  # beyond it the oldest unmarked rows go
    max_age_days: float = 30.0  # unmarked rows older than this go
    max_body_bytes: int = 65536  # body prefix kept per row (redacted first, then cut)
    max_queue: int = 1024  # entries waiting for the writer; beyond it they are dropped
    max_queue_bytes: int = 64 << 20  # request bodies held by waiting entries; beyond it they are dropped
    redact_fields: tuple[str, ...] = redact.DEFAULT_FIELDS


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    ts: float  # unix time
    features: Features  # as the engine saw it; its canonical text is computed already when a model decided
    verdict: Verdict
    shadow: Verdict | None = None


def row(entry: Entry, settings: JournalSettings) -> dict:
    f, v, s = entry.features, entry.verdict, entry.shadow
    clean = redact.request(f, settings.redact_fields)  # the whole body first: a cut JSON would not parse
    body = clean.body[: settings.max_body_bytes]
    return {
        "id": entry.id, "ts": entry.ts, "method": f.method, "path": f.path, "query": clean.query,
        "headers": [list(h) for h in clean.headers], "body": body, "body_size": f.body_size,
        "truncated": f.truncated or len(body) < len(clean.body),
        "canonical": redact.canonical(f.text, settings.redact_fields),
        "label": v.label, "confidence": round(float(v.confidence), 4), "features": list(v.features),
        "source": v.source.value, "model": v.model,
        "shadow_label": s.label if s else None, "shadow_confidence": round(float(s.confidence), 4) if s else None,
        "shadow_model": s.model if s else None,
    }  # fmt: skip


class JournalWriter:
    def __init__(self, settings: JournalSettings, clock: Callable[[], float] | None = None, batch: int = 256,
                 prune_every: int = 10_000):  # fmt: skip
        self.settings = settings
        self.journal = Journal(settings.path, clock=clock)  # opened here: a bad path fails at startup
        self.batch, self.prune_every = batch, prune_every
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()  # guards the byte count, shared by submit() and the thread
        self._bytes = 0
        self.written = self.dropped = self.failed = 0
        self._since_prune = 0
        self._thread = threading.Thread(target=self._run, name="clef-journal", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def submit(self, entry: Entry) -> bool:
        size = len(entry.features.body)
        with self._lock:
            if self._queue.qsize() >= self.settings.max_queue or self._bytes + size > self.settings.max_queue_bytes:
                self.dropped += 1
                return False
            self._bytes += size
        self._queue.put_nowait(entry)
        return True

    def flush(self) -> None:
        """Wait until everything submitted so far is written (or failed). For tests and shutdown."""
        self._queue.join()

    def close(self) -> None:
        """Write what is queued, stop the thread, close the file."""
        self._queue.put(_STOP)
        self._thread.join()
        self.journal.close()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                self._queue.task_done()
                return
            taken = [first]
            while len(taken) < self.batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    self._queue.put(_STOP)  # after this batch
                    self._queue.task_done()
                    break
                taken.append(item)
            self._write(taken)
            for _ in taken:
                self._queue.task_done()

    def _write(self, entries: list[Entry]) -> None:
        with self._lock:
            self._bytes -= sum(len(e.features.body) for e in entries)
        try:
            rows = [row(e, self.settings) for e in entries]
            self.journal.insert(rows)
            self.written += len(rows)
            self._since_prune += len(rows)
            if self._since_prune >= self.prune_every:
                self._since_prune = 0
                self.journal.prune(self.settings.max_rows, self.settings.max_age_days)
        except Exception:  # a full disk or a locked file loses these rows, never the thread
            self.failed += len(entries)
            log.exception("journal %s: could not write %d entries", self.settings.path, len(entries))

    def prune(self) -> int:
        """Apply the retention limits now (the thread does it every `prune_every` rows)."""
        self.flush()
        with Journal(self.settings.path, clock=self.journal.clock) as j:
            return j.prune(self.settings.max_rows, self.settings.max_age_days)
