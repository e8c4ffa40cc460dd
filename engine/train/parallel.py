"""The networks of one `--networks N` run trained at the same time, each in its own process.

A network of the default's size keeps two cores only partly busy: its layers are small (d = 64), and much of a
step is element-wise work, Python and operator overhead between short parallel regions. Two networks trained side
by side make more steps per second between them than one network with both cores to itself: on a 2-core EPYC on
2026-12-05, with two threads each, 1.17 times as many in bench/train_step.py's bare steps, and the training of two
networks on 24,000 records took 79 and 84 s at the same time against 86 and 94 s one after the other, in turns
(bench/RESULTS.md). With one thread each (what `python -m engine.train` now gives two networks on two cores,
`--network-threads`), bare steps are 1.10x faster again and that 24,000-record run took 72-77 s against 82-84 s.
The processes share the cores, so their OpenMP threads wait passively (`OMP_WAIT_POLICY=passive`): spinning threads
of one process would take the cores the other needs (0.30-0.38 s per step each in a first probe, slower than one at
a time). Their allocator keeps the memory a step frees for the next (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`):
by default glibc hands blocks of some megabytes back to the system and faults them in again, thousands of page faults
a step; kept, the same steps take about 2 % less time (bench/RESULTS.md). Neither changes a number the workers compute.

Each network is trained exactly as a run trains it one after the other: the same thread count (`threads`), the same seeds,
the same steps, so the weights are the same bit for bit (tests/engine/test_ensemble.py). The training ids go to
the workers through one memory-mapped file, not a copy per process.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from engine.train.data import Encoded, progress

WAIT_POLICY = {"OMP_WAIT_POLICY": "passive"}
KEEP_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}  # glibc's (mallopt)
WORKER_ENV = {**WAIT_POLICY, **KEEP_MEMORY}  # set in the workers' environment before they start
PARENT_POLL_S = 2.0  # how often a worker checks that the run that started it is still there
_watcher: threading.Thread | None = None  # this worker's watch_parent thread, once started


def watch_parent(interval: float = PARENT_POLL_S) -> threading.Thread:
    """End this worker when the process that started it is gone. A run stopped with `kill` (not Ctrl-C, which reaches
    the whole process group) would otherwise leave its workers training on for an hour as orphans, taking the cores
    from whatever runs next (seen 2026-12-06). Polling the parent's pid holds even where the run was killed outright."""
    global _watcher
    if _watcher is not None:  # one per worker process, however many networks it trains
        return _watcher
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(1)

    _watcher = threading.Thread(target=watch, name="clef-parent-watch", daemon=True)
    _watcher.start()
    return _watcher


@dataclass(frozen=True)
class Member:
    """One network of a run: the ClefNet arguments, the seed its initial weights are drawn from, its TrainConfig."""

    net: dict
    draw_seed: int
    config: object  # engine.train.loop.TrainConfig


def build(member: Member):
    """The network before training: its initial weights drawn from `draw_seed`, as the run draws them."""
    from engine.train.loop import set_seed
    from engine.train.net import ClefNet

    set_seed(member.draw_seed)
    return ClefNet(**member.net)


def train_together(members: list[Member], data: Encoded, threads: int, scratch: Path | None = None) -> list[tuple[object, dict]]:
    """(trained ClefNet, run figures) per member, in order; each trained in its own process with `threads` threads.
    The ids file goes in a temporary folder under `scratch` (the system's temporary folder when None)."""
    from engine.train.net import ClefNet

    with tempfile.TemporaryDirectory(prefix=".clef-train-", dir=scratch) as tmp:
        ids_path = Path(tmp) / "ids.npy"
        lengths = np.fromiter((len(x) for x in data.ids), dtype=np.int64, count=len(data.ids))
        np.save(ids_path, np.concatenate(data.ids) if data.ids else np.zeros(0, np.int32))
        rest = replace(data, ids=[])  # labels, features, soft targets: small, pickled to each worker
        jobs = [(k, m, str(ids_path), lengths, rest, threads) for k, m in enumerate(members)]
        saved = {k: os.environ.get(k) for k in WORKER_ENV}
        os.environ.update(WORKER_ENV)  # spawned workers inherit it; this process's OpenMP and allocator have started
        try:  # an executor, not a Pool: a worker that dies (killed for memory) fails the run instead of hanging it
            with ProcessPoolExecutor(len(members), mp_context=multiprocessing.get_context("spawn")) as pool:
                done = list(pool.map(_train_one, jobs))
        except BrokenProcessPool as err:
            raise RuntimeError("a training worker died (out of memory?); --one-at-a-time trains the networks in this "
                               "process, one after the other, with less memory") from err  # fmt: skip
        finally:
            for k, v in saved.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v
    out = []
    for member, (state, run) in zip(members, done):
        net = ClefNet(**member.net)
        net.load_state_dict(state)
        out.append((net.eval(), run))
    return out


def _train_one(job) -> tuple[dict, dict]:
    """In a worker: rebuild the data around the memory-mapped ids, draw the network, train it."""
    import torch

    from engine.train.loop import train

    k, member, ids_path, lengths, rest, threads = job
    watch_parent()
    torch.set_num_threads(threads)
    flat = np.load(ids_path, mmap_mode="r")
    ends = np.cumsum(lengths)
    ids = [flat[e - n : e] for e, n in zip(ends, lengths)]
    net = build(member)
    run = train(net, replace(rest, ids=ids), member.config, log=lambda msg: progress(f"  [network {k + 1}] {msg.strip()}"))
    return net.state_dict(), run
