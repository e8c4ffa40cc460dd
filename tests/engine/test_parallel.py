"""engine/train/parallel.py: networks trained at the same time, each in its own process."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.labels import FEATURES  # noqa: E402
from engine.train.data import Encoded  # noqa: E402
from engine.train.loop import TrainConfig, train  # noqa: E402
from engine.train.parallel import Member, build, train_together  # noqa: E402
from engine.verdict import LABELS  # noqa: E402

SHAPE = dict(vocab=120, n_labels=len(LABELS), n_features=len(FEATURES), d=16, ffn=32, window=16)


def tiny_data(n: int = 48) -> Encoded:
    rng = np.random.default_rng(3)
    ids = [rng.integers(4, 120, int(rng.integers(3, 40))).astype(np.int32) for _ in range(n)]
    labels = rng.integers(0, len(LABELS), n).astype(np.int64)
    features = (rng.random((n, len(FEATURES))) < 0.1).astype(np.float32)
    return Encoded(ids, labels, features, [f"g{i}" for i in range(n)])


def member(seed: int, precision: str = "fp32") -> Member:
    cfg = TrainConfig(epochs=1, seed=seed, tokens_per_batch=256, warmup_steps=2, precision=precision)
    return Member(net=SHAPE, draw_seed=seed, config=cfg)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_networks_trained_together_equal_those_trained_in_turn(tmp_path, precision):
    data = tiny_data()
    members = [member(1, precision), member(2, precision)]
    together = train_together(members, data, threads=1, scratch=tmp_path)
    assert list(tmp_path.iterdir()) == []  # the workers' ids file is gone
    for m, (net, run) in zip(members, together):
        alone = build(m)
        torch.set_num_threads(1)
        want = train(alone, data, m.config)
        assert run["steps"] == want["steps"] > 0 and run.get("precision", "fp32") == precision
        for (name, a), b in zip(net.state_dict().items(), alone.state_dict().values()):
            assert torch.equal(a, b), name
        assert not net.training  # returned ready to export
    first, second = (net for net, _ in together)
    assert not torch.equal(first.embed.weight, second.embed.weight)  # two seeds, two networks


class _DiesWhenRead:
    """Unpickled in the worker, it ends the worker's process at once: how a worker killed for memory looks."""

    def __reduce__(self):
        return (os._exit, (3,))


@pytest.mark.slow
def test_a_worker_that_dies_fails_the_run_with_a_way_out():
    doomed = Member(net=SHAPE, draw_seed=1, config=_DiesWhenRead())
    with pytest.raises(RuntimeError, match="training worker died.*--one-at-a-time"):
        train_together([member(1), doomed], tiny_data(), threads=1)


class _ShowsItsEnvironment:
    """A training config that, read in a worker, raises an error quoting the worker's environment."""

    def __getattr__(self, name):
        if name.startswith("__"):  # what pickling looks up
            raise AttributeError(name)
        from engine.train.parallel import WORKER_ENV

        raise RuntimeError(repr({k: os.environ.get(k) for k in WORKER_ENV}))


@pytest.mark.slow
def test_the_workers_wait_passively_and_keep_freed_memory_and_the_run_s_environment_is_left_as_it_was():
    from engine.train.parallel import WORKER_ENV

    before = {k: os.environ.get(k) for k in WORKER_ENV}
    with pytest.raises(RuntimeError) as err:
        train_together([member(1), Member(net=SHAPE, draw_seed=1, config=_ShowsItsEnvironment())], tiny_data(), threads=1)
    seen = eval(str(err.value.args[0]))
    assert seen == {"OMP_WAIT_POLICY": "passive", "MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}
    assert {k: os.environ.get(k) for k in WORKER_ENV} == before


@pytest.mark.slow
def test_an_error_in_a_worker_reaches_the_caller():
    broken = Member(net={**SHAPE, "act": "nope"}, draw_seed=1, config=TrainConfig(epochs=1))
    with pytest.raises(KeyError, match="nope"):
        train_together([member(1), broken], tiny_data(), threads=1)


def test_the_networks_share_the_run_s_threads_unless_told():
    from engine.train.__main__ import network_threads, parse_args

    assert network_threads(parse_args(["--networks", "2"])) == 1  # two networks on the default 2 threads: one each
    assert network_threads(parse_args(["--networks", "2", "--threads", "8"])) == 4
    assert network_threads(parse_args(["--networks", "3"])) == 1  # never none
    assert network_threads(parse_args([])) == 2  # one network keeps them all
    assert network_threads(parse_args(["--networks", "2", "--network-threads", "2"])) == 2  # how 0.11.x was trained
    with pytest.raises(SystemExit):
        parse_args(["--network-threads", "0"])


def test_a_worker_ends_when_the_run_that_started_it_is_killed(tmp_path):
    """`kill` of a training run (SIGKILL here: no handler runs) must not leave its workers training on as orphans."""
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "worker.pid"
    worker = ("import os, sys, time; from engine.train.parallel import watch_parent; watch_parent(0.1); "
              f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)")  # fmt: skip
    run = ("import subprocess, sys, time; "
           f"subprocess.Popen([sys.executable, '-c', {worker!r}]); time.sleep(60)")  # fmt: skip
    parent = subprocess.Popen([sys.executable, "-c", run], cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    try:
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        child = int(pid_file.read_text())
        os.kill(child, 0)  # alive while its parent is
        parent.send_signal(signal.SIGKILL)
        parent.wait(5)
        for _ in range(100):
            try:
                os.kill(child, 0)
                with open(f"/proc/{child}/stat") as f:  # exited but not yet reaped by its new parent counts as ended
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break
            except (ProcessLookupError, FileNotFoundError):
                break
            time.sleep(0.05)
        else:
            os.kill(child, signal.SIGKILL)
            raise AssertionError("the worker outlived its parent")
    finally:
        parent.kill()
