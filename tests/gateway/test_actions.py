from __future__ import annotations

import pytest

from engine.verdict import Source, Verdict
from gateway import actions
from tests.factories import make_config

CONFIG = make_config(
    {
        "actions": {"block": {"min_confidence": 0.8}, "cache": {"min_confidence": 0.5}},
        "routes": [
            {"prefix": "/beta/", "mode": "detect"},
            {"prefix": "/api/", "actions": {"cache": {"action": "forward"}, "allow": {"action": "block"}}},
        ],
    }
)


@pytest.mark.parametrize(
    "path, label, confidence, kind, intended, mode",
    [
        ("/", "block", 0.90, "block", "block", "enforce"),
        ("/", "block", 0.79, "forward", "forward", "enforce"),  # a doubtful block is forwarded
        ("/", "cache", 0.90, "cache", "cache", "enforce"),
        ("/", "cache", 0.40, "forward", "forward", "enforce"),
        ("/", "origin", 0.10, "forward", "forward", "enforce"),
        ("/", "allow", 0.99, "forward", "forward", "enforce"),
        ("/beta/x", "block", 0.99, "forward", "block", "detect"),  # detect-only: never blocks
        ("/beta/x", "cache", 0.99, "cache", "cache", "detect"),
        ("/api/items", "cache", 0.99, "forward", "forward", "enforce"),
        ("/api/items", "allow", 0.99, "block", "block", "enforce"),
        ("/api/items", "block", 0.70, "forward", "forward", "enforce"),  # the route keeps the top-level threshold
    ],
)
def test_resolve(path, label, confidence, kind, intended, mode):
    action = actions.resolve(Verdict(label, confidence, source=Source.MODEL), CONFIG.route(path))
    assert (action.kind, action.intended, action.mode) == (kind, intended, mode)
    assert action.detected == (intended == "block" and kind != "block")
