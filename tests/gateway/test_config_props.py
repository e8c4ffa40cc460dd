"""The config loader on any input: a Config or a ConfigError naming a key, never another exception.

Hypothesis builds raw documents three ways: anything YAML could produce; the real key tree with random
values at its leaves (so the checks deep inside are reached, not just the unknown-key guard); and YAML
text, well-formed or not, loaded from a file as `load()` does.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import typing

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway import config as configs
from gateway.config import Config
from gateway.errors import ConfigError

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30), st.sampled_from(["127.0.0.1:0", "http://127.0.0.1:1", "[::1]:80", "detect", "cache"]),
)  # fmt: skip
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=12) | st.integers(), inner, max_size=4),
    max_leaves=20,
)


def key_tree(cls: type) -> dict[str, typing.Any]:
    """Every key of a config dataclass, nested: {"limits": {"max_body_bytes": None, ...}, ...}."""
    hints = typing.get_type_hints(cls)
    tree: dict[str, typing.Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints[f.name]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = args[0] if args and typing.get_origin(tp) is tuple else tp
        tree[f.name] = key_tree(inner) if dataclasses.is_dataclass(inner) else None
        if typing.get_origin(tp) is tuple and dataclasses.is_dataclass(inner):
            tree[f.name] = [tree[f.name]]
    return tree


TREE = key_tree(Config)


@st.composite
def shaped(draw: st.DrawFn, tree: typing.Any = TREE) -> typing.Any:
    """A document following the real key tree, with random values (and sometimes shapes) at its nodes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(documents)  # a wrong shape here, on purpose
    if isinstance(tree, list):
        return [draw(shaped(tree[0])) for _ in range(draw(st.integers(0, 2)))]
    if isinstance(tree, dict):
        names = draw(st.lists(st.sampled_from(sorted(tree)), max_size=len(tree), unique=True))
        return {name: draw(shaped(tree[name])) for name in names}
    return draw(scalars)


def loads_or_refuses(load: typing.Callable[[], Config]) -> None:
    try:
        config = load()
    except ConfigError as err:
        assert err.message and ":" in err.message  # names a key (or the file) before saying what is wrong
    else:
        assert isinstance(config, Config)


@SETTINGS
@given(documents)
def test_any_document(raw):
    loads_or_refuses(lambda: configs.from_dict(raw, env={}))


@SETTINGS
@given(shaped())
def test_any_value_under_the_real_keys(raw):
    loads_or_refuses(lambda: configs.from_dict(raw, env={}))


@SETTINGS
@given(shaped(), st.dictionaries(st.sampled_from(sorted(configs.ENV)), st.text(max_size=20), max_size=3))
def test_any_environment(raw, env):
    loads_or_refuses(lambda: configs.from_dict(raw, env=env))


@SETTINGS
@given(st.text(max_size=300) | st.builds(lambda d: __import__("yaml").safe_dump(d), shaped()))
def test_any_yaml_text(text):
    fd, path = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        loads_or_refuses(lambda: configs.load(path, env={}))
    finally:
        os.unlink(path)
