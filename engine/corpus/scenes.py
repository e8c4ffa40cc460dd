"""Scenes: the kinds of ordinary requests the benign generator makes and the attack embedder reuses.

A scene is a named request shape with variants (a blog page, a Next.js asset, a JSON issue post, a
WordPress comment form, ...). `Scene.make(ctx, variant)` returns a Draft with its slots. Some variants of
every scene with four or more are held out: training never sees them, the test split's generated
requests use only them (MODEL-NOTES: split by template).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from engine.corpus import encode, paths, profiles
from engine.corpus.draft import Draft
from engine.corpus.rand import Rng, unit
from engine.corpus.split import SALT, TEST_FRACTION
from engine.corpus.slots import Slot


@dataclass
class Ctx:
    """What a scene needs: its random stream, the split's data pools, and the split."""

    rng: Rng
    pools: Any  # engine.corpus.pools.Pools of this split
    split: str = "train"


@dataclass(frozen=True)
class Scene:
    name: str
    variants: tuple[str, ...]
    fn: Callable[[Ctx, str], Draft]
    tags: frozenset[str] = field(default_factory=frozenset)  # slot positions it offers, plus "long", "text"
    keep: tuple[str, ...] = ()  # variants too common in real traffic to leave out of training

    def make(self, ctx: Ctx, variant: str) -> Draft:
        d = self.fn(ctx, variant)
        d.scene = f"{self.name}/{variant}"
        return d

    def held_out(self) -> tuple[str, ...]:
        if len(self.variants) < 4:
            return ()
        n = max(1, round(TEST_FRACTION * len(self.variants)))
        candidates = [v for v in self.variants if v not in self.keep]
        return tuple(sorted(candidates, key=lambda v: unit(SALT, self.name, v))[:n])

    def usable(self, split: str) -> tuple[str, ...]:
        """Variants a split may use: training never sees held-out variants; test may use all."""
        if split == "test":
            return self.variants
        held = self.held_out()
        return tuple(v for v in self.variants if v not in held)


REGISTRY: dict[str, Scene] = {}


def scene(name: str, variants: tuple[str, ...], tags: str = "", keep: tuple[str, ...] = ()) -> Callable:
    def register(fn: Callable[[Ctx, str], Draft]) -> Callable[[Ctx, str], Draft]:
        REGISTRY[name] = Scene(name, tuple(variants), fn, frozenset(tags.split()), tuple(keep))
        return fn

    return register


def start(ctx: Ctx, method: str, path: str, mode: str, dest: str = "empty", host: str | None = None,
          client: str | None = None) -> Draft:  # fmt: skip
    host = host or paths.host(ctx.rng)
    client, hdrs = profiles.headers(ctx.rng, mode, host, dest, client)
    if method == "HEAD" and client not in ("curl", "requests", "go", "monitor", "bare"):
        method = "GET"
    return Draft(method=method, path=path, headers=hdrs, client=client, mode=mode)


def query_slots(ctx: Ctx, d: Draft, pairs: list[tuple[str, str]], kinds: dict[str, str] | None = None) -> None:
    """Add natural query pairs (unencoded) to a draft, each one a slot."""
    for name, value in pairs:
        d.query.append((encode.browser(name), encode.browser(value, form=ctx.rng.chance(0.5))))
        d.slots.append(Slot("query", name, (kinds or {}).get(name, guess_kind(name))))


def guess_kind(name: str) -> str:
    from engine.corpus.params import NAMES

    for kind, names in NAMES.items():
        if name in names:
            return kind
    return "misc"


def all_scenes() -> dict[str, Scene]:
    # importing the scene modules registers them
    from engine.corpus import scenes_api, scenes_auth, scenes_forms, scenes_site, scenes_text, scenes_web  # noqa: F401  (they register)

    return REGISTRY
