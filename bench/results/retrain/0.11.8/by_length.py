"""One-off (bench/RESULTS.md, 0.11.8): attack TPR of three bundles on corpus-svg's test split by request length (0.11.2's
tokenizer), model and rules together at matched benign FPR; the served policy's hand-over of page-asset probes is left out."""
import importlib.util, json, sys
import numpy as np
sys.path.insert(0, ".")  # run from the repository root
from tokenizers import Tokenizer
from engine import bundle as bundles
from engine.model import Model
from engine.train.data import read_jsonl, canonical_parts
spec = importlib.util.spec_from_file_location("tn", "bench/threshold_noise.py"); tn = importlib.util.module_from_spec(spec); spec.loader.exec_module(tn)
recs = list(read_jsonl("work/corpus-svg/test.jsonl"))
tok = Tokenizer.from_file("engine/bundles/default/tokenizer.json")
parts = canonical_parts(recs, 2)
n = np.array([len(tok.encode(h, add_special_tokens=False).ids) + len(tok.encode(b, add_special_tokens=False).ids) for h, b in parts])
out = {"long": int((n > 4096).sum()), "long_attacks": None}
res = {}
for name, path in (("0.11.2", None), ("0.11.8", "work/bundles/r118"), ("0.11.7", "work/bundles/r117b")):
    s = tn.score(Model(bundles.load(path), threads=2), recs)
    a = s["attack"]; out["long_attacks"] = int((a & (n > 4096)).sum())
    ben = np.sort(s["score"][~a & ~s["ruled"]])[::-1]
    row = {}
    for fpr in (0.0024, 0.003, 0.005, 0.01):
        extra = int(round(fpr * (~a).sum())) - int((~a & s["ruled"]).sum())
        t = float(np.nextafter(ben[extra], np.float32(1))) if extra >= 0 else 1.0
        blocked = (s["score"] >= t) | s["ruled"]
        row[f"{100*fpr:g}%"] = {k: round(100 * float(blocked[a & m].mean()), 2) for k, m in
                                (("all", np.ones_like(a)), ("<=4096", n <= 4096), (">4096", n > 4096), ("1025-4096", (n > 1024) & (n <= 4096)))}
    res[name] = row
    print(name, json.dumps(row), flush=True)
out["by_bundle"] = res
json.dump(out, open("work/bylen.json", "w"), indent=1)  # kept as bench/results/retrain/0.11.8/by_length.json
print(out["long"], out["long_attacks"])
