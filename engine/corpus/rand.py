"""Seeded randomness for the corpus builder.

Every stream of random choices is its own `Rng`, derived from the build seed and a name, so adding a
stream does not shift the others and the output is the same bytes for the same seed. Nothing here uses
Python's per-process string hashing (`hash()`, set order), which changes between runs.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of the parts that is the same in every process (unlike `hash()`)."""
    data = "\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def unit(*parts: object) -> float:
    """A stable number in [0, 1) for the parts: a coin that lands the same way on every run."""
    return stable_hash(*parts) / 2.0**64


class Rng(random.Random):
    """`random.Random` seeded from names (str seeds go through SHA-512: stable across runs), plus the few
    helpers the generators use everywhere."""

    def __init__(self, *parts: object) -> None:
        self.key = "\x1f".join(map(str, parts))
        super().__init__(self.key)

    def child(self, *parts: object) -> "Rng":
        """A named child stream derives from this stream's seed and the name only, so adding a named stream
        never shifts another; an unnamed child (one per record) takes the next draw of this stream."""
        if parts:
            return Rng(self.key, *parts)
        return Rng(self.getrandbits(64))

    def pick(self, seq: Sequence[T]) -> T:
        return seq[int(self.random() * len(seq))]

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        """Like random.randrange, several times faster for the (start, stop) calls the generators make."""
        if stop is None:
            start, stop = 0, start
        if step == 1 and stop > start:
            return start + int(self.random() * (stop - start))
        return super().randrange(start, stop, step)

    def call(self, *choices: Callable[[], T]) -> T:
        """Evaluate one of several alternatives (only the chosen one is computed)."""
        return choices[int(self.random() * len(choices))]()

    def chance(self, p: float) -> bool:
        return self.random() < p

    def hexid(self, n: int) -> str:
        return "%0*x" % (n, self.getrandbits(4 * n))

    def alnum(self, n: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz0123456789") -> str:
        return "".join(self.choices(alphabet, k=n))

    def loguniform(self, lo: float, hi: float) -> float:
        """Sizes spread over orders of magnitude: as many 1-10 KB bodies as 10-100 KB ones."""
        return lo * (hi / lo) ** self.random()


class Weighted:
    """A fixed weighted choice, with the cumulative table built once (the generators draw millions)."""

    def __init__(self, pairs: Sequence[tuple[T, float]] | dict) -> None:
        items = list(pairs.items()) if isinstance(pairs, dict) else list(pairs)
        self.items = [k for k, w in items if w > 0]
        self.cum: list[float] = []
        total = 0.0
        for _, w in items:
            if w > 0:
                total += w
                self.cum.append(total)
        self.total = total

    def draw(self, rng: random.Random):
        return self.items[bisect.bisect_right(self.cum, rng.random() * self.total)]

    def __bool__(self) -> bool:
        return bool(self.items)
