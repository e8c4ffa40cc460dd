from __future__ import annotations

from engine.verdict import Source, Verdict
from gateway import actions, annotate
from tests.factories import make_config

VERDICT = Verdict("block", 0.91234, ("sqli", "xss"), Source.RULES, "clef-rules@1")


def test_headers_for_the_origin():
    action = actions.resolve(VERDICT, make_config().route("/"))
    notes = annotate.headers(action, VERDICT)
    assert dict(notes.upstream) == {
        "x-clef-decision": "block",
        "x-clef-confidence": "0.912",
        "x-clef-feature": "sqli,xss",
        "x-clef-source": "rules",
        "x-clef-model": "clef-rules@1",
        "x-clef-action": "block",
        "x-clef-mode": "enforce",
    }
    assert notes.client == ()


def test_echo_gives_the_client_the_same_headers():
    action = actions.resolve(VERDICT, make_config({"mode": "detect"}).route("/"))
    notes = annotate.headers(action, VERDICT, echo=True)
    assert notes.client == notes.upstream
    assert dict(notes.client)["x-clef-mode"] == "detect"


def test_no_features_is_an_empty_value():
    v = Verdict("allow", 1.0)
    notes = annotate.headers(actions.resolve(v, make_config().route("/")), v)
    assert dict(notes.upstream)["x-clef-feature"] == ""


def test_strip_removes_every_client_sent_decision_header():
    sent = [("X-Clef-Decision", "allow"), ("x-clef-anything", "1"), ("X-Clefable", "kept"), ("Accept", "*/*")]
    assert annotate.strip(sent) == [("X-Clefable", "kept"), ("Accept", "*/*")]
