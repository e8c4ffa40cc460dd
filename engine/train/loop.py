"""The training loop: AdamW, warm-up then cosine decay, length-bucketed batches, a fixed seed.

Loss: cross-entropy over the four labels plus binary cross-entropy over the feature tags. Errors on
benign requests are weighted up (`benign_weight`): false positives are what make operators switch a WAF
off. When the data carries soft label targets (`Encoded.soft`: in fine-tuning, the base model's own
distributions for the replayed corpus), the cross-entropy is taken against them instead of the hard
labels. With `tail_weight` above 0, a pairwise term is added for the operating point the block threshold is set
at (0.1 % of benign requests): in each batch, every attack is paired with the benign requests that score highest
there (the top `tail_share` of the batch's benign ones), and each pair costs softplus(benign score - attack score),
on the block log-odds. Cross-entropy weighs every benign request alike; the threshold is set by the few that score
highest, and this term works on those and on the attacks that score under them (a partial-AUC surrogate).
With `precision` "bf16" (`python -m engine.train --precision`, `auto` on a CPU with bf16 dot products) the forward
pass runs under autocast: the matrix products in bfloat16 with float32 sums, the loss, the optimiser and the weights
in float32 (engine/train/net.py gives the convolution and the attention paths of their own for it).
The step count is fixed by the epochs, not by the clock, so a rerun with the same seed and corpus gives the
same weights (on the same machine and thread count). `max_seconds` (fine-tuning's `--minutes`) can stop a run
earlier; the result then says how many steps it made.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from engine.train.data import Encoded, batches, pad, progress
from engine.train.net import ClefNet, Ensemble, probabilities
from engine.verdict import LABELS


@dataclass
class TrainConfig:
    epochs: float = 2.0
    lr: float = 2e-3
    weight_decay: float = 0.01
    warmup_steps: int = 200
    tokens_per_batch: int = 24576
    feature_weight: float = 0.5
    benign_weight: float = 2.0
    seed: int = 1
    log_every_s: float = 30.0
    max_seconds: float | None = None  # stop after this long, whatever the epochs say (None: never)
    tail_weight: float = 0.0  # the pairwise term on the batch's highest-scoring benign requests (0: off, the recipe)
    tail_share: float = 0.1  # the share of a batch's benign requests it pairs the attacks with
    precision: str = "fp32"  # "bf16": the matrix products in bfloat16 (autocast; see PRECISIONS), the rest in float32


PRECISIONS = ("fp32", "bf16")


def bf16_is_fast(device: str = "cpu") -> bool:
    """Whether bfloat16 matrix products run faster than float32 ones here: on a CPU with bf16 dot products
    (AVX512-BF16 or AMX), 3.6 times for a step's largest product on a 2-core EPYC (bench/RESULTS.md); on one
    without them PyTorch emulates bf16 products about fourteen times slower than float32's (180 against 12.9 ms,
    held to AVX2); on a GPU, whether it supports bf16."""
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def step_logits(net, ids: torch.Tensor, precision: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A training step's forward pass at `precision` (bf16: under autocast), its logits in float32 for the loss."""
    with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        label_logits, feature_logits = net.logits(ids)
    return label_logits.float(), feature_logits.float()


def resolve_precision(precision: str, device: str = "cpu") -> str:
    """`auto` → bf16 where bf16_is_fast, fp32 elsewhere; `fp32` and `bf16` as they are."""
    if precision == "auto":
        return "bf16" if bf16_is_fast(device) else "fp32"
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be auto, {' or '.join(PRECISIONS)}, not {precision!r}")
    return precision


def block_log_odds(label_logits: torch.Tensor, block: int) -> torch.Tensor:
    """log p(block) - log(1 - p(block)) from the label logits, computed without forming the probabilities."""
    others = torch.cat([label_logits[:, :block], label_logits[:, block + 1 :]], dim=1)
    return label_logits[:, block] - torch.logsumexp(others, dim=1)


