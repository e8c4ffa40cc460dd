"""The model runtime: canonical text → token ids → one ONNX Runtime session → label and feature scores.

Built once at startup. `run()` is synchronous and CPU-bound: callers (engine.batcher) run it in an
executor, never on the event loop. The graph takes `input_ids` [batch, length] with length a multiple of
the bundle's window (0 pads) and returns `label_probs` [batch, labels] and `feature_probs` [batch, features].

Inputs longer than the token budget keep the head (request line, query, headers, cookies) and fill the
rest with the body's head and tail; the decision records that the model saw only part of the request.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
from cachetools import LRUCache
from tokenizers import Tokenizer

from engine import canonical
from engine.bundle import Bundle
from engine.canonical import VERSION as CANONICAL_VERSION
from engine.errors import BundleError
from engine.features import Features
from engine.labels import ATTACK_FEATURES, ROUTING_FEATURES
from engine.verdict import Source, Verdict

PAD, UNK, CLS, SEP = 0, 1, 2, 3
SPECIAL_TOKENS = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[ID]", "[HEX]", "[UUID]", "[NUM]", "[CRED]", "[B64]", "[/B64]", "[SQLI]", "[XSS]",
]  # fmt: skip
# Graph rewrites ONNX Runtime would apply that make this network slower. SkipLayerNormFusion joins the
# feed-forward's residual add with the final LayerNorm; its CPU kernel is slower than the two nodes it
# replaces at our width (d=64): the forward pass takes about 10 % less without it (0.89-0.93x from 64 to
# 1,024 tokens, `bench/model.py` times both; bench/RESULTS.md), scores within 1e-7 of the rewritten graph's. (It
# finds nothing to join in a cascade graph, engine/train/cascade.py: there leaving it out changes nothing.)
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)
# Bodies up to this size are tokenised line by line too (JSON and form lines repeat); longer ones whole, so
# a large document does not push the head lines out of the line cache.
LINE_BODY_CHARS = 4096
# Block scores within this many logits of the threshold are settled by running the request alone
# (Model.run_settled). Measured on 3,000 test-split requests in batches of 64 (0.3.1): batching moved a
# block score between 0.5 and 0.9999 by at most 0.42 logit; 5 decisions at 0.99 flipped, all within 0.12.
SETTLE_LOGITS = 0.5


def token_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """The token ids of `text`, no special tokens added: the batch call without offsets, which gives the ids of
    `tokenizer.encode(text)` (tests/engine/test_model.py) without working out the offsets nothing here reads.
    Alone it tokenises a text 16-21 % faster; a whole request's cost did not move measurably (bench/RESULTS.md)."""
    return tokenizer.encode_batch_fast([text], add_special_tokens=False)[0].ids


def near(block_probs: np.ndarray, threshold: float) -> list[int]:
    """Indices of the block probabilities within SETTLE_LOGITS of `threshold`, in logits. The gateway
    (Model.run_settled) and threshold calibration (engine.train.calibrate) settle the same band."""
    t = min(max(threshold, 1e-6), 1 - 1e-6)
    p = np.clip(np.asarray(block_probs, dtype=np.float64), 1e-9, 1 - 1e-9)
    gap = np.abs(np.log(p / (1 - p)) - np.log(t / (1 - t)))
    return [int(i) for i in np.flatnonzero(gap < SETTLE_LOGITS)]


