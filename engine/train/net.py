"""The decision network (PyTorch, for training and export only; serving runs its ONNX export).

Linear in length, one graph for a 60-token GET and a 64K-token body:

    ids [B, L] (L a multiple of W, 0 = padding)
    → embedding
    → local block: depthwise convolution (k=5) + pointwise mix          position-aware n-gram features
    → local block: self-attention inside non-overlapping W-token windows, then a feed-forward
    → per window: masked max over its tokens                           a short payload stays visible
    → global step over the window summaries: max, plus attention pooling with a learned query
    → label logits (block, cache, origin, allow) and feature logits (one per tag)

No absolute positions: what a window holds matters, not where it sits, so lengths far beyond those seen in
training behave. The global step is a pooling over windows (cost linear in their number), not attention
between them. The exported graph ends in a softmax over labels and a sigmoid per feature.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


ACTIVATIONS = {"gelu": F.gelu, "silu": F.silu}  # silu: as good here, and cheaper to train and to serve


def probabilities(label_logits: torch.Tensor, feature_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What the exported graph returns: a softmax over the labels and a sigmoid per feature."""
    return torch.softmax(label_logits, dim=-1), torch.sigmoid(feature_logits)


class FeedForward(nn.Module):
    def __init__(self, d: int, hidden: int, act: str = "gelu"):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)
        self.act = ACTIVATIONS[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(self.act(self.up(self.norm(x))))


def bf16_training() -> bool:
    """Whether this training step runs its matrix products in bfloat16 (engine.train.loop's `bf16` precision: autocast
    on the CPU or GPU). The convolution and the attention then take paths of their own below, written for it."""
    return torch.is_autocast_enabled("cpu") or (torch.cuda.is_available() and torch.is_autocast_enabled("cuda"))


class DepthwiseConv(torch.autograd.Function):
    """x [b, L, d] → [b, L, d]: Conv1d's depthwise convolution along L ('same' padding, weight [d, 1, k], bias [d]) in
    float32, run as the export runs it (a 1 x k conv2d over [b, d, 1, L] in x's own channels-last order, no copies)
    with a backward of its own: the input gradient is the same convolution with the kernel flipped, the weight
    gradient k sums of products of the gradient and x shifted. oneDNN's own backward of the depthwise conv2d took
    10.7 ms of a float32 step at 96 x 256 tokens (the profile in bench/RESULTS.md, "The packaged default since
    2026-12-07 (evening)"); steps with this one ran about 3 % faster than with that conv2d in one-off interleaved
    measures that RESULTS does not record.
    For bf16 training steps only: it sums in another order than Conv1d, so the fp32 recipe keeps Conv1d."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return _depthwise(x, weight, bias)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        k, length = weight.shape[-1], x.shape[1]
        grad = grad.contiguous()
        grad_x = _depthwise(grad, weight.flip(-1), None)
        padded = F.pad(x, (0, 0, k // 2, k // 2))
        grad_w = torch.stack([(grad * padded[:, j : j + length]).sum((0, 1)) for j in range(k)], dim=1).unsqueeze(1)
        return grad_x, grad_w, grad.sum((0, 1))


def _depthwise(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [b, L, d] convolved along L with weight [d, 1, k] per channel ('same' padding): the export's 1 x k conv2d."""
    h = F.conv2d(x.unsqueeze(1).permute(0, 3, 1, 2), weight.unsqueeze(2), bias, padding=(0, weight.shape[-1] // 2), groups=weight.shape[0])
    return h.permute(0, 2, 3, 1).squeeze(1)


class ConvBlock(nn.Module):
    """Depthwise convolution over the embeddings (padding rows are zero, so no mask is needed), then a
    pointwise mix."""

    def __init__(self, d: int, kernel: int, act: str = "gelu"):
        super().__init__()
        self.conv = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.mix = nn.Linear(d, d)
        self.act = ACTIVATIONS[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and bf16_training():  # float32, outside autocast: a bf16 conv's backward is slower still
            with torch.autocast(x.device.type, enabled=False):
                h = DepthwiseConv.apply(x.float(), self.conv.weight, self.conv.bias)
        elif self.training:  # Conv1d over a transposed copy: the summation order the recipe's weights were made with
            # (run as the export's channels-last conv2d it trains a tenth faster on a 2-core EPYC, but sums in
            # another order, and that run, 0.11.10, landed over 0.5 point from the default: bench/RESULTS.md)
            h = self.conv(x.transpose(1, 2)).transpose(1, 2)
        else:  # the export: the same convolution as a 1 x k two-dimensional one, [b, d, 1, L], which ONNX Runtime
            # runs with its depthwise kernel: 11 against 23 µs at d = 64 and 256 tokens, 5 % of the forward pass
            h = _depthwise(x, self.conv.weight, self.conv.bias)
        return x + self.mix(self.act(h))


class WindowAttention(nn.Module):
    def __init__(self, d: int, heads: int, window: int):
        super().__init__()
        self.heads, self.window, self.d = heads, window, d
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, key_bias: torch.Tensor) -> torch.Tensor:
        """x [windows, w, d]; key_bias [windows, 1, 1, w]: 0 for tokens, -1e4 for padding. Every reshape uses
        the layer's own sizes, so the exported graph computes no shapes at run time."""
        w, h, d = self.window, self.heads, self.d
        qkv = self.qkv(self.norm(x))
        if self.training and bf16_training():  # every product in bf16, the softmax in float32: PyTorch's CPU
            # flash attention runs its bf16 backward three times as long as its float32 one (97 against 30 ms a step
            # at 96 x 256 tokens), and in float32 it is the step's largest part; written out, the step is a tenth faster
            q, k, v = (t.reshape(-1, w, h, d // h).transpose(1, 2) for t in qkv.split(d, dim=-1))
            scores = torch.matmul(q, k.transpose(-1, -2)).float() * (1.0 / math.sqrt(d // h)) + key_bias
            y = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2)
            return x + self.out(y.reshape(-1, w, d))
        if self.training:  # the fused kernel trains faster; the export keeps plain, quantisable MatMuls
            # q, k and v as views of the projection: their gradients are joined back by one concatenation, where
            # indexing a stacked tensor made autograd zero a buffer of all three and copy each in (the same
            # values, so the same weights; about a tenth of a training step on a 2-core EPYC, bench/RESULTS.md)
            q, k, v = (t.reshape(-1, w, h, d // h).transpose(1, 2) for t in qkv.split(d, dim=-1))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=key_bias).transpose(1, 2)
            return x + self.out(y.reshape(-1, w, d))
        # the export: each head's q, k and v sliced off the projection's last axis ([windows, w, dh], no transposes: ONNX
        # Runtime multiplies by kᵀ in place) and the heads joined on it again: the int8 graph scores as the earlier
        # export's did (one [windows, h, w, dh] tensor per q, k, v), 5 % faster at 256 tokens (bench/RESULTS.md)
        dh = d // h
        parts = qkv.split(dh, dim=-1)  # q's heads, then k's, then v's
        bias = key_bias.reshape(-1, 1, w)
        heads = []
        for i in range(h):
            scores = torch.matmul(parts[i] * (1.0 / math.sqrt(dh)), parts[h + i].transpose(-1, -2)) + bias
            heads.append(torch.matmul(torch.softmax(scores, dim=-1), parts[2 * h + i]))
        return x + self.out(torch.cat(heads, dim=-1))


class ClefNet(nn.Module):
    def __init__(
        self,
        vocab: int,
        n_labels: int,
        n_features: int,
        d: int = 64,
        window: int = 64,
        heads: int = 2,
        kernel: int = 5,
        ffn: int = 128,
        act: str = "silu",
    ):
        super().__init__()
        self.config = dict(vocab=vocab, n_labels=n_labels, n_features=n_features, d=d, window=window,
                           heads=heads, kernel=kernel, ffn=ffn, act=act)  # fmt: skip
        self.window = window
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.conv = ConvBlock(d, kernel, act)
        self.attn = WindowAttention(d, heads, window)
        self.ff = FeedForward(d, ffn, act)
        self.norm = nn.LayerNorm(d)
        self.query = nn.Linear(d, 1, bias=False)  # the learned query of the attention pooling
        self.key = nn.Linear(d, d)
        self.head = nn.Sequential(nn.Linear(2 * d, d), nn.SiLU() if act == "silu" else nn.GELU())
        self.labels = nn.Linear(d, n_labels)
        self.features = nn.Linear(d, n_features)

    def logits(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w, d = self.window, self.config["d"]
        n = ids.shape[1] // w  # the only size read at run time: windows per request
        neg = (ids == 0).to(torch.float32).reshape(-1, w) * -1e4  # [b*n, w]: 0 for tokens, -1e4 for padding
        x = self.conv(self.embed(ids)).reshape(-1, w, d)  # the convolution reads across windows; the rest within
        x = self.norm(self.ff(self.attn(x, neg.reshape(-1, 1, 1, w))))
        # window summaries: max over each window's real tokens
        win = (x + neg.unsqueeze(-1)).amax(dim=1).reshape(-1, n, d)  # [b, n, d]
        win_neg = neg.amax(dim=1).reshape(-1, n)  # [b, n]: 0 where the window holds a token
        win = win * ((win_neg + 1e4) * 1e-4).unsqueeze(-1)  # empty windows (batch padding) → 0
        g_max = (win + win_neg.unsqueeze(-1)).amax(dim=1)
        att = torch.softmax(self.query(self.key(win)).squeeze(-1) * (1.0 / math.sqrt(d)) + win_neg, dim=1)
        g_att = torch.matmul(att.unsqueeze(1), win).squeeze(1)
        z = self.head(torch.cat([g_max, g_att], dim=-1))
        return self.labels(z), self.features(z)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Probabilities, as the exported graph returns them."""
        return probabilities(*self.logits(ids))


class Ensemble(nn.Module):
    """Several ClefNets that read the same token ids (one tokenizer, one window), their logits averaged.

    Two training runs of one recipe err on different requests: averaging the block logits of two seed-1 bundles
    (3 and 5 epochs) caught more held-out attacks than either at every benign false-positive rate from 0.05 to
    1 % (bench/RESULTS.md). Exported as one graph with the interface of a single network, so serving, int8
    quantisation, calibration and fine-tuning treat it as one; it costs one forward pass per member.
    """

    def __init__(self, members: list[nn.Module]):
        super().__init__()
        # an ensemble among the members contributes its own members: every network weighs the same
        members = [n for m in members for n in (m.members if isinstance(m, Ensemble) else [m])]
        if len(members) < 2:
            raise ValueError("an ensemble needs at least two member networks")
        first = members[0].config
        for m in members[1:]:
            for key in ("vocab", "n_labels", "n_features", "window"):
                if m.config[key] != first[key]:
                    raise ValueError(f"ensemble members differ in {key}: {first[key]} and {m.config[key]}")
        self.members = nn.ModuleList(members)
        self.window = members[0].window
        self.config = {"ensemble": [dict(m.config) for m in members]}

    def logits(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.combine([m.logits(ids) for m in self.members])

    @staticmethod
    def combine(outs: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The members' (label, feature) logits averaged: the ensemble's."""
        return torch.stack([o[0] for o in outs]).mean(0), torch.stack([o[1] for o in outs]).mean(0)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return probabilities(*self.logits(ids))


def build(config: dict) -> nn.Module:
    """The network a saved config describes: a ClefNet, or an Ensemble of them (`{"ensemble": [config, ...]}`)."""
    if "ensemble" in config:
        return Ensemble([ClefNet(**c) for c in config["ensemble"]])
    return ClefNet(**config)


def vocab_size(config: dict) -> int:
    return int(config["ensemble"][0]["vocab"] if "ensemble" in config else config["vocab"])
