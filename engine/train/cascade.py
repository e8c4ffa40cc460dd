"""An ensemble served as a cascade: one network first, the others only for the requests that need them.

    ids → network F alone → its block probability p (softmax over F's label logits)
    every row of the batch with p <= cutoff: F's own outputs (softmax of its label logits, sigmoid of its features)
    any row with p > cutoff: the other networks run too (ONNX `If`) on those rows alone (gathered, then scattered
    back), and each such row gets the ensemble's outputs (the networks' logits averaged); the rows under the
    cutoff keep F's. A request scored alone, as the gateway scores one at low load, gets the plain ensemble graph's
    scores bit for bit when it passes the cutoff

Why: the default averages two networks, so every request paid two forward passes, though nearly every benign
request is one that either network alone scores far below the block threshold (on the default's dev split, 97 %
of the benign requests score under 0.1 on its second network alone, and the threshold is 0.949). A request whose
first score is under the cutoff is never blocked by the model (cutoff < threshold); the cascade can only drop a
block the ensemble would have made, where F scores a request under the cutoff and the average still reaches the
threshold. `choose` picks F and the cutoff on the dev split so that no dev decision changes even at twice the
cutoff; `attach` then checks the built graph against the ensemble's dev decisions and keeps the plain ensemble
graph if a single one differs.

The block decision is what the cascade keeps; under the cutoff the other labels' scores and the feature tags (the
routing hints among them) are the first network's.
A bundle that routes by the written policy (the default) never reads them; one whose routing head routes
(`routing: model`) gets no cascade, and a gateway set to `model.routing: model` with a cascade bundle routes the
requests under the cutoff by the first network's head alone.

Which path a row takes depends on its own first score only; the `If` saves the second pass when no row of the
batch needs it, and the gather keeps a batch of sixteen with one such row from running it on all sixteen. Dynamic
int8 quantises each activation with one scale per batch, as in every graph we serve (Model.run_settled): in a batch
of several, the other networks' scales are those of the rows that need them. The first network's graph and the others' are each exported and quantised exactly as the
ensemble graph's parts are (dynamic, per tensor, the same layout), so a cascade with its cutoff below every score
is the plain ensemble graph's function, bit for bit (tests/engine/test_cascade.py).
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import numpy as np

from engine.train.data import Encoded, progress
from engine.train.net import Ensemble
from engine.verdict import LABELS

BLOCK = LABELS.index("block")

# cutoffs tried, smallest first; each must stay under the block threshold (calibrated thresholds are >= 0.5)
GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
MARGIN = 2.0  # a cutoff is kept only if MARGIN times it changes no dev decision either


def member_graphs(net: Ensemble, folder: Path, layout: str) -> list[Path]:
    """Each network's logits graph in dynamic int8, quantised as calibrate.int8 quantises the ensemble's graph."""
    from engine.train.export import export_onnx, quantize_dynamic

    paths = []
    for i, member in enumerate(net.members):
        fp32 = export_onnx(member, folder / f"member{i}-fp32.onnx", logits=True)
        paths.append(quantize_dynamic(fp32, folder / f"member{i}.onnx", per_channel=False, layout=layout))
    return paths


def compose(graphs: list[Path], first: int, cutoff: float, out: Path) -> Path:
    """The cascade graph of the networks' int8 logits graphs: `graphs[first]` alone, the average of all where its block
    probability exceeds `cutoff` (a cutoff of 1 or more: the first network alone, always)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    loaded = [onnx.load(str(p)) for p in graphs]
    parts = []
    for i, model in enumerate(loaded):
        g = model.graph
        rename = {v: f"m{i}/{v}" for v in [*(x.name for x in g.initializer), *(o for n in g.node for o in n.output)]}
        for n in g.node:
            n.name = f"m{i}/{n.name}"
            n.input[:] = [rename.get(x, x) for x in n.input]
            n.output[:] = [rename[x] for x in n.output]
        for x in g.initializer:
            x.name = rename[x.name]
        parts.append((list(g.node), list(g.initializer), [rename[o.name] for o in g.output]))
    n_labels = loaded[0].graph.output[0].type.tensor_type.shape.dim[1].dim_value
    n_features = loaded[0].graph.output[1].type.tensor_type.shape.dim[1].dim_value
    first_nodes, _, (l_first, f_first) = parts[first]
    others = [p for i, p in enumerate(parts) if i != first]

    def const(name: str, value) -> "onnx.TensorProto":
        return numpy_helper.from_array(np.asarray(value), f"cascade/{name}")

    node = helper.make_node
    constants = [const("cutoff", np.float32(cutoff)), const("block", np.array([BLOCK], np.int64)),
                 const("zero", np.float32(0)), const("share", np.float32(1 / len(parts))),
                 const("axis1", np.array([1], np.int64)), const("flat", np.array([-1], np.int64))]  # fmt: skip
    initializers = [x for _, inits, _ in parts for x in inits] + constants
    nodes = [*first_nodes,
             node("Softmax", [l_first], ["cascade/p"], axis=-1),
             node("Gather", ["cascade/p", "cascade/block"], ["cascade/p_block"], axis=1),  # [batch, 1]
             node("Greater", ["cascade/p_block", "cascade/cutoff"], ["cascade/rest"]),  # rows that need the others
             node("Cast", ["cascade/rest"], ["cascade/rest_f"], to=TensorProto.FLOAT),
             node("ReduceMax", ["cascade/rest_f"], ["cascade/any_f"], keepdims=0),
             node("Greater", ["cascade/any_f", "cascade/zero"], ["cascade/any"])]  # fmt: skip
    # the others read only the rows that need them (a batch with one such row runs them on that row, not all), and
    # each of those rows gets the average as the ensemble graph takes it: the sum in member order, times 1/n (for
    # n = 2 the same as its mean); the rows are put back in place of the first network's
    then_nodes = [node("Squeeze", ["cascade/rest", "cascade/axis1"], ["cascade/rest_rows"]),
                  node("NonZero", ["cascade/rest_rows"], ["cascade/nonzero"]),  # [1, k]
                  node("Reshape", ["cascade/nonzero", "cascade/flat"], ["cascade/rows"]),  # [k]
                  node("Unsqueeze", ["cascade/rows", "cascade/axis1"], ["cascade/row_index"]),  # [k, 1], for ScatterND
                  node("Gather", ["input_ids", "cascade/rows"], ["cascade/ids"], axis=0)]  # fmt: skip
    for nodes_i, _, _ in others:
        for n in nodes_i:
            n.input[:] = ["cascade/ids" if x == "input_ids" else x for x in n.input]
            then_nodes.append(n)
    outputs = {}
    for kind, k in (("labels", 0), ("features", 1)):
        then_nodes.append(node("Gather", [parts[first][2][k], "cascade/rows"], [f"cascade/{kind}_first_rows"], axis=0))
        outs = [f"cascade/{kind}_first_rows" if i == first else p[2][k] for i, p in enumerate(parts)]
        acc = outs[0]
        for j, o in enumerate(outs[1:]):
            then_nodes.append(node("Add", [acc, o], [f"cascade/{kind}_sum{j}"]))
            acc = f"cascade/{kind}_sum{j}"
        then_nodes += [node("Mul", [acc, "cascade/share"], [f"cascade/{kind}_mean"]),
                       node("ScatterND", [parts[first][2][k], "cascade/row_index", f"cascade/{kind}_mean"], [f"cascade/{kind}_then"])]  # fmt: skip
        outputs[kind] = f"cascade/{kind}_then"
    out_info = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, None)  # noqa: E731
    then_graph = helper.make_graph(then_nodes, "all_networks", [], [out_info(outputs["labels"]), out_info(outputs["features"])])
    else_graph = helper.make_graph(
        [node("Identity", [l_first], ["cascade/labels_else"]), node("Identity", [f_first], ["cascade/features_else"])],
        "first_network", [], [out_info("cascade/labels_else"), out_info("cascade/features_else")],
    )
    nodes += [node("If", ["cascade/any"], ["cascade/labels", "cascade/features"], then_branch=then_graph, else_branch=else_graph),
              node("Softmax", ["cascade/labels"], ["label_probs"], axis=-1),
              node("Sigmoid", ["cascade/features"], ["feature_probs"])]  # fmt: skip
    graph = helper.make_graph(
        nodes, "cascade", list(loaded[0].graph.input),
        [helper.make_tensor_value_info("label_probs", TensorProto.FLOAT, ["batch", n_labels]),
         helper.make_tensor_value_info("feature_probs", TensorProto.FLOAT, ["batch", n_features])],
        initializers,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=list(loaded[0].opset_import), ir_version=loaded[0].ir_version)
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return out