def tail_loss(label_logits: torch.Tensor, y: torch.Tensor, block: int, share: float) -> torch.Tensor:
    """Mean softplus(z_benign - z_attack) over every attack of the batch and its top `share` benign requests by
    block log-odds z (at least one); 0 when the batch lacks either side. Hard labels: `y` holds label indices."""
    z = block_log_odds(label_logits, block)
    attack = y == block
    pos, neg = z[attack], z[~attack]
    if pos.numel() == 0 or neg.numel() == 0:
        return z.sum() * 0.0
    k = max(1, math.ceil(share * neg.numel()))
    hard = torch.topk(neg, k).values
    return F.softplus(hard[None, :] - pos[:, None]).mean()


class WeightAverage:
    """An exponential moving average of a network's parameters, updated after each optimiser step: the weights
    a run ends on, smoothed over about 1 / (1 - decay) of its last steps. Debiased as Adam's moments are, so
    an average of few steps is not pulled towards zero. Only bench/weight_average.py keeps one: on the recipe's
    schedule (cosine decay to a twentieth of the learning rate) no average scored better on the dev split than the
    last weights (bench/RESULTS.md), so runs end on their last weights."""

    def __init__(self, net: torch.nn.Module, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"average decay must lie between 0 and 1, not {decay}")
        self.decay = decay
        self.steps = 0
        self.sums = {name: torch.zeros_like(p) for name, p in net.named_parameters()}

    @torch.no_grad()
    def update(self, net: torch.nn.Module) -> None:
        self.steps += 1
        for name, p in net.named_parameters():
            self.sums[name].mul_(self.decay).add_(p.detach(), alpha=1.0 - self.decay)

    @torch.no_grad()
    def state_dict(self, net: torch.nn.Module) -> dict[str, torch.Tensor]:
        """`net`'s state with the averaged parameters in place of its own (buffers as they are)."""
        scale = 1.0 / (1.0 - self.decay**self.steps) if self.steps else 1.0
        state = {k: v.clone() for k, v in net.state_dict().items()}
        for name, s in self.sums.items():
            state[name] = s * scale
        return state


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def planned_steps(lengths: list[int], window: int, cfg: TrainConfig) -> tuple[int, int]:
    """(batches per epoch, steps in all) of a run of `cfg` over sequences of `lengths`: fixed by the epochs, not
    the clock."""
    per_epoch = len(batches(lengths, cfg.tokens_per_batch, window, random.Random(0)))
    return per_epoch, max(1, int(per_epoch * cfg.epochs))


