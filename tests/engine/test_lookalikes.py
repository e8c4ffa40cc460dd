"""engine.corpus.lookalikes: benign values built to share surface features with attacks."""

import base64
import re

from engine.corpus import lookalikes
from engine.corpus.rand import Rng
from engine.corpus.split import in_test


def _take(family: str, n: int, seed: int = 3) -> list[tuple[str, str, str]]:
    stream = lookalikes.values(Rng(seed, family), family)
    return [next(stream) for _ in range(n)]


def _b64decode(token: str) -> bytes:
    token = token.rstrip("~.")
    return base64.urlsafe_b64decode(token.replace("+", "-").replace("/", "_") + "=" * (-len(token) % 4))


def test_the_same_seed_gives_the_same_values():
    for family in lookalikes.FAMILIES:
        assert _take(family, 50) == _take(family, 50)
        assert _take(family, 50) != _take(family, 50, seed=4)


def test_joined_phrases_join_a_command_word_phrase_with_a_separator():
    phrases = {p.lower() for ps in lookalikes.COMMAND_PHRASES.values() for p in ps.split("|")}
    values = _take("joined", 300)
    for group, name, value in values:
        word = group.removeprefix("lk:joined:")
        assert word in lookalikes.COMMAND_PHRASES and name == ""
        assert any(p in value.lower() for p in lookalikes.COMMAND_PHRASES[word].lower().split("|")), value
        assert any(sep.strip() in value.lower() for sep in lookalikes.SEPARATORS), value
    shell_like = [v for _, _, v in values if re.search(r"(?:&&?|\|\|?|;) ?[a-z]+ ", v.lower())]
    assert len(shell_like) > 100  # most read like `word & command word ...`, the look this family is for
    assert sum(1 for _, _, v in values if v.lower() in phrases) == 0


def test_questions_fill_every_placeholder():
    values = _take("howto", 400)
    assert {g.removeprefix("lk:howto:") for g, _, _ in values} == set(lookalikes.QUESTIONS)
    for _, _, value in values:
        assert not re.search(r"\{(?:c2?|flag|v|q2?|os|shell|db)\}", value), value
    assert any("$" in v or "%" in v for _, _, v in values)  # variables in both notations
    assert any("waitfor delay" in v or "pg_sleep" in v for _, _, v in values)


def test_tokens_are_opaque_values_with_runs_of_zero_bytes():
    values = _take("token", 600)
    kinds = {g.removeprefix("lk:token:") for g, _, _ in values}
    assert kinds == set(lookalikes.TOKENS)
    for group, name, value in values:
        assert name in lookalikes.TOKEN_NAMES and value and value.isascii() and " " not in value
        kind = group.removeprefix("lk:token:")
        if kind == "zero-b64":
            assert set(_b64decode(value)) == {0}, value
        elif kind == "flags":
            raw = _b64decode(value)
            assert raw.count(0) >= len(raw) // 4 and all(bin(b).count("1") <= 2 for b in raw), value
        elif kind == "padded-id":
            assert _b64decode(value).startswith(b"\0\0"), value
    flags = [v for g, _, v in values if g == "lk:token:flags"]
    assert any("AAAA" in v for v in flags)  # the runs a model could take for padding


def test_whole_groups_are_held_out_and_some_of_each_family_is_trained_on():
    for family in lookalikes.FAMILIES:
        groups = {g for g, _, _ in _take(family, 2000)}
        trained = {g for g in groups if not in_test(g)}
        assert trained and len(trained) < len(groups), family


def test_probes_are_health_and_status_paths_never_what_scanners_probe_for():
    values = _take("probe", 800)
    assert {g.removeprefix("lk:probe:") for g, _, _ in values} == set(lookalikes.PROBE_WORDS)
    scanner_targets = re.compile(r"server-status|status/$|full=true|info\.(?:php|txt)|cgi-bin|\.\.", re.I)
    for group, path, query in values:
        assert path.startswith("/") and "//" not in path and " " not in path, path
        words = lookalikes.PROBE_WORDS[group.removeprefix("lk:probe:")].split("|")
        assert any(f"/{w}" in path for w in words), (group, path)
        assert not scanner_targets.search(path) and not scanner_targets.search(query), (path, query)
    assert any(q for _, _, q in values) and any(p.count("/") >= 3 for _, p, _ in values)


def test_probe_paths_are_not_in_the_scanner_payloads():
    """No probe target is one the shared payload lists label `scanner` (those stay attacks). `/status` is in
    the documented corpus's health checks already; the scanner entry is `status/`, and it stays apart."""
    import json
    import os

    data = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "payloads.jsonl")
    if not os.path.exists(data):
        import pytest

        pytest.skip("shared data not available")
    with open(data) as f:
        scanner = {json.loads(line)["payload"].lstrip("/").lower() for line in f if '"scanner"' in line}
    for _, path, query in _take("probe", 3000):
        target = path.lstrip("/").lower()
        assert target not in scanner and f"{target}?{query}".lower() not in scanner, path
