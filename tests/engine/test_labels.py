"""engine/labels.py: the labelling policy's routing, and a model verdict routed by it (`by_policy`)."""

import pytest

from engine.features import Features
from engine.labels import by_policy, follows_policy, route_label
from engine.verdict import Source, Verdict

COOKIE = {"Cookie": "_ga=GA1.2.3; session=abc", "User-Agent": "Mozilla/5.0"}


@pytest.mark.parametrize(
    "method, path, headers, label, tags",
    [
        ("GET", "/static/app.3f2c.css", COOKIE, "cache", ("static",)),  # a cookie on an asset is no credential
        ("GET", "/products/42", COOKIE, "origin", ("auth",)),
        ("GET", "/products/42", {}, "allow", ()),
        ("POST", "/api/orders", {}, "origin", ("unsafe_method",)),
        ("GET", "/account/orders", {}, "origin", ()),
        ("GET", "/products/42", {"Cache-Control": "no-cache"}, "origin", ()),
        ("GET", "/img/logo.png", {"Authorization": "Bearer t"}, "origin", ("static", "auth")),
    ],
)
def test_route_label_table(method, path, headers, label, tags):
    assert route_label(Features.build(method, path, headers=headers)) == (label, tags)


def model_verdict(label: str, scores: tuple[float, ...], features=()) -> Verdict:
    return Verdict(label, 0.9, features=features, source=Source.MODEL, model="m@1", scores=scores)


def test_a_let_through_request_takes_the_policy_route_and_the_benign_confidence():
    asset = Features.build("GET", "/static/app.css", headers=COOKIE)
    v = by_policy(model_verdict("origin", (0.1, 0.2, 0.6, 0.1), ("auth",)), asset)  # the head: a cookie → origin
    assert (v.label, v.features, v.source, v.model) == ("cache", ("static",), Source.MODEL, "m@1")
    assert v.confidence == pytest.approx(0.9)  # 1 - the block score: the route itself is certain
    assert v.scores == (0.1, 0.2, 0.6, 0.1)  # the model's scores stay what it said


def test_blocks_and_other_sources_are_left_alone():
    f = Features.build("POST", "/login", body="user=a")
    block = model_verdict("block", (0.99, 0.0, 0.01, 0.0), ("sqli",))
    assert by_policy(block, f) is block
    ruled = Verdict("allow", 0.5, source=Source.RULES)
    assert by_policy(ruled, f) is ruled
    no_scores = Verdict("cache", 0.7, source=Source.MODEL)
    assert (by_policy(no_scores, f).label, by_policy(no_scores, f).confidence) == ("origin", 0.7)


def test_follows_policy_reads_only_benign_labels():
    page, post = Features.build("GET", "/products/1"), Features.build("POST", "/api/x", body="{}")
    assert follows_policy([(page, "allow"), (post, "origin"), (page, "block")])
    assert not follows_policy([(page, "allow"), (post, "allow")])  # a site's mark routes a POST otherwise
    assert follows_policy([])
