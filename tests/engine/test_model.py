"""engine/model.py with the real default bundle: budgets, truncation, batching, long inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import bundle as bundles
from engine.features import Features
from engine.model import CLS, SEP, LineTokens, Model, fit, token_ids


@pytest.fixture(scope="module")
def model():
    return Model(bundles.load())


@pytest.mark.parametrize(
    "head, body, budget, want, cut",
    [
        ([5, 6], [7, 8], 10, [CLS, 5, 6, SEP, 7, 8], False),
        ([5, 6], list(range(10, 30)), 10, [CLS, 5, 6, SEP, 10, 11, 12, 27, 28, 29], True),  # body head + tail
        (list(range(10, 30)), [], 10, [CLS, *range(10, 18), SEP], True),  # head alone is cut
        (list(range(10, 30)), [99] * 5, 10, [CLS, 10, 11, 12, 13, SEP, 99, 99, 99, 99], True),
    ],
)
def test_fit(head, body, budget, want, cut):
    ids, truncated = fit(head, body, budget)
    assert ids == want and truncated is cut
    assert len(ids) <= budget


def test_scores_are_probabilities(model):
    batch = [model.encode(Features.build("GET", "/index.html")), model.encode(Features.build("GET", "/a", "q=x" * 50))]
    labels, feats = model.run(batch)
    assert labels.shape == (2, 4) and feats.shape == (2, len(model.bundle.features))
    assert np.allclose(labels.sum(axis=1), 1.0, atol=1e-3)
    assert ((feats >= 0) & (feats <= 1)).all()


def test_batch_equals_single(model):
    fs = [Features.build("GET", "/x", f"id={i}" * (i + 1)) for i in range(5)]
    encs = [model.encode(f) for f in fs]
    together, _ = model.run(encs)
    for i, e in enumerate(encs):
        alone, _ = model.run([e])
        # dynamic int8 quantises activations with one scale per batch, so a neighbour can move a score a little
        # (0.3.1: 0.034 on a request scored 0.42 alone)
        assert np.allclose(together[i], alone[0], atol=5e-2)


def test_a_score_near_the_threshold_is_settled_alone_and_the_others_keep_their_batch_scores(model, monkeypatch):
    fs = [Features.build("GET", "/search", f"q={w}") for w in ("shoes", "1' or '1'='1", "<script>alert(1)</script>")]
    fs.append(Features.build("POST", "/api/notes", body=b"x=" + b"lorem ipsum " * 400))  # a long neighbour
    encs = [model.encode(f) for f in fs]
    b = model.bundle.labels.index("block")
    alone = [model.run([e]) for e in encs]
    batched, _ = model.run(encs)
    assert not np.array_equal(batched[0], alone[0][0][0])  # the neighbour moves the first request's scores
    monkeypatch.setitem(model.bundle.manifest["thresholds"], "block", float(batched[0, b]))  # it sits on the threshold
    near = model.near_threshold(batched)
    assert 0 in near and 1 not in near and 2 not in near  # the attacks score far above it
    labels, feats = model.run_settled(encs)
    for i in range(len(encs)):
        if i in near:  # settled: the request's own scores, whatever shared its batch
            assert np.array_equal(labels[i], alone[i][0][0]) and np.array_equal(feats[i], alone[i][1][0])
        else:  # far from the threshold the batch's scores stand
            assert np.array_equal(labels[i], batched[i])
    assert model.run_settled(encs[:1])[0].tolist() == alone[0][0].tolist()


def test_full_budget_input_runs_and_is_marked(model):
    body = ("lorem ipsum dolor sit amet " * 40000).encode()
    enc = model.encode(Features.build("POST", "/doc", headers={"content-type": "text/plain"}, body=body))
    assert enc.length == model.max_tokens == 65536
    assert enc.truncated
    labels, _ = model.run([enc])
    assert labels.shape == (1, 4)


def test_verdict_threshold_and_tags(model):
    names = model.bundle.features
    feats = np.zeros(len(names), dtype=np.float32)
    feats[names.index("sqli")] = 0.9
    feats[names.index("static")] = 0.8
    v = model.verdict(np.array([0.99, 0.0, 0.0, 0.01], dtype=np.float32), feats)
    assert v.label == "block" and v.features == ("sqli", "static")
    v = model.verdict(np.array([0.01, 0.9, 0.05, 0.04], dtype=np.float32), feats)
    assert v.label == "cache" and v.features == ("static",)  # attack tags only accompany a block
    assert v.model == model.id


def test_served_graph_leaves_out_the_slow_fusion_and_scores_the_same(model, tmp_path):
    """The session runs without SkipLayerNormFusion (slower at d=64, bench/RESULTS.md) and still scores
    as the graph with every rewrite does."""
    import onnx
    import onnxruntime as ort

    from engine.model import DISABLED_OPTIMIZERS

    assert DISABLED_OPTIMIZERS == ("SkipLayerNormFusion",)

    def optimised(disabled: list[str], name: str) -> tuple[ort.InferenceSession, set[str]]:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.optimized_model_filepath = str(tmp_path / name)
        sess = ort.InferenceSession(str(model.bundle.model_path), opts, ["CPUExecutionProvider"], disabled_optimizers=disabled)
        return sess, {n.op_type for n in onnx.load(str(tmp_path / name)).graph.node}

    full, full_ops = optimised([], "full.onnx")
    served, served_ops = optimised(list(DISABLED_OPTIMIZERS), "served.onnx")
    # the fusion finds the plain two-network graph's residual adds and LayerNorms (0.11.2's); in the cascade graph
    # (0.11.13's) ONNX Runtime applies it nowhere, so there leaving it out changes nothing, and must still change nothing
    assert "SkipLayerNormalization" not in served_ops
    assert full_ops - served_ops <= {"SkipLayerNormalization"}
    batch = [model.encode(Features.build("GET", "/search", f"q=select+{i}&page={i}" * (i + 1))) for i in range(4)]
    ids = np.zeros((4, model.padded_length(max(e.length for e in batch))), dtype=np.int64)
    for i, e in enumerate(batch):
        ids[i, : e.length] = e.ids
    want, _ = full.run(None, {model.input_name: ids})
    got, _ = model.run(batch)
    assert np.allclose(got, want, atol=1e-5)
    assert np.allclose(served.run(None, {model.input_name: ids})[0], got, atol=1e-7)


LINE_ALPHABET = st.sampled_from(
    ["a", "Z", "é", "ж", "中", "1", "0", " ", "  ", "\t", "\u2028", "\u3000", "'s", "'", "=", "/", "%", "<", "[ID]",
     "[NUM]", "[SQLI]", "\\n", "--", ".", "😀", "\x0b", "select", " union", "h ", "q "]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(LINE_ALPHABET, max_size=12).map("".join), min_size=1, max_size=8))
def test_line_tokens_give_the_ids_of_the_whole_text(model, lines):
    """Tokenising line by line (with remembered lines) is exact, whatever the lines hold: leading or
    trailing whitespace, empty lines, unicode separators, special tokens."""
    text = "\n".join(lines)
    whole = model.tokenizer.encode(text, add_special_tokens=False).ids
    assert model.lines is not None
    assert model.lines.ids(text) == whole
    assert model.lines.ids(text) == whole  # again, now from remembered lines


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=400), st.lists(LINE_ALPHABET, max_size=60).map("".join)))
def test_token_ids_are_the_ids_encode_gives(model, text):
    """The batch call without offsets that encoding uses gives `encode`'s ids for any text: unicode, control
    characters, special-token names, whitespace runs."""
    assert token_ids(model.tokenizer, text) == model.tokenizer.encode(text, add_special_tokens=False).ids


def test_line_tokens_apply_only_to_a_byte_level_tokenizer_without_normalizer(model):
    from tokenizers import Tokenizer, normalizers

    assert LineTokens.applies(model.tokenizer)
    other = Tokenizer.from_str(model.tokenizer.to_str())
    other.normalizer = normalizers.Lowercase()
    assert not LineTokens.applies(other)
    assert Model(model.bundle).lines is not None
    long_line = "h user-agent = " + "x" * 600  # over max_chars: encoded, not remembered
    assert model.lines.ids(long_line) == model.tokenizer.encode(long_line, add_special_tokens=False).ids
    assert long_line not in model.lines.cache
    model.encode(Features.build("GET", "/remembered", "q=1"))
    assert len(model.lines.cache) > 0
    model.forget()
    assert len(model.lines.cache) == 0


def test_line_tokens_fall_back_where_a_token_would_cross_a_newline():
    """A tokenizer that learnt to merge whitespace around newlines (`ĠĊĠ`): a line that ends or starts
    with whitespace, or an empty line, makes LineTokens encode the text whole, so the ids stay exact."""
    from engine.train.tokenizer import train_tokenizer

    tok = train_tokenizer(["key = value \n next = \n\n  more \n"] * 200, vocab_size=300, min_frequency=2)
    texts = ["key = value \n next = x", "a\n\nb", "x =  \n  y", "plain\nlines\nonly"]
    assert any("Ċ" in t and len(t) > 1 for t in tok.encode(texts[0]).tokens)  # a token crosses the newline
    lines = LineTokens(tok)
    assert LineTokens.applies(tok)
    for text in texts:
        for line in text.split("\n"):
            lines.ids(line)  # each line remembered on its own first
        assert lines.ids(text) == tok.encode(text, add_special_tokens=False).ids


def test_line_tokens_remember_a_bounded_number_of_lines(model):
    lines = LineTokens(model.tokenizer, max_lines=4)
    text = "\n".join(f"q k{i} = v{i}" for i in range(10))
    assert lines.ids(text) == model.tokenizer.encode(text, add_special_tokens=False).ids
    assert len(lines.cache) == 4
