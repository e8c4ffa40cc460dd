"""Micro-batching off the event loop, in two lanes by length.

`predict(features)` encodes the request (in a thread when it is large), queues it on the short or the long
lane, and awaits its Verdict. Each lane has one worker thread: it takes whatever is queued (up to
`max_batch`, without waiting for more), groups it by padded length, and runs the groups through the model.
A 64K-token body therefore runs on the long lane and never holds up the short requests behind it. A
request scored near the block threshold is run again alone (Model.run_settled), so its decision does not
depend on what shared its batch.
Cancelled requests (a caller that timed out) are skipped; a full queue raises Overloaded at once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from engine.errors import EngineError, Overloaded
from engine.features import Features
from engine.model import Encoded, Model
from engine.verdict import Verdict

LONG_TOKENS = 2048  # inputs longer than this go to the long lane
INLINE_BODY_BYTES = 16384  # larger bodies are canonicalised and tokenised in a thread


@dataclass
class _Item:
    enc: Encoded
    future: asyncio.Future


@dataclass
class _Lane:
    name: str
    executor: ThreadPoolExecutor
    queue: deque = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None


def length_groups(items: list[_Item], model: Model) -> list[list[_Item]]:
    """Sort by length; start a new group when padding to the group's longest would more than double
    the work of its shortest member."""
    items = sorted(items, key=lambda it: it.enc.length)
    groups: list[list[_Item]] = []
    for it in items:
        if groups and model.padded_length(it.enc.length) <= 2 * model.padded_length(groups[-1][0].enc.length):
            groups[-1].append(it)
        else:
            groups.append([it])
    return groups


class Batcher:
    def __init__(self, model: Model, max_batch: int = 16, max_queue: int = 1024):
        self.model = model
        self.max_batch = max_batch
        self.max_queue = max_queue
        self._prep = ThreadPoolExecutor(1, thread_name_prefix="clef-prep")
        self._lanes = {
            name: _Lane(name, ThreadPoolExecutor(1, thread_name_prefix=f"clef-model-{name}"))
            for name in ("short", "long")
        }
        self.batches: deque[int] = deque(maxlen=1024)  # recent batch sizes, for metrics

    @property
    def queued(self) -> int:
        return sum(len(lane.queue) for lane in self._lanes.values())

    def start(self) -> None:
        for lane in self._lanes.values():
            if lane.task is None:
                lane.task = asyncio.get_running_loop().create_task(self._worker(lane))

    async def close(self) -> None:
        for lane in self._lanes.values():
            if lane.task:
                lane.task.cancel()
                try:
                    await lane.task
                except asyncio.CancelledError:
                    pass
                lane.task = None
            while lane.queue:
                item = lane.queue.popleft()
                if not item.future.done():
                    item.future.set_exception(EngineError("model shut down"))
            lane.executor.shutdown(wait=False, cancel_futures=True)
        self._prep.shutdown(wait=False, cancel_futures=True)

    async def encode(self, features: Features) -> Encoded:
        if len(features.body) <= INLINE_BODY_BYTES:
            return self.model.encode(features)
        return await asyncio.get_running_loop().run_in_executor(self._prep, self.model.encode, features)

    async def predict(self, features: Features) -> Verdict:
        if self.queued >= self.max_queue:
            raise Overloaded(f"model queue full ({self.max_queue})")
        self.start()
        enc = await self.encode(features)
        lane = self._lanes["long" if enc.length > LONG_TOKENS else "short"]
        item = _Item(enc, asyncio.get_running_loop().create_future())
        lane.queue.append(item)
        lane.wake.set()
        return await item.future

    async def _worker(self, lane: _Lane) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await lane.wake.wait()
            lane.wake.clear()
            while lane.queue:
                take: list[_Item] = []
                while lane.queue and len(take) < self.max_batch:
                    item = lane.queue.popleft()
                    if not item.future.done():  # the caller gave up (timeout, disconnect)
                        take.append(item)
                for group in length_groups(take, self.model):
                    await self._run(loop, lane, group)

    async def _run(self, loop: asyncio.AbstractEventLoop, lane: _Lane, group: list[_Item]) -> None:
        batch = [it.enc for it in group]
        self.batches.append(len(batch))
        try:
            labels, feats = await loop.run_in_executor(lane.executor, self.model.run_settled, batch)
            verdicts = self.model.verdicts(labels, feats, batch)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # onnxruntime raises its own types; the decider falls back to rules
            for it in group:
                if not it.future.done():
                    it.future.set_exception(EngineError(f"model failed: {err}"))
            return
        for it, verdict in zip(group, verdicts):
            if not it.future.done():
                it.future.set_result(verdict)