def open_session(path: str, threads: int = 1, disabled: tuple[str, ...] = DISABLED_OPTIMIZERS) -> ort.InferenceSession:
    """The ONNX Runtime session every part of the engine runs a bundle's graph in: CPU, `threads`
    intra-op threads, sequential, all graph optimisations but `disabled` (bench/model.py passes none to
    time the graph with every rewrite)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, threads)
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(
        path, sess_options=opts, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled)
    )


@dataclass(frozen=True, slots=True)
class Encoded:
    ids: np.ndarray  # int64 [n], not padded
    truncated: bool

    @property
    def length(self) -> int:
        return int(self.ids.shape[0])


def fit(head: list[int], body: list[int], budget: int) -> tuple[list[int], bool]:
    """[CLS] head [SEP] body within `budget` tokens: the head whole (up to half the budget), then the
    body's head and tail."""
    total = len(head) + len(body) + 2
    if total <= budget:
        return [CLS, *head, SEP, *body], False
    room = budget - 2
    head = head[: max(room // 2, room - len(body))]
    keep = room - len(head)
    if keep <= 0:
        return [CLS, *head, SEP], True
    front = (keep + 1) // 2
    back = keep - front
    return [CLS, *head, SEP, *body[:front], *(body[-back:] if back else [])], True


class LineTokens:
    """Token ids of a canonical text, line by line, with the ids of recent lines remembered.

    Header lines, field names and common values repeat from request to request; tokenising only the
    lines not seen lately halves the tokenizer's share of a typical request. The result is the ids of the
    whole text, exactly: with a byte-level BPE tokenizer (no normalizer, no prefix space, added tokens that
    strip nothing) a newline between two lines that do not start with whitespace is a pre-token of its
    own, so no token crosses it. `applies` checks that the tokenizer is of that kind, and `ids` encodes the
    text whole when a line is empty or starts with whitespace. The lines not remembered are encoded in
    one call, joined by newlines, and split at the newline's id (no line holds a newline).
    """

    def __init__(self, tokenizer: Tokenizer, max_lines: int = 1 << 14, max_chars: int = 512):
        self.tokenizer = tokenizer
        self.newline = tokenizer.encode("\n", add_special_tokens=False).ids[0]
        self.max_chars = max_chars
        self.cache: LRUCache = LRUCache(max_lines)
        self.lock = threading.Lock()  # encode runs on the event loop and in the batcher's threads

    @staticmethod
    def applies(tokenizer: Tokenizer) -> bool:
        cfg = json.loads(tokenizer.to_str())
        pre = cfg.get("pre_tokenizer") or {}
        return (
            cfg.get("normalizer") is None
            and pre.get("type") == "ByteLevel"
            and pre.get("use_regex", True)
            and not pre.get("add_prefix_space", False)
            and not any(t.get("lstrip") or t.get("rstrip") for t in cfg.get("added_tokens", []))
            and len(tokenizer.encode("\n", add_special_tokens=False).ids) == 1
        )

    def forget(self) -> None:
        with self.lock:
            self.cache.clear()

    def _encode(self, text: str) -> list[int]:
        return token_ids(self.tokenizer, text)

    def ids(self, text: str) -> list[int]:
        if not text:
            return []
        lines = text.split("\n")
        if any(not line or line[0].isspace() for line in lines):
            return self._encode(text)
        with self.lock:
            found = [self.cache.get(line) for line in lines]
        missing = list(dict.fromkeys(line for line, ids in zip(lines, found) if ids is None))
        if missing:
            fresh: list[list[int]] = [[]]
            for i in self._encode("\n".join(missing)):
                if i == self.newline:
                    fresh.append([])
                else:
                    fresh[-1].append(i)
            if len(fresh) != len(missing):  # cannot happen for a tokenizer that `applies`; never guess
                return self._encode(text)
            new = dict(zip(missing, map(tuple, fresh)))
            with self.lock:
                for line, ids in new.items():
                    if len(line) <= self.max_chars:
                        self.cache[line] = ids
            found = [new[line] if ids is None else ids for line, ids in zip(lines, found)]
        out = list(found[0])
        for ids in found[1:]:
            out.append(self.newline)
            out += ids
        return out


class Model:
    def __init__(self, bundle: Bundle, threads: int = 1, max_tokens: int | None = None):
        if bundle.serialization != CANONICAL_VERSION:
            raise BundleError(
                f"model bundle {bundle.path}: trained on canonical text v{bundle.serialization}, "
                f"this engine writes v{CANONICAL_VERSION}"
            )
        self.bundle = bundle
        self.window = bundle.window
        self.max_tokens = min(bundle.max_tokens, max_tokens or bundle.max_tokens)
        try:
            self.tokenizer = Tokenizer.from_file(str(bundle.tokenizer_path))
            self.session = open_session(str(bundle.model_path), threads)
        except Exception as err:  # onnxruntime and tokenizers raise their own types
            raise BundleError(f"model bundle {bundle.path}: cannot load ({err})") from None
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.lines = LineTokens(self.tokenizer) if LineTokens.applies(self.tokenizer) else None
        self.input_name = self.session.get_inputs()[0].name

    @property
    def id(self) -> str:
        return self.bundle.id

    def encode(self, features: Features) -> Encoded:
        canon = features.canonical
        head = self.tokens(canon.head)
        body = self.tokens(canon.body, lines=len(canon.body) <= LINE_BODY_CHARS) if canon.body else []
        ids, cut = fit(head, body, self.max_tokens)
        return Encoded(np.asarray(ids, dtype=np.int64), cut or canon.truncated)

    def forget(self) -> None:
        """Drop what encoding remembers (token ids of lines, canonical forms of values): benchmarks
        measure a request's cold cost this way."""
        if self.lines is not None:
            self.lines.forget()
        canonical.forget()

    def tokens(self, text: str, lines: bool = True) -> list[int]:
        """The ids of `text`, line by line through LineTokens where the tokenizer allows it."""
        if lines and self.lines is not None:
            return self.lines.ids(text)
        return token_ids(self.tokenizer, text)

    def padded_length(self, n: int) -> int:
        w = self.window
        return max(w, -(-n // w) * w)

    def run(self, batch: list[Encoded]) -> tuple[np.ndarray, np.ndarray]:
        """One forward pass over a batch (padded to its longest member)."""
        length = self.padded_length(max(e.length for e in batch))
        ids = np.zeros((len(batch), length), dtype=np.int64)
        for i, e in enumerate(batch):
            ids[i, : e.length] = e.ids
        labels, feats = self.session.run(None, {self.input_name: ids})
        return labels, feats

    def run_settled(self, batch: list[Encoded]) -> tuple[np.ndarray, np.ndarray]:
        """`run`, then every member whose block score lies near the threshold run again alone.

        Dynamic int8 quantises activations with one scale per batch, so a neighbour can move a score a
        little; near the threshold that would make a request's decision depend on which requests happened
        to share its batch. Scored alone, it depends on the request only. Far from the threshold no
        neighbour can flip it, and the batch's scores stand."""
        labels, feats = self.run(batch)
        if len(batch) > 1:
            for i in self.near_threshold(labels):
                alone_labels, alone_feats = self.run([batch[i]])
                labels[i], feats[i] = alone_labels[0], alone_feats[0]
        return labels, feats

    def near_threshold(self, labels: np.ndarray) -> list[int]:
        """Rows whose block probability is within SETTLE_LOGITS of the block threshold, in logits."""
        b, threshold = self.block_threshold()
        return near(labels[:, b], threshold)

    def block_threshold(self) -> tuple[int, float]:
        """The block label's column in the scores, and its calibrated threshold."""
        return self.bundle.labels.index("block"), self.bundle.thresholds.get("block", 0.5)

    def warm_up(self) -> None:
        self.run([self.encode(Features.build("GET", "/"))])

    def verdicts(self, labels: np.ndarray, feats: np.ndarray, batch: list[Encoded]) -> list[Verdict]:
        return [self.verdict(labels[i], feats[i], batch[i].truncated, batch[i].length) for i in range(len(batch))]

    def verdict(self, probs: np.ndarray, feats: np.ndarray, truncated: bool = False, tokens: int = 0) -> Verdict:
        """Scores → Verdict. `block` wins when its probability reaches the bundle's calibrated threshold;
        otherwise the likeliest routing label. Attack tags only accompany a block."""
        labels = self.bundle.labels
        b, threshold = self.block_threshold()
        if probs[b] >= threshold:
            label, conf = "block", float(probs[b])
        else:
            rest = [(float(p), labels[i]) for i, p in enumerate(probs) if i != b]
            p, label = max(rest)
            conf = p / max(1e-9, 1.0 - float(probs[b]))
        names = self.bundle.features
        tags = [n for n, p in zip(names, feats) if p >= 0.5 and (label == "block" or n in ROUTING_FEATURES)]
        if label == "block" and not any(t in ATTACK_FEATURES for t in tags):
            attack = [(p, n) for n, p in zip(names, feats) if n in ATTACK_FEATURES]
            if attack and max(attack)[0] >= 0.2:
                tags.insert(0, max(attack)[1])
        return Verdict(
            label=label,
            confidence=min(1.0, conf),
            features=tuple(tags),
            source=Source.MODEL,
            model=self.id,
            truncated=truncated,
            scores=tuple(float(p) for p in probs),
            tokens=tokens,
        )
