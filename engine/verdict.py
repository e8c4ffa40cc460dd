"""Verdict: what the engine decided about one request, and who decided it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

LABELS = ("block", "cache", "origin", "allow")


class Source(str, Enum):
    MODEL = "model"
    CACHE = "cache"
    RULES = "rules"
    OVERRIDE = "override"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Verdict:
    label: str
    confidence: float
    features: tuple[str, ...] = ()
    source: Source = Source.MODEL
    model: str = ""  # "name@version" of the bundle, or the ruleset's name
    truncated: bool = False  # the model saw only part of the request
    scores: tuple[float, ...] = ()  # per-label probabilities in LABELS order, when a model decided
    tokens: int = field(default=0, compare=False)  # input tokens the model read (0: no model read it), for metrics

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(f"unknown label {self.label!r}")

    @property
    def blocked(self) -> bool:
        return self.label == "block"

    def from_cache(self) -> "Verdict":
        return replace(self, source=Source.CACHE)

    def to_json(self) -> dict:
        out = {
            "label": self.label,
            "confidence": round(float(self.confidence), 3),
            "feature": list(self.features),
            "source": self.source.value,
            "model": self.model,
        }
        if self.truncated:
            out["truncated"] = True
        return out