def choose(alone: list[np.ndarray], blocked: np.ndarray, benign: np.ndarray, grid=GRID) -> tuple[int, float] | None:
    """The first network and the cutoff: for each network, the largest cutoff in `grid` such that no row the ensemble
    blocks (`blocked`) scores at most MARGIN times it alone (`alone[i]`: block probabilities); of the networks, the one
    whose cutoff lets the most `benign` rows stop after it (the first on a tie). None when no cutoff qualifies or none
    would let a benign row stop (the cascade would only add its check to every request)."""
    best = None
    for i, p in enumerate(alone):
        lowest_blocked = float(p[blocked].min()) if blocked.any() else np.inf
        fits = [c for c in grid if MARGIN * c < lowest_blocked]
        if not fits:
            continue
        cutoff = fits[-1]
        stop = int((p[benign] <= cutoff).sum())
        if stop and (best is None or stop > best[0]):
            best = (stop, i, cutoff)
    return None if best is None else (best[1], best[2])


def attach(net, dev: Encoded, threshold: float, model: Path, layout: str, log: Callable[[str], None] = progress,
           plain: np.ndarray | None = None, routing: str = "policy") -> dict | None:  # fmt: skip
    """Replace `model` (the plain ensemble graph of `net`, dynamic int8) by its cascade when a first network and a
    cutoff qualify on `dev` (choose) and the cascade graph makes every dev decision the plain graph makes at
    `threshold` (where their batched scores disagree, each graph scores the request alone, as the gateway settles).
    `plain`: the plain graph's block scores of `dev` by calibrate.score_onnx, where the caller has them. `routing`: the bundle's (engine/bundle.py); a bundle whose routing head routes what it lets through keeps
    the plain graph, since under the cutoff that head would be the first network's alone. The record for
    bundle.json's `cascade`, or None (a single network, model routing, or nothing qualified: `model` unchanged)."""
    from engine.model import open_session
    from engine.train.calibrate import alone_scorer, measure_onnx, score_onnx

    if not isinstance(net, Ensemble):
        return None
    if routing != "policy":
        log("  cascade: none, the bundle's routing head routes the requests it lets through; the networks run together")
        return None
    window = net.window
    if plain is None:
        plain = score_onnx(model, dev, window)[:, BLOCK]
    blocked, benign = plain >= threshold, dev.labels != BLOCK
    with tempfile.TemporaryDirectory() as tmp:
        graphs = member_graphs(net, Path(tmp), layout)
        alone_graphs = [compose(graphs, i, 1.0, Path(tmp) / f"alone{i}.onnx") for i in range(len(graphs))]
        with ThreadPoolExecutor(len(alone_graphs)) as pool:  # a core each; one-thread sessions score alike either way
            alone = [p[:, BLOCK] for p in pool.map(lambda g: score_onnx(g, dev, window), alone_graphs)]
        picked = choose(alone, blocked, benign)
        if picked is None or picked[1] >= threshold:
            log("  cascade: none, no network and cutoff both leave every dev decision as it was and let a benign request "
                "stop after one network; the networks run together")
            return None
        first, cutoff = picked
        built = compose(graphs, first, cutoff, Path(tmp) / "cascade.onnx")
        session = open_session(str(built), threads=1)
        scored = score_onnx(session, dev, window)
        # a row whose batched decision differs is scored alone by both graphs, as the gateway settles a score near
        # the threshold: in a batch the other networks' int8 scales are the needing rows', not the whole batch's
        differ = np.flatnonzero((scored[:, BLOCK] >= threshold) != blocked)
        if differ.size:
            mine, theirs = alone_scorer(built, dev, window), alone_scorer(model, dev, window)
            differ = [i for i in differ if (mine(i)[BLOCK] >= threshold) != (theirs(i)[BLOCK] >= threshold)]
        changed = len(differ)
        if changed:
            log(f"  cascade: {changed} dev decisions differ from the networks together; the networks run together")
            return None
        timed = measure_onnx(session, dev, window, scored)
        model.write_bytes(built.read_bytes())
    stops = alone[first] <= cutoff
    record = {
        "first": first,
        "cutoff": cutoff,
        "rule": f"the largest cutoff of {list(GRID)} at which {MARGIN:g} times it changes no dev decision; the network that "
        "lets the most benign dev requests stop after it",
        "dev": {"requests": len(stops), "one_network": round(float(stops.mean()), 5),
                "benign_one_network": round(float(stops[benign].mean()), 5) if benign.any() else None,
                "decisions_changed": 0},
        "dev_p50_ms": round(timed["p50_ms"], 3),  # dev requests within 256 tokens, one thread, on the machine that made it
    }  # fmt: skip
    log(f"  cascade: network {first} first, the others where its block score exceeds {cutoff}: "
        f"{100 * stops.mean():.1f} % of dev requests ({100 * (record['dev']['benign_one_network'] or 0):.1f} % of benign "
        "ones) take one network; no dev decision changes")  # fmt: skip
    return record
