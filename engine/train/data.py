"""Corpus records → canonical texts → token ids and targets, and length-bucketed batches for training.

Records are request-shaped JSONL (engine.corpus writes them): method, path, query, headers, body or
body_b64, label, features, group. Canonicalisation is pure Python and the slow part, so it runs in a
process pool; tokenisation runs batched in the tokenizer's own threads.

Reading records needs the serving engine (canonical text, the model's `fit`); the training steps need only
torch and numpy: those imports wait until a record is read, so `engine.train.loop` runs on ids encoded
elsewhere, on a machine that has PyTorch and a GPU but not the serving runtime (bench/recipe_sweep.py).
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from engine.labels import FEATURES
from engine.verdict import LABELS


def read_jsonl(path: str | Path, limit: int | None = None) -> Iterator[dict]:
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                break
            if line.strip():
                yield json.loads(line)


def _canon(rec: dict) -> tuple[str, str]:
    from engine.eval import features_of

    c = features_of(rec).canonical
    return c.head, c.body


def canonical_parts(records: list[dict], workers: int = 2) -> list[tuple[str, str]]:
    if workers <= 1 or len(records) < 2000:
        return [_canon(r) for r in records]
    with Pool(workers) as pool:
        return pool.map(_canon, records, chunksize=512)


def follow_policy(records: Iterable[dict]) -> bool:
    """Whether every benign record's label (corpus records, or a site's marks) is the routing decision the
    written labelling policy gives it: then a routing head trained on them learned only that policy."""
    from engine.eval import features_of
    from engine.labels import follows_policy

    return follows_policy((features_of(r), r["label"]) for r in records)


def corpus_routing(path: str | Path, limit: int | None = None) -> str:
    """What a bundle trained on `path` records as its routing (engine/bundle.py): "policy" when its records
    follow the policy (follow_policy), else "model"."""
    return "policy" if follow_policy(read_jsonl(path, limit)) else "model"


@dataclass
class Encoded:
    ids: list[np.ndarray]
    labels: np.ndarray  # int64 [n]
    features: np.ndarray  # float32 [n, len(FEATURES)]
    groups: list[str]
    soft: np.ndarray | None = None  # float32 [n, labels]: label distributions to learn instead (fine-tuning)
    cut: np.ndarray | None = None  # bool [n]: the request did not fit the token budget (the model saw head and tail)


def targets(records: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    labels = np.array([LABELS.index(r["label"]) for r in records], dtype=np.int64)
    feats = np.zeros((len(records), len(FEATURES)), dtype=np.float32)
    index = {f: i for i, f in enumerate(FEATURES)}
    for i, r in enumerate(records):
        for tag in r.get("features") or ():
            if tag in index:
                feats[i, index[tag]] = 1.0
    return labels, feats


def encode_records(records: list[dict], tokenizer, max_tokens: int, workers: int = 2, log=print, parts=None) -> Encoded:
    from engine.model import fit

    t0 = time.time()
    if parts is None:
        parts = canonical_parts(records, workers)
        log(f"  canonical text for {len(records):,} records in {time.time() - t0:.0f}s")
    t0 = time.time()
    ids: list[np.ndarray] = []
    cut: list[bool] = []
    for start in range(0, len(parts), 8192):  # in chunks: Encoding objects are large, keep only the ids
        chunk = parts[start : start + 8192]
        # without offsets, which are never read: the same ids as encode_batch, about 13 % faster here (bench/RESULTS.md)
        heads = tokenizer.encode_batch_fast([h for h, _ in chunk], add_special_tokens=False)
        bodies = tokenizer.encode_batch_fast([b for _, b in chunk], add_special_tokens=False)
        for h, b in zip(heads, bodies):
            fitted, was_cut = fit(h.ids, b.ids, max_tokens)
            ids.append(np.asarray(fitted, dtype=np.int32))
            cut.append(was_cut)
        del heads, bodies
    log(f"  tokenised in {time.time() - t0:.0f}s")
    labels, feats = targets(records)
    return Encoded(ids, labels, feats, [r.get("group", "") for r in records], cut=np.array(cut, dtype=bool))


def batches(lengths: list[int], max_tokens_per_batch: int, window: int, rng: random.Random, max_batch: int = 256):
    """Index batches of similar length (less padding), each at most `max_tokens_per_batch` padded tokens,
    in random order."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i] + rng.random() * 8))
    out, cur, cur_max = [], [], 0
    for i in order:
        padded = -(-max(lengths[i], 1) // window) * window
        if cur and (max(cur_max, padded) * (len(cur) + 1) > max_tokens_per_batch or len(cur) >= max_batch):
            out.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, padded)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def pad(ids: list[np.ndarray], idx: list[int], window: int) -> np.ndarray:
    length = max(window, -(-max(len(ids[i]) for i in idx) // window) * window)
    out = np.zeros((len(idx), length), dtype=np.int64)
    for row, i in enumerate(idx):
        out[row, : len(ids[i])] = ids[i]
    return out


def progress(msg: str) -> None:
    """A progress line on stderr, after the time of day: a long run's log shows where its time went."""
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)