def train(net: ClefNet, data: Encoded, cfg: TrainConfig, log=progress, averages: tuple = ()) -> dict:
    """Train `net` in place, on the device its weights are on (the CPU, or a GPU it was moved to). `log` takes the
    progress lines (engine.train.parallel names the network in them). `averages` (WeightAverage) are updated after
    each step and left to the caller (bench/weight_average.py reads the last weights and several averages of one run)."""
    set_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    device = next(net.parameters()).device
    lengths = [len(x) for x in data.ids]
    per_epoch, total = planned_steps(lengths, net.window, cfg)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def lr_at(step: int) -> float:
        if step < cfg.warmup_steps:
            return cfg.lr * (step + 1) / cfg.warmup_steps
        frac = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
        return cfg.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))

    block = LABELS.index("block")
    label_weight = torch.ones(len(LABELS))
    label_weight[[i for i in range(len(LABELS)) if i != block]] = cfg.benign_weight
    label_weight = label_weight.to(device)
    precision = resolve_precision(cfg.precision, device.type)  # refuses a precision it does not know
    net.train()
    step, seen, t0, last = 0, 0, time.time(), 0.0
    running = {"loss": 0.0, "acc": 0.0, "n": 0}
    log(f"training: {len(data.ids):,} sequences, {per_epoch:,} batches per epoch, {total:,} steps, {precision} matrix products")
    while step < total:
        for idx in batches(lengths, cfg.tokens_per_batch, net.window, rng):
            if step >= total or (cfg.max_seconds is not None and time.time() - t0 >= cfg.max_seconds):
                total = min(total, step)  # out of time: this is the last step
                break
            ids = torch.from_numpy(pad(data.ids, idx, net.window)).to(device)
            y = torch.from_numpy(data.labels[idx]).to(device)
            target = y if data.soft is None else torch.from_numpy(data.soft[idx]).to(device)
            yf = torch.from_numpy(data.features[idx]).to(device)
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            label_logits, feature_logits = step_logits(net, ids, precision)
            loss = F.cross_entropy(label_logits, target, weight=label_weight)
            loss = loss + cfg.feature_weight * F.binary_cross_entropy_with_logits(feature_logits, yf)
            if cfg.tail_weight > 0:
                loss = loss + cfg.tail_weight * tail_loss(label_logits, y, block, cfg.tail_share)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            for avg in averages:
                avg.update(net)
            step += 1
            seen += len(idx)
            running["loss"] += loss.item()
            running["acc"] += float((label_logits.argmax(-1) == y).float().mean())
            running["n"] += 1
            now = time.time()
            if now - last >= cfg.log_every_s or step == total:
                n = max(1, running["n"])
                log(
                    f"  step {step:,}/{total:,} ({100 * step / total:.0f}%)  epoch {seen / len(lengths):.2f}  "
                    f"loss {running['loss'] / n:.4f}  acc {running['acc'] / n:.4f}  "
                    f"lr {lr_at(step):.2e}  {seen / (now - t0):.0f} seq/s  {now - t0:.0f}s"
                )
                running = {"loss": 0.0, "acc": 0.0, "n": 0}
                last = now
    net.eval()
    run = {"steps": step, "sequences": seen, "seconds": round(time.time() - t0, 1), "epochs": cfg.epochs}
    return {**run, "precision": precision} if precision != "fp32" else run  # fp32 runs record what they always recorded


@torch.no_grad()
def predict(net: ClefNet, data: Encoded, tokens_per_batch: int = 65536) -> tuple[np.ndarray, np.ndarray]:
    """Label and feature probabilities for every sequence, in order (the training graph, eval mode, on the
    device the net is on)."""
    probs, feats, _ = predict_each(net, data, tokens_per_batch)
    return probs, feats


@torch.no_grad()
def predict_each(net: ClefNet | Ensemble, data: Encoded, tokens_per_batch: int = 65536) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:  # fmt: skip
    """predict's probabilities, and for an Ensemble each member's label probabilities beside them, from one forward
    pass per member: the members' logits are averaged as Ensemble.logits averages them, in the same batches, so
    the ensemble's figures are predict(net, data)'s and each member's predict(member, data)'s, bit for bit (a run
    of two networks reports both alone and then the pair: one pass, not two)."""
    net.eval()
    device = next(net.parameters()).device
    members = list(net.members) if isinstance(net, Ensemble) else []
    lengths = [len(x) for x in data.ids]
    probs = np.zeros((len(lengths), len(LABELS)), dtype=np.float32)
    feats = np.zeros((len(lengths), data.features.shape[1]), dtype=np.float32)
    alone = [np.zeros_like(probs) for _ in members]
    for idx in batches(lengths, tokens_per_batch, net.window, random.Random(0)):
        ids = torch.from_numpy(pad(data.ids, idx, net.window)).to(device)
        if members:
            outs = [m.logits(ids) for m in members]
            for k, out in enumerate(outs):
                alone[k][idx] = probabilities(*out)[0].cpu().numpy()
            p, f = probabilities(*Ensemble.combine(outs))
        else:
            p, f = net(ids)
        probs[idx] = p.cpu().numpy()
        feats[idx] = f.cpu().numpy()
    return probs, feats, alone
